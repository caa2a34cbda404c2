package recovery

import (
	"encoding/binary"
	"slices"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
)

// denseIDs bounds the instrument ids kept in a slice indexed by id; larger
// ids go to a map.
const denseIDs = 1 << 20

// Snapshot slots of an instrument, in the order a snapshot carries them.
const (
	slotDefinition = iota
	slotStatus
	slotQuote
	slotTrade
	numSlots
)

// slotCap is the capacity each slot starts with: room for every version-1
// message kept, and some for fields a newer version may append.
const slotCap = 80

// slotOf returns the slot of a message type, or -1 for types a snapshot does
// not carry.
func slotOf(t feed.Type) int {
	switch t {
	case feed.TypeDefinition:
		return slotDefinition
	case feed.TypeStatus:
		return slotStatus
	case feed.TypeQuote:
		return slotQuote
	case feed.TypeTrade:
		return slotTrade
	}
	return -1
}

// instrument holds the last message of each slot type of one instrument, and
// its price levels. A slot is empty (no message yet) when its length is 0:
// every kept message is at least a header long.
type instrument struct {
	slots  [numSlots][]byte
	inline [numSlots][slotCap]byte
	// px and levels are, per side (bids, asks), the levels the level
	// deltas published so far describe, best first: px their prices, and
	// levels, index for index, the last delta of each price, kept as a
	// new-level delta. The prices are apart from the messages so that a
	// search reads one or two cache lines, and each message is kept in
	// its entry, not behind a pointer.
	px     [2][]int64
	levels [2][]level
}

// levelCap is the room for a level delta in its level entry: a version-1
// delta and fields a newer version may append. A longer one is kept in
// level.big.
const levelCap = 64

// level is the last level delta at one price, its action set to
// feed.ActionNew: in buf[:n] when it fits, else in big (n is then 0).
type level struct {
	n   uint8
	buf [levelCap]byte
	big []byte
}

// msg returns the level's delta, with its capacity cut to its length.
func (l *level) msg() []byte {
	if l.n == 0 {
		return l.big[:len(l.big):len(l.big)]
	}
	return l.buf[:l.n:l.n]
}

// set keeps msg as the level's delta, action new.
func (l *level) set(msg []byte) {
	if len(msg) <= levelCap {
		l.n = uint8(copy(l.buf[:], msg))
		l.buf[levelActionOffset] = feed.ActionNew
		return
	}
	l.n = 0
	l.big = append(l.big[:0], msg...)
	l.big[levelActionOffset] = feed.ActionNew
}

func newInstrument() *instrument {
	in := &instrument{}
	for i := range in.slots {
		in.slots[i] = in.inline[i][:0:slotCap]
	}
	return in
}

// state is the snapshot state of one channel: for each instrument the last
// definition ('I'), trading status ('S'), quote ('Q') and trade ('T'),
// byte-identical to the messages published, its price levels as the level
// deltas ('L') published describe them, and the channel sequence the state
// reflects. It has no lock of its own; Channel feeds it from each
// packet together with its ring, under its lock.
type state struct {
	session    mold.Session
	hasSession bool
	seq        uint64
	dense      []*instrument // index: instrument id < denseIDs
	sparse     map[uint32]*instrument
	sparseIDs  []uint32 // keys of sparse, ascending
}

// reset empties the state for a new session that reflects sequence seq
// (0: nothing published yet). Instrument buffers are dropped: ids of the new
// session may differ.
func (st *state) reset(session mold.Session, seq uint64) {
	st.session, st.hasSession = session, true
	st.seq = seq
	clear(st.dense)
	st.dense = st.dense[:0]
	st.sparse = nil
	st.sparseIDs = st.sparseIDs[:0]
}

// apply applies message seq of the state's session, in publish order. A
// definition, status, quote or trade replaces the instrument's previous
// message of that type (a copy of msg is kept; msg is not retained); a
// level delta sets or removes its price level (applyLevel); messages of
// other types, and messages shorter than their type's version-1 size, only
// advance the sequence. apply allocates only for an instrument not seen
// before in the session, a side holding more levels than ever before, or
// a message longer than any seen before for its slot.
func (st *state) apply(seq uint64, msg []byte) {
	st.seq = seq
	if len(msg) < feed.HeaderLen {
		return
	}
	if feed.Type(msg[0]) == feed.TypeLevelDelta {
		if len(msg) >= feed.LevelDeltaLen {
			st.instrument(binary.LittleEndian.Uint32(msg[4:8])).applyLevel(msg)
		}
		return
	}
	slot := slotOf(feed.Type(msg[0]))
	if slot < 0 {
		return
	}
	in := st.instrument(binary.LittleEndian.Uint32(msg[4:8]))
	b := in.slots[slot]
	if cap(b) < len(msg) {
		b = make([]byte, len(msg), len(msg)+len(msg)/4)
	}
	b = b[:len(msg)]
	copy(b, msg)
	in.slots[slot] = b
}

