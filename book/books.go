package book

import (
	"github.com/tickcast/tickcast/feed"
)

// denseIDs bounds the instrument ids kept in a slice indexed by id; larger
// ids go to a map.
const denseIDs = 1 << 20

// Books is the books of the instruments of one channel, by instrument id,
// built from the channel's messages as a tickcast.Handler receives them.
// Feed it every message of the channel (Apply) and reset it when the
// channel's state starts over (Reset, on tickcast.EventSnapshot and
// tickcast.EventSessionStart). It is not safe for concurrent use.
type Books struct {
	dense  []*Book
	sparse map[uint32]*Book
	msg    feed.Msg // decode scratch, kept here so Apply does not allocate
}

// Apply applies one message of the channel, stream or snapshot alike: a
// level delta changes its instrument's book (Book.Apply); other messages,
// and messages too short to be a level delta, leave the books as they are.
// It returns the decoding error of a malformed level delta, or the
// *Error of one that does not fit its book. Apply allocates only for an
// instrument first seen or a side holding more levels than ever before.
func (bs *Books) Apply(msg []byte) error {
	if len(msg) == 0 || feed.Type(msg[0]) != feed.TypeLevelDelta {
		return nil
	}
	m := &bs.msg
	if err := m.Decode(msg); err != nil {
		return err
	}
	err := bs.book(m.Instrument).Apply(&m.Delta, m.Flags)
	if e, ok := err.(*Error); ok {
		e.Instrument = m.Instrument
	}
	return err
}

// book returns instrument id's book, creating it if needed.
func (bs *Books) book(id uint32) *Book {
	if id < denseIDs {
		if int(id) >= len(bs.dense) {
			bs.dense = append(bs.dense, make([]*Book, int(id)+1-len(bs.dense))...)
		}
		b := bs.dense[id]
		if b == nil {
			b = &Book{}
			bs.dense[id] = b
		}
		return b
	}
	b := bs.sparse[id]
	if b == nil {
		if bs.sparse == nil {
			bs.sparse = map[uint32]*Book{}
		}
		b = &Book{}
		bs.sparse[id] = b
	}
	return b
}

// Book returns instrument id's book, or nil if no level delta of it was
// applied since the books were created.
func (bs *Books) Book(id uint32) *Book {
	if id < denseIDs {
		if int(id) < len(bs.dense) {
			return bs.dense[id]
		}
		return nil
	}
	return bs.sparse[id]
}

// Each calls fn with every instrument's book that has held levels, in
// ascending instrument order for ids below 2^20 (larger ids follow in no
// set order).
func (bs *Books) Each(fn func(id uint32, b *Book)) {
	for id, b := range bs.dense {
		if b != nil {
			fn(uint32(id), b)
		}
	}
	for id, b := range bs.sparse {
		fn(id, b)
	}
}

// Reset empties every book, keeping their memory: the channel's state
// starts over (a snapshot follows, or a new session begins).
func (bs *Books) Reset() {
	for _, b := range bs.dense {
		if b != nil {
			b.Reset()
		}
	}
	for _, b := range bs.sparse {
		b.Reset()
	}
}
