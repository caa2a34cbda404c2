package ud

import "time"

// Lender is the consumer side that every ring-based Receiver shares: it lends
// the ring's slots to the consumer (Peek, Release, Wait) and tells how full
// the ring is (RingReporter). A Receiver embeds one and replaces only what it
// does differently: an RDMA receiver posts released slots back on its receive
// queue, a UDP receiver without a receive loop receives in Wait.
//
// Every method is the consumer's, as on Ring, except RingCap.
type Lender struct{ ring *Ring }

// NewLender returns the Lender of ring r.
func NewLender(r *Ring) Lender { return Lender{ring: r} }

// Peek returns the i-th unreleased slot (0 = oldest) or nil when fewer than
// i+1 datagrams are waiting. Its bytes stay valid until released. It never
// blocks.
func (l Lender) Peek(i int) *Slot { return l.ring.Peek(i) }

// Release hands the n oldest slots back to the receive path.
func (l Lender) Release(n int) { l.ring.Release(n) }

// Wait blocks until a datagram is waiting (nil), the timeout passes (nil), or
// the ring is closed and every received datagram has been released
// (ErrClosed).
func (l Lender) Wait(timeout time.Duration) error { return l.ring.Wait(timeout) }

// RingLen returns how many received datagrams wait in the ring, not yet
// released (RingReporter).
func (l Lender) RingLen() int { return l.ring.Len() }

// RingCap returns the ring's number of slots (RingReporter).
func (l Lender) RingCap() int { return l.ring.Cap() }

// Wrapper is what a Receiver that shows another one's datagrams (as package
// ud/faults does) embeds: it passes MaxDatagram, Stats and Close, and the
// optional Filler, RingReporter and DropSyncer calls, through to the wrapped
// Receiver. An optional call that the wrapped receiver does not implement
// does nothing and returns 0 or nil. The embedding type provides Peek,
// Release and Wait.
type Wrapper struct {
	// Inner is the wrapped receiver.
	Inner Receiver
}

// MaxDatagram returns the wrapped receiver's.
func (w Wrapper) MaxDatagram() int { return w.Inner.MaxDatagram() }

// Stats returns the wrapped receiver's counters unchanged.
func (w Wrapper) Stats() RecvStats { return w.Inner.Stats() }

// Close closes the wrapped receiver.
func (w Wrapper) Close() error { return w.Inner.Close() }

// Fill receives on the wrapped receiver if it is a Filler, and returns how
// many datagrams it received; 0 for one with a receive loop of its own.
// Consumer only.
func (w Wrapper) Fill() int {
	if f, ok := w.Inner.(Filler); ok {
		return f.Fill()
	}
	return 0
}

// RingLen returns how many datagrams wait in the wrapped receiver's ring, or
// 0 if it does not tell (RingReporter). Consumer only.
func (w Wrapper) RingLen() int {
	if rr, ok := w.Inner.(RingReporter); ok {
		return rr.RingLen()
	}
	return 0
}

// RingCap returns the wrapped receiver's ring size, or 0 if it does not tell
// (RingReporter).
func (w Wrapper) RingCap() int {
	if rr, ok := w.Inner.(RingReporter); ok {
		return rr.RingCap()
	}
	return 0
}

// SyncDrops brings the wrapped receiver's kernel drop count up to date, if it
// can (DropSyncer).
func (w Wrapper) SyncDrops() error {
	if d, ok := w.Inner.(DropSyncer); ok {
		return d.SyncDrops()
	}
	return nil
}
