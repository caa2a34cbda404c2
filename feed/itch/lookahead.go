package itch

import (
	"encoding/binary"
	"unsafe"

	"github.com/tickcast/tickcast/feed"
)

// lookAhead is how many ITCH messages a Source reads ahead of the one it
// normalizes. On a full-size day the order table and the books are far
// larger than the caches, so nearly every event misses them; prefetching
// the table slot and the best levels of each message lookAhead messages
// early lets those misses overlap instead of coming one after another.
const lookAhead = 16

// lookAheadTable is the smallest order table (in bytes) a Source reads
// ahead for: a smaller one stays in the caches, where copying each message
// costs more than the prefetches save.
const lookAheadTable = 8 << 20

// aheadSlot holds the bytes of every ITCH 5.0 message (the longest is 50).
const aheadSlot = 64

// ahead is one message read ahead: its bytes and its file offset. The
// bytes of a MessageReader's message are valid only until its next call,
// so they are copied into b, unless the reader keeps them longer than the
// look-ahead needs (stableReader): then p is the reader's own. A message
// too long for a slot (no ITCH 5.0 type is) is held in the Source's big
// buffer instead of b, and nothing is read past it until it has been
// handled.
type ahead struct {
	p   []byte
	b   [aheadSlot]byte
	n   int
	big bool
	off int64
}

// stableReader is a MessageReader whose messages keep their bytes, after
// the call that returned them, until at least stableBytes more bytes of
// input have been read (Reader does). A Source reads ahead of such a
// reader without copying the messages.
type stableReader interface {
	stableBytes() int
}

// aheadSpan is the most input the look-ahead spans: lookAhead messages
// that fit a slot and one of the longest (nothing is read past it). A
// stableReader must keep its messages at least that long.
const aheadSpan = lookAhead*(2+aheadSlot) + 2 + 65535

// readAhead is the look-ahead state of a Source.
type readAhead struct {
	ring       [lookAhead]ahead
	head, size int
	big        []byte // the one message too long for a slot
	bigHeld    bool
	err        error // what ended the reading ahead, returned after the messages before it
	on         bool  // the order table is large enough to read ahead for (lookAheadTable)
	stable     bool  // the reader is a stableReader: no copies
}

// next returns the next ITCH message and its offset, or the reader's error
// once the messages read before it have been returned. feed.ErrIdle and
// ErrLost are returned once, where they fell among the messages; other
// errors stay.
func (s *Source) next() ([]byte, int64, error) {
	a := &s.ahead
	if !a.on {
		return s.rd.Next()
	}
	for a.size < lookAhead && a.err == nil && !a.bigHeld {
		b, off, err := s.rd.Next()
		if err != nil {
			a.err = err
			break
		}
		slot := &a.ring[(a.head+a.size)%lookAhead]
		slot.n, slot.off, slot.big = len(b), off, len(b) > aheadSlot
		switch {
		case a.stable:
			slot.p = b
			a.bigHeld = slot.big
		case slot.big:
			a.big = append(a.big[:0], b...)
			a.bigHeld = true
		default:
			copy(slot.b[:], b)
		}
		a.size++
		s.touch(b)
	}
	if a.size == 0 {
		err := a.err
		if err == ErrLost || err == feed.ErrIdle {
			a.err = nil
		}
		return nil, s.rd.Offset(), err
	}
	slot := &a.ring[a.head]
	a.head = (a.head + 1) % lookAhead
	a.size--
	if slot.big {
		a.bigHeld = false
	}
	switch {
	case a.stable:
		return slot.p, slot.off, nil
	case slot.big:
		return a.big, slot.off, nil
	}
	return slot.b[:slot.n], slot.off, nil
}

// touch reads the order table slot an order event will look up, so that
// the cache line is on its way by the time the event is handled.
func (s *Source) touch(b []byte) {
	if len(b) == 0 || len(b) != Size(Type(b[0])) {
		return // handle reports it; nothing here may read past its end
	}
	switch Type(b[0]) {
	case TypeAddOrder, TypeAddOrderMPID, TypeOrderExecuted, TypeOrderExecutedPrice, TypeOrderCancel, TypeOrderDelete, TypeOrderReplace:
		ref := binary.BigEndian.Uint64(b[11:19])
		prefetchFwd(uintptr(unsafe.Pointer(&s.books.slots[s.books.home(ref)])), tableLines)
		if Type(b[0]) == TypeOrderReplace {
			// And where its new order goes.
			ref := binary.BigEndian.Uint64(b[19:27])
			prefetchFwd(uintptr(unsafe.Pointer(&s.books.slots[s.books.home(ref)])), tableLines)
		}
		if locate := int(binary.BigEndian.Uint16(b[1:3])); locate < len(s.books.books) {
			bk := &s.books.books[locate]
			// An add names its side; the other events' side is the
			// order's, not read yet.
			switch t := Type(b[0]); {
			case (t == TypeAddOrder || t == TypeAddOrderMPID) && b[19] == 'B':
				prefetchTop(bk.bids)
			case t == TypeAddOrder || t == TypeAddOrderMPID:
				prefetchTop(bk.asks)
			default:
				prefetchTop(bk.bids)
				prefetchTop(bk.asks)
			}
		}
	}
}

// prefetchTop prefetches the best levels of a side (kept last), where most
// changes happen: up to topLines cache lines, from the one holding the best
// level back.
func prefetchTop(side []Level) {
	if n := len(side); n > 0 {
		size := uintptr(n) * unsafe.Sizeof(Level{})
		end := uintptr(unsafe.Pointer(unsafe.SliceData(side))) + size
		prefetchBack(end, min(topLines, int((size+63)/64)))
	}
}

// tableLines is how many cache lines of the order table the look-ahead
// prefetches from an event's home slot on: the slot itself, which may
// straddle two lines, the slots a lookup may probe past it, and those a
// delete may shift back.
const tableLines = 3

// topLines is how many cache lines of a side's best levels the look-ahead
// prefetches.
const topLines = 4
