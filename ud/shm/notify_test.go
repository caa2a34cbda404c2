package shm

import (
	"runtime"
	"sync/atomic"
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

// TestWakeOncePerSleep: the writer wakes a sleeper once, not on every Send
// while the woken reader gets going with its bit still set, nor forever
// for the bit of a reader killed in its sleep; a reader that sleeps again
// at the new position is woken again.
func TestWakeOncePerSleep(t *testing.T) {
	c := testConfig(ringDir(t), Direct)
	s := newSender(t, c)
	m := s.r
	const bit = uint64(1) << 63 // a reader of the test's own
	buf := make([]byte, 512)
	send := func(k int) uint64 {
		t.Helper()
		before := s.Stats().Syscalls
		for i := 0; i < k; i++ {
			if err := s.Send([][]byte{packet(buf, "SESSION001", uint64(i), 512)}); err != nil {
				t.Fatal(err)
			}
		}
		return s.Stats().Syscalls - before
	}
	if w := send(10); w != 0 {
		t.Errorf("no sleeper: %d wakes", w)
	}
	if !m.arm(bit, m.pos.Load()) {
		t.Fatal("arm refused with nothing new")
	}
	if w := send(100); w != 1 {
		t.Errorf("a sleeper that never clears its bit (woken, or killed): %d wakes over 100 Sends, want 1", w)
	}
	if m.arm(bit, m.pos.Load()-1) {
		t.Error("arm accepted a reader with a packet not yet taken")
	}
	if !m.arm(bit, m.pos.Load()) {
		t.Fatal("arm refused with nothing new")
	}
	if w := send(100); w != 1 {
		t.Errorf("the reader slept again at the new position: %d wakes over 100 Sends, want 1", w)
	}
	m.sleeping.And(^bit)
	if w := send(10); w != 0 {
		t.Errorf("the bit cleared: %d wakes", w)
	}
}

// TestNoLostWakeup: a reader that sleeps between packets is always woken.
// Its waits and file checks last an hour, so a lost wake-up is a test
// that stops at its deadline, not a slow one. The writer sends small
// batches with pauses, so that the reader goes to sleep often and at every
// point of the writer's publish.
func TestNoLostWakeup(t *testing.T) {
	for _, mc := range []modeCase{{"direct", Direct, true}, {"blocking", Blocking, false}} {
		t.Run(mc.name, func(t *testing.T) {
			c := testConfig(ringDir(t), mc.mode)
			c.CheckInterval = time.Hour
			s := newSender(t, c)
			r := newReceiver(t, c)
			const n = 20000
			go func() {
				bufs := [3][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
				batch := make([][]byte, 0, 3)
				for i := uint64(0); i < n; {
					k := min(n-i, i%3+1)
					batch = batch[:0]
					for j := uint64(0); j < k; j++ {
						batch = append(batch, packet(bufs[j], "SESSION001", i+j, 64))
					}
					if err := s.Send(batch); err != nil {
						t.Error(err)
						return
					}
					i += k
					switch i % 7 {
					case 0:
						time.Sleep(time.Duration(i%50) * time.Microsecond)
					case 3:
						runtime.Gosched()
					}
				}
			}()
			var next atomic.Uint64
			// The watchdog: a reader asleep for good is woken by Close.
			var stuck atomic.Bool
			watchdog := time.AfterFunc(60*time.Second, func() {
				stuck.Store(true)
				r.Close()
				if c.Notifier != nil {
					c.Notifier.Signal()
				}
			})
			defer watchdog.Stop()
			for next.Load() < n {
				if stuck.Load() {
					t.Fatalf("stuck at packet %d of %d for a minute (a lost wake-up): %+v, writer %+v", next.Load(), n, r.Stats(), s.Stats())
				}
				if mc.mode == Direct {
					if r.Fill() == 0 {
						c.Notifier.Wait(time.Hour, nil, r.Fill)
					}
				} else {
					_ = r.Wait(time.Second)
				}
				for p := r.Peek(0); p != nil; p = r.Peek(0) {
					if _, i := checkPacket(t, p.Data()); i != next.Load() {
						t.Fatalf("packet %d, want %d", i, next.Load())
					}
					next.Add(1)
					r.Release(1)
				}
			}
			t.Logf("writer %+v", s.Stats())
		})
	}
}
