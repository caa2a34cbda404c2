package feed

import (
	"math/bits"
	"time"
)

// WallClockAnchor is how long a clock made by NewWallClock goes between
// reads of the wall clock.
const WallClockAnchor = 10 * time.Millisecond

// NewWallClock returns a clock of Unix nanoseconds for stamping receive
// times (Msg.RecvNs) once per message, at a fraction of the cost of
// time.Now().UnixNano(). It reads the wall clock once every
// WallClockAnchor and, between, adds the time elapsed since. It measures
// that time with the CPU's time-stamp counter where the kernel keeps time
// with it too (amd64, Linux's clock source "tsc": a counter at a constant
// rate, the same on every CPU): about 9 ns a reading here, against 25 for
// the monotonic clock and 43 for time.Now. The counter's rate is measured
// against the monotonic clock over each anchor's interval. Elsewhere, and
// for the first interval, the elapsed time is the monotonic clock's.
//
// Both the wall and the monotonic clock run at the rate NTP sets; only a
// step of the wall clock (a manual change, an NTP step) is followed late,
// by up to WallClockAnchor. The clock is not safe for concurrent use: each
// source makes its own.
func NewWallClock() func() int64 {
	return newWallClock(tscUsable()).now
}

// wallClock is NewWallClock's clock.
type wallClock struct {
	useTSC bool
	at     time.Time // the anchor: the last reading of the wall clock
	ns     int64     // at, in Unix ns
	// With the counter: its value at the anchor, the nanoseconds a tick
	// (32.32 fixed point; 0 until the rate is measured, or for an
	// interval whose anchor could not be read tightly, which then runs
	// on the monotonic clock), and the ticks of WallClockAnchor.
	tsc   uint64
	mult  uint64
	limit uint64
}

func newWallClock(useTSC bool) *wallClock {
	c := &wallClock{useTSC: useTSC}
	c.anchor()
	return c
}

// now returns the time in Unix ns.
func (c *wallClock) now() int64 {
	if c.mult != 0 {
		// A counter behind the anchor's (another CPU's, a little
		// behind) is a huge difference: it anchors again.
		if d := rdtsc() - c.tsc; d < c.limit {
			return c.ns + int64(d*c.mult>>32)
		}
	} else if d := time.Since(c.at); d >= 0 && d < WallClockAnchor {
		return c.ns + int64(d)
	}
	return c.anchor()
}

// maxBracket is the most counter ticks the two readings around an anchor's
// time.Now may be apart (0.4 µs at 2.6 GHz; time.Now takes about 110
// ticks): more, and the goroutine was held up between them, so the
// anchor's counter value is not known tightly. Half of it over an interval
// of WallClockAnchor is a rate off by at most 1/26,000 here: 0.4 µs at the
// end of the next interval.
const maxBracket = 1000

// anchor reads the wall clock, and with the counter measures its rate over
// the interval since the last anchor. It returns the wall clock's time.
func (c *wallClock) anchor() int64 {
	if c.useTSC {
		for range 3 {
			t1 := rdtsc()
			now := time.Now()
			t2 := rdtsc()
			if t2-t1 > maxBracket {
				continue
			}
			t := t1 + (t2-t1)/2
			// The rate over the interval since the last anchor, if that
			// was read tightly and the interval is long enough for the
			// brackets to matter little (an anchor that comes early,
			// for a counter behind, keeps the rate it had).
			if el := now.Sub(c.at); c.tsc != 0 && t > c.tsc && el >= WallClockAnchor {
				c.setRate(uint64(el), t-c.tsc)
			}
			c.at, c.ns, c.tsc = now, now.UnixNano(), t
			return c.ns
		}
		c.tsc, c.mult = 0, 0
	}
	c.at = time.Now()
	c.ns = c.at.UnixNano()
	return c.ns
}

// setRate sets the nanoseconds a tick from ns nanoseconds in ticks ticks,
// unless the rate is beyond reason (a counter slower than 1 MHz).
func (c *wallClock) setRate(ns, ticks uint64) {
	hi, lo := ns>>32, ns<<32
	if hi >= ticks {
		return
	}
	mult, _ := bits.Div64(hi, lo, ticks)
	if mult == 0 || mult >= 1000<<32 {
		return
	}
	c.mult = mult
	c.limit = uint64(WallClockAnchor) << 32 / mult
}
