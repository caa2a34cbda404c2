package ud

import (
	"fmt"
	"strconv"
)

// Mode selects how datagrams get from the transport to the consumer. Two
// modes run a receive loop per line in its own thread, which hands datagrams
// to the consumer through the line's ring; two have no receive loop at all:
// the consumer's own goroutine receives (Filler), so a datagram reaches the
// handler without any hand-off between threads.
type Mode int

const (
	// Blocking makes the receive loop sleep in the transport (recvmmsg on a
	// blocking socket, an armed completion channel) while nothing arrives.
	// It costs no CPU on an idle line; the price is two wakeups per batch:
	// the receive thread's, then the consumer's.
	Blocking Mode = iota
	// BusyPoll makes the receive loop spin on a non-blocking receive (or
	// completion poll) from a goroutine locked to its OS thread, optionally
	// pinned to a CPU. It burns one core per line whether or not data
	// arrives and saves the receive thread's wakeup.
	BusyPoll
	// Direct has no receive loop: the consumer waits in one epoll_wait over
	// every line's socket (Notifier.Watch) and receives with recvmmsg into
	// the ring's slots itself. One wakeup per batch, no CPU while idle.
	Direct
	// DirectSpin has no receive loop either: the consumer polls every
	// line's non-blocking socket in turn, from one thread, and never
	// sleeps. It burns one core for the whole subscriber, not one per line.
	DirectSpin
)

// Modes lists every mode, in the order of their values.
var Modes = []Mode{Blocking, BusyPoll, Direct, DirectSpin}

// String returns the mode's name: "blocking", "busy-poll", "direct" or
// "direct-spin".
func (m Mode) String() string {
	switch m {
	case Blocking:
		return "blocking"
	case BusyPoll:
		return "busy-poll"
	case Direct:
		return "direct"
	case DirectSpin:
		return "direct-spin"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Threaded reports whether the mode runs a receive loop per line (Blocking,
// BusyPoll) rather than receiving on the consumer's goroutine.
func (m Mode) Threaded() bool { return m == Blocking || m == BusyPoll }

// Spins reports whether the mode keeps a thread busy while idle.
func (m Mode) Spins() bool { return m == BusyPoll || m == DirectSpin }

// ParseMode parses a mode's name (see String).
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%q: want blocking, busy-poll, direct or direct-spin", s)
}
