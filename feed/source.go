package feed

// Source is an upstream of normalized messages: an ITCH decoder, a replay
// file, the synthetic generator.
//
// Next fills m with the next message and returns nil, or io.EOF when the
// source is exhausted, or another error. A source emits an instrument's
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
