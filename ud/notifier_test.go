package ud

import (
	"testing"
	"time"

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
