// Package pace spaces events at a fixed rate with microsecond precision
// without burning a core at low rates.
//
// Go timers and time.Sleep resolve to about a millisecond on a loaded Linux
// host, far coarser than the 10 µs between messages at 100k msg/s. A Pacer
// therefore waits in two stages: it sleeps in the kernel with
// clock_nanosleep for all but the last stretch before the event is due (the
// thread's timer slack is set to 1 ns first, since the default 50 µs slack
// would make every sleep that much late), then spins on the clock for the
// rest. At 10k msg/s that leaves the core idle about half the time; at rates
// where the gap between events is shorter than the spin stretch, the Pacer
// spins as before.
//
// A Pacer is used by one goroutine, which should be locked to its OS thread
// (runtime.LockOSThread): the timer slack is a per-thread setting.
package pace

import (
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSpin is the stretch before an event that a Pacer spins rather than
// sleeps. It covers the kernel's wakeup latency on a busy two-core host
// (tens of microseconds) with room to spare.
const DefaultSpin = 60 * time.Microsecond

// Clock returns the time in nanoseconds on some monotonic clock.
type Clock func() int64

// Pacer spaces events Interval apart, starting at Start, on Clock.
type Pacer struct {
	clock    Clock
	start    int64
	interval float64 // ns between events; 0: no pacing
	spin     int64   // ns before an event spent spinning

	// Sleeps and Spins count the waits that slept and the clock reads made
	// while spinning, for diagnostics and tests.
	Sleeps, Spins uint64
}

// New returns a Pacer for rate events per second on clock, starting now.
// A rate of 0 or less does not pace: Wait returns at once. spin is the
// stretch spent spinning before each event (0: DefaultSpin; a negative spin
// never sleeps, as a pure spin-wait pacer).
func New(rate float64, clock Clock, spin time.Duration) *Pacer {
	p := &Pacer{clock: clock, start: clock()}
	if rate > 0 {
		p.interval = 1e9 / rate
	}
	switch {
	case spin == 0:
		p.spin = int64(DefaultSpin)
	case spin < 0:
		p.spin = -1
	default:
		p.spin = int64(spin)
	}
	// The default timer slack (50 µs) would delay every sleep by that much.
	// Best effort: without it the spin stretch still absorbs the lateness
	// when it is longer than the slack.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	return p
}

// Due returns when event i (counting from 0) is due.
func (p *Pacer) Due(i uint64) int64 { return p.start + int64(float64(i)*p.interval) }

// Paced reports whether the Pacer paces at all.
func (p *Pacer) Paced() bool { return p.interval > 0 }

// Until returns how long before event i is due, on the Pacer's clock, from
// now (negative or 0 when it is due).
func (p *Pacer) Until(i uint64, now int64) time.Duration {
	if p.interval == 0 {
		return 0
	}
	return time.Duration(p.Due(i) - now)
}

// Spin returns the stretch before an event that is spent spinning, or a
// negative duration when the Pacer never sleeps.
func (p *Pacer) Spin() time.Duration { return time.Duration(p.spin) }

// Nap sleeps in the kernel for d, if d is positive, and returns the clock
// afterwards. Callers that have work to do while waiting (flushing,
// heartbeats) nap in steps no longer than the stretch until that work is
// due, then spin with Until until the event is due.
func (p *Pacer) Nap(d time.Duration) int64 {
	if d > 0 {
		ts := unix.NsecToTimespec(int64(d))
		// EINTR (a signal, or the Go runtime's preemption signal) only
		// ends the sleep early; the spin that follows makes up the rest.
		_ = unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, nil)
		p.Sleeps++
	}
	return p.clock()
}

// Coarse returns how long the caller may sleep in the kernel before event i
// from now: the time until the spin stretch begins, or 0.
func (p *Pacer) Coarse(i uint64, now int64) time.Duration {
	if p.interval == 0 || p.spin < 0 {
		return 0
	}
	return max(0, time.Duration(p.Due(i)-p.spin-now))
}

// Wait blocks until event i is due and returns the clock then: a kernel
// sleep for the coarse part, a spin for the last stretch.
func (p *Pacer) Wait(i uint64) int64 {
	now := p.clock()
	if p.interval == 0 {
		return now
	}
	if d := p.Coarse(i, now); d > 0 {
		now = p.Nap(d)
	}
	due := p.Due(i)
	for now < due {
		p.Spins++
		now = p.clock()
	}
	return now
}
