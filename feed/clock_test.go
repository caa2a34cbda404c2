package feed

import (
	"testing"
	"time"
)

// TestWallClockFollowsTheWallClock: readings of NewWallClock's clock lie
// between time.Now() read just before and just after them, over longer
// than several anchors, and never go backwards (beyond the rounding):
// with the monotonic clock between anchors, and with the time-stamp
// counter where the kernel keeps time with it (which the test then checks
// was in use).
func TestWallClockFollowsTheWallClock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		useTSC bool
	}{{"monotonic", false}, {"counter", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.useTSC && !tscUsable() {
				t.Skip("the kernel does not keep time with the time-stamp counter here (not amd64, or clock source not tsc)")
			}
			c := newWallClock(tc.useTSC)
			var last int64
			reads, counted := 0, 0
			// At least five anchor periods and 1,000 reads, however
			// slowly a loaded machine runs the loop.
			for end := time.Now().Add(5 * WallClockAnchor); reads < 1000 || time.Now().Before(end); reads++ {
				before := time.Now().UnixNano()
				got := c.now()
				after := time.Now().UnixNano()
				// The anchor's readings round differently, and the
				// counter's rate is measured to about 1/26,000 (NTP may
				// change the clocks' rate in between): allow two
				// microseconds.
				if got < before-2000 || got > after+2000 {
					t.Fatalf("read %d: %d, outside the wall clock's [%d, %d]", reads, got, before, after)
				}
				if got < last-2000 {
					t.Fatalf("read %d: %d went back from %d", reads, got, last)
				}
				last = got
				if c.mult != 0 {
					counted++
				}
				if reads%1000 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if tc.useTSC && counted == 0 {
				t.Fatalf("the counter was not in use for any of %d reads", reads)
			}
			if !tc.useTSC && counted > 0 {
				t.Fatalf("the counter was in use for %d reads of the monotonic clock", counted)
			}
		})
	}
}

// TestWallClockCounterBehind: a counter behind the anchor's (a CPU whose
// counter lags the one the anchor was read on) anchors again at once,
// rather than adding a wrapped-round difference.
func TestWallClockCounterBehind(t *testing.T) {
	if !tscUsable() {
		t.Skip("the kernel does not keep time with the time-stamp counter here (not amd64, or clock source not tsc)")
	}
	c := newWallClock(true)
	for end := time.Now().Add(2 * time.Second); c.mult == 0 && time.Now().Before(end); {
		c.now()
	}
	if c.mult == 0 {
		t.Fatal("the counter's rate was not measured in 2 s")
	}
	c.tsc += 1 << 40 // the anchor's counter far ahead of this one
	before := time.Now().UnixNano()
	got := c.now()
	after := time.Now().UnixNano()
	if got < before-2000 || got > after+2000 {
		t.Fatalf("%d, outside the wall clock's [%d, %d]", got, before, after)
	}
	// Anchored again: at this counter, or (held up three times) on the
	// monotonic clock.
	if d := rdtsc() - c.tsc; c.tsc != 0 && d > 1<<30 {
		t.Fatalf("not anchored again: the anchor's counter is %d ticks from the counter's", d)
	}
}

// sim is a simulated counter at 2.6 GHz beside a simulated monotonic and
// wall clock, for driving anchorAt.
type sim struct {
	ns  int64   // the clocks' time since the start
	tsc float64 // the counter
}

var simStart = time.Unix(1_800_000_000, 0)

// advance moves the clocks on by d and the counter by d at hz.
func (s *sim) advance(d time.Duration, hz float64) {
	s.ns += int64(d)
	s.tsc += float64(d) * hz / 1e9
}

// anchor anchors c at the simulated time, the counter read 100 ticks
// either side.
func (s *sim) anchor(c *wallClock) bool {
	t := uint64(s.tsc)
	return c.anchorAt(t-100, simStart.Add(time.Duration(s.ns)), t+100)
}

// rateHz is the counter's frequency a rate of c stands for.
func rateHz(r uint64) float64 { return float64(1<<32) / float64(r) * 1e9 }

