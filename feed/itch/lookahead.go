package itch

import (
	"unsafe"

	"github.com/tickcast/tickcast/feed"
)

// lookAhead is how many ITCH messages a Source reads ahead of the one it
// normalizes. On a full-size day the order table and the books are far
// larger than the caches, so nearly every event misses them; prefetching
// what each message's event reads early lets those misses overlap instead
// of coming one after another. It is done in two steps, because where a
// stock's sides are is itself in memory that misses (the stock's entry in
// Books.books): when a message is read, lookAhead messages before its
// turn, its stock's entry is prefetched; eventAhead messages before its
// turn, when the entry has arrived, the lines its event reads (touch).
// Touching the event at once, with eight messages read ahead, made a
// full-size day 4% slower (docs/scale.md).
const lookAhead = 16

// eventAhead is how many messages before its turn a message's event is
// touched (see lookAhead).
const eventAhead = 8

// The ring of messages read ahead is indexed with a mask: lookAhead must
// be a power of two.
var _ [0]struct{} = [lookAhead & (lookAhead - 1)]struct{}{}

// A Reader keeps its messages as long as the look-ahead spans (Source.Next
// frames a Reader's messages in place): readStable must be at least
// aheadSpan.
var _ [readStable - aheadSpan]struct{}

// lookAheadTable is the smallest order table (in bytes) a Source reads
// ahead for from the start, and lookAheadLevels the most levels the books
// may hold before it reads ahead with a smaller table: below both, the
// table and the books stay in the caches, where the look-ahead costs more
// than its prefetches save (with a few stocks, 20%), but many stocks'
// books outgrow the caches even with a small table (8,000 stocks take
// 8 MB of levels, and reading ahead saves 20%; docs/scale.md).
const (
	lookAheadTable  = 8 << 20
	lookAheadLevels = (2 << 20) / int(unsafe.Sizeof(Level{}))
)

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
	p    []byte
	b    [aheadSlot]byte
	n    int
	big  bool
	off  int64
	recv int64 // when it arrived, from a timedReader
}

// stableReader is a MessageReader whose messages keep their bytes, after
// the call that returned them, until at least stableBytes more bytes of
// input have been read (Reader does). A Source reads ahead of such a
// reader without copying the messages.
type stableReader interface {
	stableBytes() int
}

// pendingReader is a MessageReader that tells whether its next Next
// returns at once: a live feed's waits for the network when it holds
// nothing. The look-ahead reads ahead of such a reader only what it
// already holds, so that no message waits for the ones after it to
// arrive.
type pendingReader interface {
	Pending() bool
}

// aheadSpan is the most input the look-ahead spans: lookAhead messages
// that fit a slot and one of the longest (nothing is read past it). A
// stableReader must keep its messages at least that long.
const aheadSpan = lookAhead*(2+aheadSlot) + 2 + 65535

// readAhead is the look-ahead state of a Source.
type readAhead struct {
	ring       [lookAhead]ahead
	head, size int
	touched    int    // the oldest touched of the ring's messages have had their events touched
	big        []byte // the one message too long for a slot
	bigHeld    bool
	err        error // what ended the reading ahead, returned after the messages before it
	on         bool  // reading ahead: the order table is large enough (lookAheadTable), or the books have grown (lookAheadLevels)
	grow       bool  // not on yet, but to be once the books hold lookAheadLevels levels
	stable     bool  // the reader is a stableReader: no copies
	pending    pendingReader
	// frames is the Reader whose messages the Source reads, at offsets
	// *base more (the reader is a *Reader, or a framedReader): the
	// look-ahead frames them itself.
	frames *Reader
	base   *int64
}

// framedReader is a MessageReader of this package whose messages are those
// of a Reader, at offsets *base more than the Reader's, and that keeps
// them as a stableReader does: the look-ahead frames them in place, and
// calls Next only to read more input, or at the end. A *Reader is framed
// by its type, not by a method: a type of another package that embeds one
// and overrides Next must not have its Next skipped.
type framedReader interface {
	framed() (rd *Reader, base *int64)
}

// noBase is the base offset of a Reader's own messages.
var noBase int64

