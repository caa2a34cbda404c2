package pace

import (
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
)

func monoClock() Clock {
	t0 := time.Now()
	return func() int64 { return int64(time.Since(t0)) + 1 }
}

// Every Wait returns at or after its event's due time, whatever the rate, and
// the events are spaced by the interval on the Pacer's clock.
func TestWaitNeverEarly(t *testing.T) {
	for _, rate := range []float64{2000, 50000, 1e6} {
		p := New(rate, monoClock(), 0)
		for i := uint64(0); i < 200; i++ {
			now := p.Wait(i)
			if due := p.Due(i); now < due {
				t.Fatalf("rate %v: event %d returned at %d, before it was due at %d", rate, i, now, due)
			}
		}
		if want := int64(199 * 1e9 / rate); p.Due(199)-p.Due(0) != want {
			t.Errorf("rate %v: events 0 and 199 are %d ns apart, want %d", rate, p.Due(199)-p.Due(0), want)
		}
	}
}

// At a low rate the coarse part of the wait is a kernel sleep, not a spin;
// a negative spin stretch never sleeps.
func TestSleepsAtLowRates(t *testing.T) {
	p := New(1000, monoClock(), 0) // 1 ms apart, 60 µs spin
	for i := uint64(0); i < 20; i++ {
		p.Wait(i)
	}
	if p.Sleeps == 0 {
		t.Errorf("20 events 1 ms apart: no kernel sleep (spins %d)", p.Spins)
	}
	q := New(1000, monoClock(), -1)
	for i := uint64(0); i < 5; i++ {
		q.Wait(i)
	}
	if q.Sleeps != 0 || q.Spins == 0 {
		t.Errorf("spin-only pacer: %d sleeps, %d spins; want 0 sleeps and some spins", q.Sleeps, q.Spins)
	}
}

func TestUnpaced(t *testing.T) {
	p := New(0, monoClock(), 0)
	if p.Paced() {
		t.Fatal("rate 0 paces")
	}
	for i := uint64(0); i < 1000; i++ {
		p.Wait(i)
	}
	if p.Sleeps != 0 || p.Spins != 0 {
		t.Errorf("unpaced: %d sleeps, %d spins", p.Sleeps, p.Spins)
	}
	if d := p.Until(5, 0); d != 0 {
		t.Errorf("unpaced Until = %v", d)
	}
}

func TestWaitAllocatesNothing(t *testing.T) {
	p := New(1e6, monoClock(), 0)
	i := uint64(0)
	const perRound = 1000
	testenv.NoAllocs(t, "Wait", 20, perRound, func() {
		for range perRound {
			p.Wait(i)
			i++
		}
	})
}
