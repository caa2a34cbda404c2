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
// A Pacer spaces events either at a fixed rate (New) or as they were
// recorded, sped up or slowed down by a factor (NewSpeed): a replayed capture
// or ITCH file keeps its bursts and its quiet stretches. Both are the same
// Pacer with the same waits; only Due differs.
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

// Pacer spaces events a fixed interval apart (New), or at their recorded
// times scaled by a speed factor (NewSpeed), on its clock.
type Pacer struct {
	clock    Clock
	start    int64
	interval float64 // ns between events; 0: no pacing at a rate
	spin     int64   // ns before an event spent spinning

	// Recorded-speed pacing (NewSpeed); stamp is nil for a rate.
	stamp   Stamp
	factor  float64
	first   int64 // recorded time of the first event
	begun   bool  // first and start are set
	cached  bool  // dueI and due hold the last answer of Due
	dueI    uint64
	dueTime int64

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
	p.setSpin(spin)
	return p
}

// Stamp returns the recorded time, in nanoseconds on any clock (an ITCH
// timestamp counts from midnight), of event i, and false when there is no
// event i (the input ended). A Pacer asks for each event once, in order of
// i, and again only after a false.
type Stamp func(i uint64) (ns int64, ok bool)

// NewSpeed returns a Pacer that spaces events as they were recorded, sped
// up by factor (2: twice as fast; 0.5: half as fast): event i is due
// (stamp(i) - stamp(0)) / factor after the clock reading taken when Due is
// first called, so a recording that starts mid-day starts at once. An event
// recorded before the first is due when the first was. A factor of 0 or less does not
// pace, like a rate of 0. spin is as for New.
func NewSpeed(factor float64, stamp Stamp, clock Clock, spin time.Duration) *Pacer {
	p := &Pacer{clock: clock}
	if factor > 0 {
		p.stamp, p.factor = stamp, factor
	}
	p.setSpin(spin)
	return p
}

func (p *Pacer) setSpin(spin time.Duration) {
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
}

// Due returns when event i (counting from 0) is due. For a recorded-speed
// Pacer the first call starts the schedule; an event the Stamp does not
// have is due at once (0).
func (p *Pacer) Due(i uint64) int64 {
	if p.stamp == nil {
		return p.start + int64(float64(i)*p.interval)
	}
	if p.cached && p.dueI == i {
		return p.dueTime
	}
	ts, ok := p.stamp(i)
	if !ok {
		return 0
	}
	if !p.begun {
		p.begun, p.first, p.start = true, ts, p.clock()
	}
	// A day is under 2^47 ns: the float64 keeps every nanosecond.
	d := max(0, ts-p.first)
	p.cached, p.dueI, p.dueTime = true, i, p.start+int64(float64(d)/p.factor)
	return p.dueTime
}

// Paced reports whether the Pacer paces at all.
func (p *Pacer) Paced() bool { return p.interval > 0 || p.stamp != nil }

// Until returns how long before event i is due, on the Pacer's clock, from
// now (negative or 0 when it is due).
func (p *Pacer) Until(i uint64, now int64) time.Duration {
	if !p.Paced() {
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
	if !p.Paced() || p.spin < 0 {
		return 0
	}
	return max(0, time.Duration(p.Due(i)-p.spin-now))
}

// Wait blocks until event i is due and returns the clock then: a kernel
// sleep for the coarse part, a spin for the last stretch.
func (p *Pacer) Wait(i uint64) int64 {
	now := p.clock()
	if !p.Paced() {
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
