package ud

import (
	"testing"
	"time"
)

// ringRecv is a Receiver built on a Lender, as the transports are.
type ringRecv struct {
	Lender
	ring *Ring
}

func (ringRecv) MaxDatagram() int         { return 16 }
func (ringRecv) Stats() RecvStats         { return RecvStats{Datagrams: 42} }
func (r ringRecv) Close() error           { r.ring.Close(); return nil }
func (r ringRecv) push(n int)             { r.ring.Publish(n) }
func (ringRecv) Wait(time.Duration) error { return nil }

// plain hides every optional interface of the receiver it holds.
type plain struct{ Receiver }

func TestLenderAndWrapper(t *testing.T) {
	ring, err := NewRing(8, 16)
	if err != nil {
		t.Fatal(err)
	}
	r := ringRecv{Lender: NewLender(ring), ring: ring}
	r.push(3)
	if r.Peek(2) == nil || r.Peek(3) != nil || r.RingLen() != 3 || r.RingCap() != 8 {
		t.Fatalf("lender: Peek(2) %v, Peek(3) %v, RingLen %d, RingCap %d; want 3 of 8 lent", r.Peek(2), r.Peek(3), r.RingLen(), r.RingCap())
	}
	r.Release(2)
	if r.RingLen() != 1 || ring.Free() != 7 {
		t.Fatalf("after Release(2): RingLen %d, free %d", r.RingLen(), ring.Free())
	}

	w := Wrapper{Inner: r}
	if w.RingLen() != 1 || w.RingCap() != 8 || w.MaxDatagram() != 16 || w.Stats().Datagrams != 42 {
		t.Fatalf("wrapper of a ring receiver: RingLen %d, RingCap %d, MaxDatagram %d, %+v", w.RingLen(), w.RingCap(), w.MaxDatagram(), w.Stats())
	}
	h := Wrapper{Inner: plain{r}}
	if h.RingLen() != 0 || h.RingCap() != 0 || h.Fill() != 0 || h.SyncDrops() != nil {
		t.Fatal("wrapper of a receiver without the optional calls answered for them")
	}
	if err := w.Close(); err != nil || !ring.Closed() {
		t.Fatalf("Close: %v, ring closed %v", err, ring.Closed())
	}
}
