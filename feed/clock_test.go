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
			for end := time.Now().Add(5 * WallClockAnchor); time.Now().Before(end); reads++ {
				before := time.Now().UnixNano()
				got := c.now()
				after := time.Now().UnixNano()
				// The anchor's two readings round differently, and the
				// counter's rate is measured to about 1/26,000: allow
				// a microsecond.
				if got < before-1000 || got > after+1000 {
					t.Fatalf("read %d: %d, outside the wall clock's [%d, %d]", reads, got, before, after)
				}
				if got < last-1000 {
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
			if reads < 1000 {
				t.Fatalf("only %d reads", reads)
			}
			if tc.useTSC && counted < reads/2 {
				t.Fatalf("the counter was in use for %d of %d reads", counted, reads)
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
	for end := time.Now().Add(3 * WallClockAnchor); time.Now().Before(end); {
		c.now()
	}
	if c.mult == 0 {
		t.Fatal("the counter's rate was not measured over three anchors")
	}
	mult := c.mult
	c.tsc += 1 << 40 // the anchor's counter far ahead of this one
	before := time.Now().UnixNano()
	got := c.now()
	after := time.Now().UnixNano()
	if got < before-1000 || got > after+1000 {
		t.Fatalf("%d, outside the wall clock's [%d, %d]", got, before, after)
	}
	if d := rdtsc() - c.tsc; d > 1<<30 {
		t.Fatalf("not anchored again: the anchor's counter is %d ticks from the counter's", d)
	}
	if c.mult != mult && c.mult != 0 {
		t.Fatalf("an early anchor changed the rate from %d to %d", mult, c.mult)
	}
}

// TestWallClockRate: the rate is nanoseconds a tick in 32.32 fixed point,
// with the interval in ticks to match, and a rate beyond reason is left
// unset.
func TestWallClockRate(t *testing.T) {
	var c wallClock
	c.setRate(10_000_000, 26_000_000) // 2.6 GHz
	if want := uint64(10_000_000) << 32 / 26_000_000; c.mult != want {
		t.Fatalf("2.6 GHz: mult %d, want %d", c.mult, want)
	}
	if c.limit < 25_999_000 || c.limit > 26_001_000 {
		t.Fatalf("2.6 GHz: %d ticks in %v, want about 26,000,000", c.limit, WallClockAnchor)
	}
	for _, r := range []struct{ ns, ticks uint64 }{{10_000_000, 1}, {10_000_000, 9_000}, {1 << 40, 1 << 7}} {
		var c wallClock
		c.setRate(r.ns, r.ticks)
		if c.mult != 0 || c.limit != 0 {
			t.Errorf("%d ns in %d ticks: mult %d, limit %d; want neither set", r.ns, r.ticks, c.mult, c.limit)
		}
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
