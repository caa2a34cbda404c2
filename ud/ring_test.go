package ud

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
)

func mustRing(t testing.TB, capacity, slotSize int) *Ring {
	t.Helper()
	r, err := NewRing(capacity, slotSize)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRingRejectsBadSizes(t *testing.T) {
	for _, tc := range []struct{ capacity, slotSize int }{
		{0, 8}, {3, 8}, {6, 8}, {-4, 8}, {MaxRingSlots * 2, 8}, {4, 0}, {4, -1},
	} {
		if _, err := NewRing(tc.capacity, tc.slotSize); err == nil {
			t.Errorf("NewRing(%d, %d): no error", tc.capacity, tc.slotSize)
		}
	}
	for _, c := range []int{1, 2, 4, 1024} {
		r := mustRing(t, c, 16)
		if r.Cap() != c || r.Free() != c || r.Len() != 0 {
			t.Errorf("NewRing(%d): Cap %d Free %d Len %d", c, r.Cap(), r.Free(), r.Len())
		}
		for k := 0; k < c; k++ {
			if b := r.Slot(k).Buf; len(b) != 16 || cap(b) != 16 {
				t.Fatalf("slot %d: len %d cap %d, want 16/16", k, len(b), cap(b))
			}
		}
	}
}

// TestRingSequential walks the indexes across many wraps with varying batch
// sizes and checks FIFO order, the free/lent counts and Writable's contiguity.
func TestRingSequential(t *testing.T) {
	const capacity = 8
	r := mustRing(t, capacity, 8)
	var next, want uint64
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 2000; round++ {
		start, n := r.Writable()
		if n > r.Free() || start+n > capacity {
			t.Fatalf("Writable() = %d, %d with Free %d", start, n, r.Free())
		}
		if r.Free() > 0 && n == 0 {
			t.Fatalf("Writable() = 0 slots with Free %d", r.Free())
		}
		fill := rng.IntN(r.Free() + 1)
		for i := 0; i < fill; i++ {
			s := r.FreeSlot(i)
			if i < n && s != r.Slot(start+i) {
				t.Fatalf("FreeSlot(%d) is not Slot(%d)", i, start+i)
			}
			binary.LittleEndian.PutUint64(s.Buf, next+uint64(i))
			s.N = 8
		}
		if r.FreeSlot(r.Free()) != nil {
			t.Fatalf("FreeSlot(%d) beyond Free is not nil", r.Free())
		}
		r.Publish(fill)
		next += uint64(fill)
		if got := r.Len() + r.Free(); got != capacity {
			t.Fatalf("Len+Free = %d, want %d", got, capacity)
		}
		take := rng.IntN(r.Len() + 1)
		for i := 0; i < take; i++ {
			if got := binary.LittleEndian.Uint64(r.Peek(i).Data()); got != want+uint64(i) {
				t.Fatalf("Peek(%d) = item %d, want %d", i, got, want+uint64(i))
			}
		}
		if r.Peek(r.Len()) != nil {
			t.Fatalf("Peek(%d) beyond Len is not nil", r.Len())
		}
		r.Release(take)
		want += uint64(take)
	}
	if next-want != uint64(r.Len()) {
		t.Fatalf("published %d released %d but Len %d", next, want, r.Len())
	}
}

func TestRingNeverOverwritesLentSlots(t *testing.T) {
	r := mustRing(t, 4, 8)
	r.Publish(4)
	if r.Free() != 0 || r.FreeSlot(0) != nil {
		t.Fatalf("full ring: Free %d FreeSlot(0) %v", r.Free(), r.FreeSlot(0))
	}
	if _, n := r.Writable(); n != 0 {
		t.Fatalf("full ring: Writable n = %d", n)
	}
	mustPanic(t, "Publish on a full ring", func() { r.Publish(1) })
	r.Release(1)
	mustPanic(t, "Publish(2) with one free slot", func() { r.Publish(2) })
	r.Publish(1)
	mustPanic(t, "Release beyond Len", func() { r.Release(5) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// TestRingConcurrent runs a producer and a consumer with random batch sizes,
// both sometimes blocking in WaitFree/Wait, and checks every item arrives
// exactly once and in order. Under -race it also checks that slot contents are
// published and released with proper happens-before edges: a producer writing
// a slot the consumer still holds would be reported as a data race, and the
// consumer re-reads each slot just before releasing it to catch overwrites.
func TestRingConcurrent(t *testing.T) {
	const items = 200000
	r := mustRing(t, 64, 8)
	deadline := time.Now().Add(20 * time.Second)
	prodErr := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(3, 4))
		var next uint64
		for next < items {
			if time.Now().After(deadline) {
				prodErr <- errors.New("producer: deadline passed")
				return
			}
			free := r.Free()
			if free == 0 {
				if rng.IntN(2) == 0 {
					if err := r.WaitFree(time.Second); err != nil {
						prodErr <- err
						return
					}
				}
				continue
			}
			n := 1 + rng.IntN(free)
			if rem := items - next; uint64(n) > rem {
				n = int(rem)
			}
			for i := 0; i < n; i++ {
				s := r.FreeSlot(i)
				binary.LittleEndian.PutUint64(s.Buf, next)
				s.N = 8
				s.RecvNs = int64(next)
				next++
			}
			r.Publish(n)
		}
		prodErr <- nil
	}()

	rng := rand.New(rand.NewPCG(5, 6))
	var want uint64
	for want < items {
		if time.Now().After(deadline) {
			t.Fatalf("consumer: deadline passed at item %d", want)
		}
		avail := r.Len()
		if avail == 0 {
			if rng.IntN(2) == 0 {
				if err := r.Wait(time.Second); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		n := 1 + rng.IntN(avail)
		for i := 0; i < n; i++ {
			s := r.Peek(i)
			if got := binary.LittleEndian.Uint64(s.Data()); got != want+uint64(i) || s.RecvNs != int64(got) {
				t.Fatalf("item %d: got %d (RecvNs %d)", want+uint64(i), got, s.RecvNs)
			}
		}
		for i := 0; i < n; i++ {
			if got := binary.LittleEndian.Uint64(r.Peek(i).Data()); got != want+uint64(i) {
				t.Fatalf("item %d overwritten with %d before release", want+uint64(i), got)
			}
		}
		r.Release(n)
		want += uint64(n)
	}
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 || r.Peek(0) != nil {
		t.Fatalf("extra items after %d: Len %d", items, r.Len())
	}
}

func TestRingWaitWakesAndTimesOut(t *testing.T) {
	r := mustRing(t, 4, 8)

	// Times out with nothing published.
	if err := r.Wait(5 * time.Millisecond); err != nil || r.Peek(0) != nil {
		t.Fatalf("Wait on empty ring: %v, Peek %v", err, r.Peek(0))
	}
	if err := r.Wait(0); err != nil {
		t.Fatalf("Wait(0): %v", err)
	}

	// A publish wakes a waiting consumer long before the timeout.
	woke := make(chan error, 1)
	go func() { woke <- r.Wait(time.Minute) }()
	time.Sleep(10 * time.Millisecond)
	r.Publish(1)
	select {
	case err := <-woke:
		if err != nil || r.Len() != 1 {
			t.Fatalf("Wait: %v, Len %d", err, r.Len())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Publish did not wake Wait")
	}

	// A release wakes a waiting producer.
	r.Publish(3)
	go func() { woke <- r.WaitFree(time.Minute) }()
	time.Sleep(10 * time.Millisecond)
	r.Release(2)
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("WaitFree: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Release did not wake WaitFree")
	}

	// Close: Wait still reports remaining data, then ErrClosed; a blocked
	// waiter is woken.
	r.Release(1)
	go func() { woke <- r.Wait(time.Minute) }()
	time.Sleep(10 * time.Millisecond)
	r.Close()
	select {
	case err := <-woke:
		if r.Len() > 0 {
			if err != nil {
				t.Fatalf("Wait with data after Close: %v", err)
			}
			r.Release(r.Len())
		} else if !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Wait")
	}
	if err := r.Wait(time.Minute); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait on closed empty ring: %v, want ErrClosed", err)
	}
	r.Publish(4)
	if err := r.WaitFree(time.Minute); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitFree on closed full ring: %v, want ErrClosed", err)
	}
	if !r.Closed() {
		t.Fatal("Closed() = false after Close")
	}
}

// TestRingZeroAllocs pins the hot path at zero allocations: publishing,
// peeking, releasing, and waiting when the answer is immediate or when a
// wakeup is delivered through the channel. Each measured round moves many
// slots, and every allocation counts (testenv.NoAllocs).
func TestRingZeroAllocs(t *testing.T) {
	r := mustRing(t, 64, 8)
	const batches, batch = 32, 8
	testenv.NoAllocs(t, "publish/peek/release of a slot", 100, batches*batch, func() {
		for range batches {
			start, n := r.Writable()
			if n == 0 || start < 0 {
				panic("ring full")
			}
			for i := 0; i < batch; i++ {
				r.FreeSlot(i).N = 8
			}
			r.Publish(batch)
			if err := r.Wait(time.Second); err != nil {
				panic(err)
			}
			for i := 0; i < batch; i++ {
				if r.Peek(i) == nil {
					panic("missing slot")
				}
			}
			r.Release(batch)
			if err := r.WaitFree(time.Second); err != nil {
				panic(err)
			}
		}
	})

	// The blocking path: a waiter parked on the channel and timer, woken by
	// the other side.
	start := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-start:
				time.Sleep(200 * time.Microsecond)
				r.Publish(1)
			}
		}
	}()
	defer close(stop)
	const waits = 10
	testenv.NoAllocs(t, "blocking Wait", 10, waits, func() {
		for range waits {
			start <- struct{}{}
			if err := r.Wait(5 * time.Second); err != nil {
				panic(err)
			}
			r.Release(r.Len())
		}
	})
}

// BenchmarkRing measures the ring handing items from a producer goroutine to
// a consumer goroutine in batches of 32, both spinning.
func BenchmarkRing(b *testing.B) {
	r := mustRing(b, 4096, 64)
	const batch = 32
	total := b.N
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		defer close(done)
		for sent := 0; sent < total; {
			n := r.Free()
			if n > batch {
				n = batch
			}
			if n > total-sent {
				n = total - sent
			}
			for i := 0; i < n; i++ {
				r.FreeSlot(i).N = 1
			}
			r.Publish(n)
			sent += n
		}
	}()
	for got := 0; got < total; {
		n := r.Len()
		for i := 0; i < n; i++ {
			_ = r.Peek(i).N
		}
		r.Release(n)
		got += n
	}
	<-done
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "items/s")
}