// TestWallClockAnchors: on simulated clocks, the rate is measured from the
// second anchor on; follows a change in NTP's rate at the next anchor,
// also when the interval ends early because the rate was measured too
// high; a suspend (the monotonic clock stopped, the counter not) runs the
// next interval on the monotonic clock and then measures afresh; a loose
// bracket changes nothing; and an anchor after one that was not read
// tightly keeps the last rate.
func TestWallClockAnchors(t *testing.T) {
	const hz = 2.6e9
	c := &wallClock{useTSC: true}
	s := &sim{tsc: 1e12}
	within := func(step string, want float64) {
		t.Helper()
		if c.mult == 0 {
			t.Fatalf("%s: no rate in use", step)
		}
		if got := rateHz(c.mult); got < want*(1-1e-6) || got > want*(1+1e-6) {
			t.Fatalf("%s: rate %.0f Hz, want %.0f", step, got, want)
		}
		if want := uint64(float64(WallClockAnchor) * want / 1e9); c.limit < want-want/10000 || c.limit > want+want/10000 {
			t.Fatalf("%s: %d ticks in an interval, want %d", step, c.limit, want)
		}
	}
	if !s.anchor(c) || c.mult != 0 {
		t.Fatalf("first anchor: mult %d, want none", c.mult)
	}
	s.advance(WallClockAnchor, hz)
	s.anchor(c)
	within("second anchor", hz)

	// NTP slows the clocks by 500 ppm: the counter runs 500 ppm faster
	// against them.
	s.advance(WallClockAnchor, hz*1.0005)
	s.anchor(c)
	within("a slew", hz*1.0005)
	// The slew ends; the rate in use (measured during it) is too high,
	// so the interval ends early, and is measured all the same.
	s.advance(WallClockAnchor*9995/10000, hz)
	s.anchor(c)
	within("an early end", hz)

	// A suspend: an hour of the counter in 10 ms of the monotonic clock.
	s.advance(WallClockAnchor, hz)
	s.tsc += 3600 * hz
	s.anchor(c)
	if c.mult != 0 || c.rate != 0 {
		t.Fatalf("after a suspend: mult %d, rate %d; want the monotonic clock", c.mult, c.rate)
	}
	s.advance(WallClockAnchor, hz)
	s.anchor(c)
	within("after a suspend", hz)

	// A loose bracket changes nothing.
	before := *c
	s.advance(WallClockAnchor, hz)
	if tsc := uint64(s.tsc); c.anchorAt(tsc-maxBracket, simStart.Add(time.Duration(s.ns)), tsc+1) || *c != before {
		t.Fatalf("a loose bracket anchored: %+v, was %+v", *c, before)
	}
	// Held up three times (anchor's fallback), then read tightly: the
	// last rate again, not measured over the untimed interval.
	c.tsc, c.mult = 0, 0
	s.advance(WallClockAnchor, hz*1.5)
	s.anchor(c)
	within("after an anchor not read tightly", hz)

	// Without a rate, an interval longer than two anchors measures none.
	c = &wallClock{useTSC: true}
	s.anchor(c)
	s.advance(3*WallClockAnchor, hz)
	s.anchor(c)
	if c.mult != 0 {
		t.Fatalf("first rate over %v: %.0f Hz, want none", 3*WallClockAnchor, rateHz(c.mult))
	}
	s.advance(WallClockAnchor, hz)
	s.anchor(c)
	within("the interval after", hz)
}

// TestWallClockRate: rateOf is nanoseconds a tick in 32.32 fixed point,
// and refuses a rate beyond reason.
func TestWallClockRate(t *testing.T) {
	if r, ok := rateOf(10_000_000, 26_000_000); !ok || r != uint64(10_000_000)<<32/26_000_000 {
		t.Fatalf("2.6 GHz: rate %d, %v; want %d", r, ok, uint64(10_000_000)<<32/26_000_000)
	}
	for _, r := range []struct{ ns, ticks uint64 }{{10_000_000, 1}, {10_000_000, 9_000}, {1 << 40, 1 << 7}, {1, 1 << 40}} {
		if got, ok := rateOf(r.ns, r.ticks); ok {
			t.Errorf("%d ns in %d ticks: rate %d accepted", r.ns, r.ticks, got)
		}
	}
	if !near(101, 100) || near(102, 100) || !near(99, 100) || near(98, 100) {
		t.Error("near is not within 1%")
	}
}

func BenchmarkWallClock(b *testing.B) {
	clock := NewWallClock()
	var sink int64
	for b.Loop() {
		sink += clock()
	}
	_ = sink
}

func BenchmarkTimeNowUnixNano(b *testing.B) {
	var sink int64
	for b.Loop() {
		sink += time.Now().UnixNano()
	}
	_ = sink
}
