package feed

import "time"

// WallClockAnchor is how long a clock made by NewWallClock goes between
// reads of the wall clock.
const WallClockAnchor = 10 * time.Millisecond

// NewWallClock returns a clock of Unix nanoseconds for stamping receive
// times (Msg.RecvNs) once per message, at about half the cost of
// time.Now().UnixNano(): it reads the wall clock once every
// WallClockAnchor and, between, adds the monotonic time elapsed since,
// which is one clock read instead of two. Both clocks run at the rate NTP
// sets; only a step of the wall clock (a manual change, an NTP step) is
// followed late, by up to WallClockAnchor. The clock is not safe for
// concurrent use: each source makes its own.
func NewWallClock() func() int64 {
	anchor := time.Now()
	anchorNs := anchor.UnixNano()
	return func() int64 {
		d := time.Since(anchor)
		if d >= WallClockAnchor || d < 0 {
			anchor = time.Now()
			anchorNs = anchor.UnixNano()
			return anchorNs
		}
		return anchorNs + int64(d)
	}
}
