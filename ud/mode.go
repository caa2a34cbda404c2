package ud

import (
	"fmt"
	"strconv"
)

// Mode selects how a Receiver's loop waits for datagrams; every transport
// offers both.
type Mode int

const (
	// Blocking makes the receive loop sleep in the transport (recvmmsg on a
	// blocking socket, an armed completion channel) while nothing arrives.
	// It costs no CPU on an idle line; the price is a wakeup per batch.
	Blocking Mode = iota
	// BusyPoll makes the receive loop spin on a non-blocking receive (or
	// completion poll) from a goroutine locked to its OS thread, optionally
	// pinned to a CPU. It burns one core whether or not data arrives and
	// saves the wakeup latency. On a two-core machine run at most one.
	BusyPoll
)

// String returns "blocking" or "busy-poll".
func (m Mode) String() string {
	switch m {
	case Blocking:
		return "blocking"
	case BusyPoll:
		return "busy-poll"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses "blocking" or "busy-poll".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "blocking":
		return Blocking, nil
	case "busy-poll":
		return BusyPoll, nil
	}
	return 0, fmt.Errorf("%q: want blocking or busy-poll", s)
}