// next returns the next ITCH message and its offset, or the reader's error
// once the messages read before it have been returned. feed.ErrIdle and
// ErrLost are returned once, where they fell among the messages; other
// errors stay.
//
// Next does the common case itself (a Reader's next message all buffered,
// the ring all but full); next does the rest: no look-ahead, a reader the
// look-ahead calls for each message, the ring filling up, the end of the
// buffer or of the input, and a message too long for a slot.
func (s *Source) next() ([]byte, int64, error) {
	a := &s.ahead
	if !a.on {
		if !a.grow || s.books.levels.used < lookAheadLevels {
			b, off, err := s.rd.Next()
			if s.timed != nil {
				s.recvNs = s.timed.RecvNs()
			}
			return b, off, err
		}
		a.on, a.grow = true, false
	}
	for a.size < lookAhead && a.err == nil && !a.bigHeld {
		if a.size > 0 && a.pending != nil && !a.pending.Pending() {
			break // nothing more has arrived: handle what has
		}
		b, off, err := s.rd.Next()
		if err != nil {
			a.err = err
			break
		}
		slot := &a.ring[(a.head+a.size)&(lookAhead-1)]
		slot.n, slot.off, slot.big = len(b), off, len(b) > aheadSlot
		if s.timed != nil {
			slot.recv = s.timed.RecvNs()
		}
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
	if a.size < lookAhead {
		// No more now: the events of the messages read are touched
		// without waiting for eventAhead more.
		for a.touched < a.size {
			e := a.bytes(a.touched)
			a.touched++
			if traceTouch != nil {
				traceTouch(e, nil)
			}
			touchEvent(s, unsafe.SliceData(e), len(e), nil, 0)
		}
	}
	if a.size == 0 {
		err := a.err
		if err == ErrLost || err == feed.ErrIdle {
			a.err = nil
		}
		return nil, s.rd.Offset(), err
	}
	b, slot := a.bytes(0), &a.ring[a.head]
	a.head = (a.head + 1) & (lookAhead - 1)
	a.size--
	a.touched = max(a.touched-1, 0)
	if slot.big {
		a.bigHeld = false
	}
	if s.timed != nil {
		s.recvNs = slot.recv
	}
	return b, slot.off, nil
}

// Kinds of ITCH message for touch, by type (touchKinds).
const (
	touchNone    = 0
	touchAdd     = 1 // names its side
	touchOrder   = 2 // its side is its order's, not known yet
	touchReplace = 4 // and names a second reference
)

var touchKinds = [256]uint8{
	TypeAddOrder: touchAdd, TypeAddOrderMPID: touchAdd,
	TypeOrderExecuted: touchOrder, TypeOrderExecutedPrice: touchOrder, TypeOrderCancel: touchOrder,
	TypeOrderDelete: touchOrder, TypeOrderReplace: touchReplace,
}

// touch prefetches what the events of the messages read ahead will read,
// so that the cache lines are on their way by the time the events are
// handled: for b, the message just read (the newest in the ring), its
// stock's entry in the books; for the oldest message whose event is not
// touched yet, once eventAhead messages follow it, the order table slots
// its reference (and a replace's new one) is looked up from, its stock's
// state, and the best levels of its stock's side, or of both sides when
// the side is its order's. Every order event carries its reference at the
// same offset; the few branches depend on the kind of event and on checks
// a sound feed passes (its length, a known stock), not on its data. It is
// one call to assembly (touchEvent; a no-op where there is none), which
// reads the Source's fields itself.
func (s *Source) touch(b []byte) {
	a := &s.ahead
	var e []byte
	if a.size-a.touched > eventAhead {
		e = a.bytes(a.touched)
		a.touched++
	}
	if traceTouch != nil {
		traceTouch(e, b)
	}
	touchEvent(s, unsafe.SliceData(e), len(e), unsafe.SliceData(b), len(b))
}

// traceTouch, if set (by tests only, before a Source is made), is called
// before each touchEvent call with its messages: the one whose event is
// touched and the one just read (either may be nil).
var traceTouch func(event, read []byte)

// bytes returns the bytes of the ring's k-th oldest message.
func (a *readAhead) bytes(k int) []byte {
	slot := &a.ring[(a.head+k)&(lookAhead-1)]
	switch {
	case a.stable:
		return slot.p
	case slot.big:
		return a.big
	}
	return slot.b[:slot.n]
}

// tableLines is how many cache lines of the order table the look-ahead
// prefetches from an event's home slot on: the slot's own, and the next,
// which holds the slots a lookup may probe past it and those a delete may
// shift back (a line holds four slots).
const tableLines = 2

// topLines is how many cache lines of a side's best levels the look-ahead
// prefetches.
const topLines = 4
