package feed

import "errors"

// ErrIdle is returned by the Next of a live source (one fed by the network,
// not a file) when no message became ready within its bounded wait and the
// input has not ended. It is not an error: the caller does its other work
// (a publisher flushes and sends heartbeats) and calls Next again. A live
// source waits in the kernel, so a loop that calls Next again at once does
// not spin a core.
var ErrIdle = errors.New("feed: no message yet")

// Source is an upstream of normalized messages: an ITCH decoder, a replay
// file, the synthetic generator.
//
// Next fills m with the next message and returns nil, or io.EOF when the
// source is exhausted, or ErrIdle when a live source has nothing yet, or
// another error. A source emits an instrument's
// definition before any other message about that instrument, because the
// publisher maps instruments to channels by their symbol. Next must not
// allocate per message.
type Source interface {
	Next(m *Msg) error
}

// ChannelOf maps an instrument to one of n channels by its symbol:
//
//	channel = FNV-1a-64(symbol's 8 space-padded bytes) mod n
//
// with the FNV-1a offset basis 0xcbf29ce484222325 and prime 0x100000001b3.
// Every publisher and subscriber computes the same mapping, so a subscriber
// that wants a few instruments joins only their channels. n must be >= 1.
func ChannelOf(sym Symbol, n int) int {
	h := uint64(0xcbf29ce484222325)
	for _, c := range sym {
		h ^= uint64(c)
		h *= 0x100000001b3
	}
	return int(h % uint64(n))
}
