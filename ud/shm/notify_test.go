package shm

import (
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
)

// TestNotifierFutex: Direct receivers of two rings share one Notifier,
// which sleeps on both rings' futexes on the consumer's own thread (no
// waker goroutine): a packet on either ring wakes it, Signal wakes it, a
// writer wakes only while the consumer sleeps, and the idle wait allocates
// nothing. The waits are long, so that a wake that does not happen is a
// test that does not end, not a slow one.
func TestNotifierFutex(t *testing.T) {
	dir := ringDir(t)
	n := ud.NewNotifier()
	var ss [2]*Sender
	var rs [2]*Receiver
	for i := range rs {
		c := testConfig(dir, Direct)
		c.Name = []string{"ring0", "ring1"}[i]
		c.Notifier = n
		c.CheckInterval = time.Hour // nothing wakes the wait but the rings
		ss[i] = newSender(t, c)
		rs[i] = newReceiver(t, c)
		select {
		case <-rs[i].wakerDone:
		default:
			t.Fatalf("ring %d: a waker goroutine runs; the Notifier should sleep on the futex itself", i)
		}
	}
	poll := func() int {
		got := 0
		for _, r := range rs {
			r.Fill()
			for r.Peek(0) != nil {
				r.Release(1)
				got++
			}
		}
		return got
	}
	// wait runs one Notifier wait of an hour in the background and
	// reports what the poll after it took.
	wait := func() <-chan int {
		ch := make(chan int, 1)
		go func() {
			n.Wait(time.Hour, nil, poll)
			ch <- poll()
		}()
		return ch
	}
	sleeping := func(i int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for ss[i].r.sleeping.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("ring %d: the consumer never registered as a sleeper", i)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	buf := make([]byte, 512)
	for round, ring := range []int{1, 0, 1} {
		got := wait()
		sleeping(0)
		sleeping(1)
		if err := ss[ring].Send([][]byte{packet(buf, "SESSION001", uint64(round), 512)}); err != nil {
			t.Fatal(err)
		}
		select {
		case k := <-got:
			if k != 1 {
				t.Fatalf("round %d: woken by ring %d, took %d packets, want 1", round, ring, k)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a packet on ring %d did not wake the consumer", round, ring)
		}
	}
	if w := ss[1].Stats().Syscalls; w != 2 {
		t.Errorf("ring 1's writer woke %d times, want 2 (once per packet sent to a sleeping consumer)", w)
	}
	// A packet sent while nobody sleeps costs the writer no wake.
	before := ss[0].Stats().Syscalls
	if err := ss[0].Send([][]byte{packet(buf, "SESSION001", 9, 512)}); err != nil {
		t.Fatal(err)
	}
	if w := ss[0].Stats().Syscalls; w != before {
		t.Errorf("a Send with no sleeper made %d wakes", w-before)
	}
	if k := poll(); k != 1 {
		t.Errorf("took %d packets, want 1", k)
	}
	// Signal (a recovery answer) wakes it too.
	got := wait()
	sleeping(0)
	n.Signal()
	select {
	case k := <-got:
		if k != 0 {
			t.Errorf("Signal: took %d packets, want 0", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Signal did not wake the consumer")
	}
	if m := ss[0].r.sleeping.Load() | ss[1].r.sleeping.Load(); m != 0 {
		t.Errorf("sleeping mask %b after the wait: the consumer did not withdraw", m)
	}
	testenv.NoAllocs(t, "an idle wait on two rings' futexes", 50, 1, func() {
		n.Wait(10*time.Microsecond, nil, poll)
	})
}
