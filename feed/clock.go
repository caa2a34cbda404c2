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
// WallClockAnchor and, between, adds the time elapsed since.
//
// Where the kernel keeps time with the CPU's time-stamp counter (amd64,
// Linux's clock source "tsc": a counter at a constant rate, the same on
// every CPU, as the kernel found it when the clock was made), the elapsed
// time is the counter's: about 12 ns a reading here, against 27 for the
// monotonic clock and 44 for time.Now. Its rate is measured against the
// monotonic clock over each interval between anchors and used over the
// next. Elsewhere, for the first interval, and for an interval whose
// anchor could not be read tightly or whose measured rate was unlike the
// last (a suspend stops the monotonic clock, not the counter), the elapsed
// time is the monotonic clock's.
//
// The wall and the monotonic clock run at the rate NTP sets. A step of the
// wall clock (a manual change, an NTP step) is followed late, by up to
// WallClockAnchor; with the counter, a change in NTP's rate is followed an
// interval late (a slew of 500 ppm starting: 5 µs at the end of that
// interval, and the next anchor steps back as much). The clock is not safe
// for concurrent use: each source makes its own.
func NewWallClock() func() int64 {
	return newWallClock(tscUsable()).now
}

// wallClock is NewWallClock's clock.
type wallClock struct {
	useTSC bool
	at     time.Time // the anchor: the last reading of the wall clock
	ns     int64     // at, in Unix ns
	// With the counter: its value at the anchor (0: not read tightly),
	// the last rate measured (nanoseconds a tick, 32.32 fixed point; 0:
	// none), the rate this interval runs on (rate, or 0 for the
	// monotonic clock), and the ticks of WallClockAnchor at it.
	tsc   uint64
	rate  uint64
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
// anchor's counter value is not known tightly.
const maxBracket = 1000

// anchor reads the wall clock, and with the counter measures its rate. It
// returns the wall clock's time.
func (c *wallClock) anchor() int64 {
	if c.useTSC {
		for range 3 {
			t1 := rdtsc()
			now := time.Now()
			t2 := rdtsc()
			if c.anchorAt(t1, now, t2) {
				return c.ns
			}
		}
		// Held up three times: this interval runs on the monotonic
		// clock, and the next anchor measures no rate (it keeps the
		// last).
		c.tsc, c.mult = 0, 0
	}
	c.at = time.Now()
	c.ns = c.at.UnixNano()
	return c.ns
}

// anchorAt anchors at the wall clock's time now, read between the
// counter's readings t1 and t2. It measures the counter's rate over the
// interval since the last anchor, if that was read tightly and the
// interval is at least half of WallClockAnchor (an anchor that comes
// earlier, for a counter behind, keeps the rate it had). Without a rate
// yet, it takes one measured over at most two WallClockAnchor (a longer
// interval may span a suspend); with one, a new one within 1% of it, else
// it runs the next interval on the monotonic clock and measures afresh
// over it. It returns false, changing nothing, if t1 and t2 are more than
// maxBracket apart.
func (c *wallClock) anchorAt(t1 uint64, now time.Time, t2 uint64) bool {
	if t2-t1 > maxBracket {
		return false
	}
	t := t1 + (t2-t1)/2
	if el := now.Sub(c.at); c.tsc != 0 && t > c.tsc && el >= WallClockAnchor/2 {
		r, ok := rateOf(uint64(el), t-c.tsc)
		switch {
		case ok && c.rate == 0 && el <= 2*WallClockAnchor, ok && c.rate != 0 && near(r, c.rate):
			c.rate = r
		case c.rate != 0:
			c.rate = 0
		}
	}
	c.mult = c.rate
	if c.mult != 0 {
		c.limit = uint64(WallClockAnchor) << 32 / c.mult
	}
	c.at, c.ns, c.tsc = now, now.UnixNano(), t
	return true
}

// rateOf returns the nanoseconds a tick, in 32.32 fixed point, of ns
// nanoseconds in ticks ticks, and false for a rate beyond reason: a
// counter slower than 1 MHz, or one so fast that the rate rounds to 0.
func rateOf(ns, ticks uint64) (uint64, bool) {
	hi, lo := ns>>32, ns<<32
	if hi >= ticks {
		return 0, false
	}
	r, _ := bits.Div64(hi, lo, ticks)
	return r, r != 0 && r < 1000<<32
}

// near says whether rate r is within 1% of rate of.
func near(r, of uint64) bool {
	d := r - of
	if r < of {
		d = of - r
	}
	return d <= of/100
}
