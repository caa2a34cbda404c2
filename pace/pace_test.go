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

// A recorded-speed Pacer's due times are the recorded times relative to the
// first event, divided by the factor, from the clock reading at the first
// Due: checked on a clock the test sets, not by waiting.
func TestSpeedDueTimes(t *testing.T) {
	// Recorded at 09:30:00 plus: 0, 1 ms, 1 ms (a burst), 3.5 ms, then a
	// stamp before the first (out of order), then 1 s.
	const base = int64(9*3600+30*60) * 1e9
	rec := []int64{base, base + 1e6, base + 1e6, base + 3500e3, base - 5e6, base + 1e9}
	stamp := func(i uint64) (int64, bool) {
		if i >= uint64(len(rec)) {
			return 0, false
		}
		return rec[i], true
	}
	for _, c := range []struct {
		factor float64
		want   []int64 // due times minus the clock at the first Due
	}{
		{1, []int64{0, 1e6, 1e6, 3500e3, 0, 1e9}},
		{2, []int64{0, 500e3, 500e3, 1750e3, 0, 500e6}},
		{0.5, []int64{0, 2e6, 2e6, 7e6, 0, 2e9}},
	} {
		now := int64(1000)
		clock := func() int64 { return now }
		p := NewSpeed(c.factor, stamp, clock, 0)
		if !p.Paced() {
			t.Fatalf("factor %v: not paced", c.factor)
		}
		now = 777_000 // the schedule starts at the first Due, not at NewSpeed
		for i, w := range c.want {
			if got := p.Due(uint64(i)) - 777_000; got != w {
				t.Errorf("factor %v: event %d due at +%d ns, want +%d", c.factor, i, got, w)
			}
			now += 123 // later readings of the clock do not move the schedule
		}
		if d := p.Due(uint64(len(rec))); d != 0 {
			t.Errorf("factor %v: event past the end due at %d, want 0 (at once)", c.factor, d)
		}
		if u := p.Until(3, 777_000+1000e3); c.factor == 1 && u != 2500*time.Microsecond {
			t.Errorf("Until(3) 1 ms after the start: %v, want 2.5ms", u)
		}
	}
}

// Due asks the Stamp for each event once, however often it is called for
// the same event: a Stamp that reads ahead in its input relies on it.
func TestSpeedStampOncePerEvent(t *testing.T) {
	calls := map[uint64]int{}
	stamp := func(i uint64) (int64, bool) { calls[i]++; return int64(i) * 1000, true }
	p := NewSpeed(1, stamp, monoClock(), 0)
	for i := uint64(0); i < 10; i++ {
		for range 3 {
			p.Due(i)
			p.Coarse(i, 0)
		}
	}
	for i := uint64(0); i < 10; i++ {
		if calls[i] != 1 {
			t.Errorf("event %d: Stamp called %d times, want 1", i, calls[i])
		}
	}
	if q := NewSpeed(0, stamp, monoClock(), 0); q.Paced() {
		t.Error("factor 0 paces")
	}
}

// Wait on a recorded-speed Pacer never returns before the event is due.
func TestSpeedWaitNeverEarly(t *testing.T) {
	stamp := func(i uint64) (int64, bool) { return 5e12 + int64(i)*200e3, true } // 200 µs apart
	p := NewSpeed(4, stamp, monoClock(), 0)
	for i := uint64(0); i < 50; i++ {
		if now := p.Wait(i); now < p.Due(i) {
			t.Fatalf("event %d returned at %d, before it was due at %d", i, now, p.Due(i))
		}
	}
	if want := int64(49 * 200e3 / 4); p.Due(49)-p.Due(0) != want {
		t.Errorf("events 0 and 49 are %d ns apart, want %d", p.Due(49)-p.Due(0), want)
	}
}