// instrument returns instrument id's entry, creating it if needed.
func (st *state) instrument(id uint32) *instrument {
	if id < denseIDs {
		if int(id) < len(st.dense) {
			if in := st.dense[id]; in != nil {
				return in
			}
		} else {
			st.dense = slices.Grow(st.dense, int(id)+1-len(st.dense))
			st.dense = st.dense[:id+1]
		}
		in := newInstrument()
		st.dense[id] = in
		return in
	}
	if in := st.sparse[id]; in != nil {
		return in
	}
	if st.sparse == nil {
		st.sparse = make(map[uint32]*instrument)
	}
	in := newInstrument()
	st.sparse[id] = in
	i, _ := slices.BinarySearch(st.sparseIDs, id)
	st.sparseIDs = slices.Insert(st.sparseIDs, i, id)
	return in
}

// snapshot calls fn with every message of the state: instruments in
// ascending id order, and for each its definition, status, quote and trade,
// those it has; msg is valid only during the call. It returns the session
// and the channel sequence the state reflects: every message up to and
// including seq, none after. It returns ErrUnknownSession if the state has
// no session yet, and stops at and returns the first error of fn.
func (st *state) snapshot(fn func(msg []byte) error) (mold.Session, uint64, error) {
	if !st.hasSession {
		return mold.Session{}, 0, ErrUnknownSession
	}
	for _, in := range st.dense {
		if in == nil {
			continue
		}
		if err := in.each(fn); err != nil {
			return st.session, st.seq, err
		}
	}
	for _, id := range st.sparseIDs {
		if err := st.sparse[id].each(fn); err != nil {
			return st.session, st.seq, err
		}
	}
	return st.session, st.seq, nil
}

// levelActionOffset is the offset of a level delta's action byte.
const levelActionOffset = feed.HeaderLen + 1

// applyLevel applies level delta msg, by price as a subscriber's book does
// (docs/wire-format.md, "Applying level deltas"): a new or changed level
// keeps a copy of msg, its action set to new, at its price; a deleted level
// removes its price. A delta of another side or action changes nothing.
func (in *instrument) applyLevel(msg []byte) {
	body := msg[feed.HeaderLen:]
	k, bid := 0, true
	switch feed.Side(body[0]) {
	case feed.SideBuy:
	case feed.SideSell:
		k, bid = 1, false
	default:
		return
	}
	px := int64(binary.LittleEndian.Uint64(body[8:]))
	prices, lv := in.px[k], in.levels[k]
	i, found := levelIndex(prices, px, bid)
	switch body[1] {
	case feed.ActionNew, feed.ActionChange:
	case feed.ActionDelete:
		if found {
			copy(prices[i:], prices[i+1:])
			copy(lv[i:], lv[i+1:])
			// The last entry keeps a copy of its neighbour's big buffer,
			// if any; it is reused or dropped with the entry.
			in.px[k], in.levels[k] = prices[:len(prices)-1], lv[:len(lv)-1]
		}
		return
	default:
		return
	}
	if !found {
		prices = append(prices, 0)
		if len(lv) < cap(lv) {
			lv = lv[:len(lv)+1]
		} else {
			lv = append(lv, level{})
		}
		copy(prices[i+1:], prices[i:])
		copy(lv[i+1:], lv[i:])
		prices[i] = px
		lv[i].big = nil // shared with the entry after it
		in.px[k], in.levels[k] = prices, lv
	}
	lv[i].set(msg)
}

// levelIndex returns the index of px in prices (best first: descending
// for bids, ascending for asks) and whether it is there; if not, the index
// where it belongs. A side holds at most the feed handler's depth (64), so
// a scan beats a binary search.
func levelIndex(prices []int64, px int64, bid bool) (int, bool) {
	if bid {
		for i, p := range prices {
			if p <= px {
				return i, p == px
			}
		}
		return len(prices), false
	}
	for i, p := range prices {
		if p >= px {
			return i, p == px
		}
	}
	return len(prices), false
}

// each calls fn with the instrument's messages: its definition, status,
// quote and trade, those it has, then its levels, bids best first, then
// asks best first.
func (in *instrument) each(fn func(msg []byte) error) error {
	for _, b := range in.slots {
		if len(b) == 0 {
			continue
		}
		if err := fn(b[:len(b):len(b)]); err != nil {
			return err
		}
	}
	for k := range in.levels {
		for i := range in.levels[k] {
			if err := fn(in.levels[k][i].msg()); err != nil {
				return err
			}
		}
	}
	return nil
}
