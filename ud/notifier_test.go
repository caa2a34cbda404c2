package ud

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/internal/testenv"
)

// TestNotifierWakesOnAnyRing: a consumer sleeping on one notifier shared by
// two rings wakes when either publishes, and times out or stops otherwise.
func TestNotifierWakesOnAnyRing(t *testing.T) {
	n := NewNotifier()
	rings := make([]*Ring, 2)
	for i := range rings {
		r, err := NewRing(8, 64)
		if err != nil {
			t.Fatal(err)
		}
		r.SetNotifier(n)
		rings[i] = r
	}
	poll := func() int {
		got := 0
		for _, r := range rings {
			if k := r.Len(); k > 0 {
				r.Release(k)
				got += k
			}
		}
		return got
	}
	for i, r := range rings {
		woke := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			n.Wait(10*time.Second, nil, func() int { return 0 })
			woke <- time.Since(start)
		}()
		time.Sleep(20 * time.Millisecond) // let it sleep
		r.Publish(1)
		select {
		case d := <-woke:
			if d >= 10*time.Second {
				t.Fatalf("ring %d: woke by timeout", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ring %d: publish did not wake the consumer", i)
		}
		if poll() != 1 {
			t.Fatalf("ring %d: published slot not seen", i)
		}
	}
	// Data already there: Wait returns at once through poll.
	rings[1].Publish(2)
	if !n.Wait(10*time.Second, nil, poll) {
		t.Fatal("Wait returned false without done")
	}
	if rings[1].Len() != 0 {
		t.Fatal("poll did not take the data")
	}
	// Nothing comes: timeout. done closed: false.
	if !n.Wait(time.Millisecond, nil, poll) {
		t.Fatal("timeout returned false")
	}
	done := make(chan struct{})
	close(done)
	if n.Wait(time.Hour, done, poll) {
		t.Fatal("closed done returned true")
	}
	const waits = 20
	testenv.NoAllocs(t, "Wait", 20, waits, func() {
		for range waits {
			n.Wait(time.Microsecond, nil, poll)
		}
	})
}

// TestNotifierSignalWhileClosing: a producer that signals while the
// consumer closes its Notifier (a recovery answer arriving as a subscriber
// closes) must not touch the eventfd being closed. The race detector run
// (go test -race) fails this test without the lock Close and Signal share.
func TestNotifierSignalWhileClosing(t *testing.T) {
	for i := 0; i < 100; i++ {
		n := NewNotifier()
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Watch(fd); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		signalled := make(chan int)
		running := make(chan struct{})
		go func() {
			n.Signal()
			k := 1
			close(running)
			for {
				select {
				case <-stop:
					signalled <- k
					return
				default:
				}
				n.Signal()
				k++
			}
		}()
		// The consumer waits (so Signal writes the eventfd), then closes,
		// once the producer runs: on a loaded machine it may not have been
		// scheduled within the waits.
		<-running
		for w := 0; w < 3; w++ {
			n.Wait(time.Millisecond, nil, func() int { return 0 })
		}
		n.waiting.Store(true) // a Signal in flight from the last wait
		n.Close()
		close(stop)
		if k := <-signalled; k == 0 {
			t.Fatalf("round %d: the producer never signalled", i)
		}
		unix.Close(fd)
	}
}
