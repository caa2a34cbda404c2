package book

import (
	"fmt"

	"github.com/tickcast/tickcast/feed"
)

// Level is one aggregated price level: the shares resting at a price on one
// side, and the number of orders holding them.
type Level struct {
	Px     int64
	Size   uint64
	Orders uint32
}

// Book is one instrument's book as the level deltas and snapshots applied
// to it describe it: each side's levels, best first (bids from the highest
// price, asks from the lowest). Its zero value is an empty book.
type Book struct {
	bids, asks []Level
	// incomplete is whether the last delta applied carried
	// feed.FlagBookIncomplete.
	incomplete bool
}

// side returns the levels of side s and whether it is the bid side; nil
// for a side other than feed.SideBuy and feed.SideSell.
func (b *Book) side(s feed.Side) (*[]Level, bool) {
	switch s {
	case feed.SideBuy:
		return &b.bids, true
	case feed.SideSell:
		return &b.asks, false
	}
	return nil, false
}

// index returns the index of px in levels (best first) and whether it is
// there; if not, the index where it belongs.
func index(levels []Level, px int64, bid bool) (int, bool) {
	lo, hi := 0, len(levels)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		p := levels[mid].Px
		if p == px {
			return mid, true
		}
		if (p > px) == bid {
			lo = mid + 1 // p ranks before px
		} else {
			hi = mid
		}
	}
	return lo, false
}

// Apply applies level delta d, by price: a new or changed level sets the
// level at d.Px to d's size and orders, inserting it if the book has no
// level at that price; a deleted level removes the level at d.Px. The
// delta is applied even when it does not fit the book (a new level at a
// price the book holds, a change or delete of a price it does not hold),
// and an *Error describes the misfit: a sign that the book missed deltas.
// Apply allocates only when a side holds more levels than it ever did.
func (b *Book) Apply(d *feed.LevelDelta, flags feed.Flags) error {
	lv, bid := b.side(d.Side)
	if lv == nil {
		return &Error{Side: d.Side, Action: d.Action, Px: d.Px, Reason: "side is neither B nor S"}
	}
	i, found := index(*lv, d.Px, bid)
	var misfit string
	switch d.Action {
	case feed.ActionNew, feed.ActionChange:
		if found {
			if d.Action == feed.ActionNew {
				misfit = "new level at a price the book holds"
			}
		} else {
			if d.Action == feed.ActionChange {
				misfit = "changed level at a price the book does not hold"
			}
			*lv = append(*lv, Level{})
			copy((*lv)[i+1:], (*lv)[i:])
		}
		(*lv)[i] = Level{Px: d.Px, Size: d.Size, Orders: d.Orders}
	case feed.ActionDelete:
		if !found {
			misfit = "deleted level at a price the book does not hold"
			break
		}
		*lv = append((*lv)[:i], (*lv)[i+1:]...)
	default:
		return &Error{Side: d.Side, Action: d.Action, Px: d.Px, Reason: "action is neither N, C nor D"}
	}
	b.incomplete = flags&feed.FlagBookIncomplete != 0
	if misfit != "" {
		return &Error{Side: d.Side, Action: d.Action, Px: d.Px, Reason: misfit}
	}
	return nil
}

// Reset empties the book, keeping its memory.
func (b *Book) Reset() {
	b.bids, b.asks, b.incomplete = b.bids[:0], b.asks[:0], false
}

// Len returns the number of levels on side s.
func (b *Book) Len(s feed.Side) int {
	lv, _ := b.side(s)
	if lv == nil {
		return 0
	}
	return len(*lv)
}

// Level returns level i of side s, 0 being the best, and whether the side
// has that many levels.
func (b *Book) Level(s feed.Side, i int) (Level, bool) {
	lv, _ := b.side(s)
	if lv == nil || i < 0 || i >= len(*lv) {
		return Level{}, false
	}
	return (*lv)[i], true
}

// Depth returns the best n levels of side s (fewer if the side has fewer),
// best first. The slice is the book's own: valid until the next Apply or
// Reset, and not to be changed. A negative n returns none.
func (b *Book) Depth(s feed.Side, n int) []Level {
	lv, _ := b.side(s)
	if lv == nil || n <= 0 {
		return nil
	}
	return (*lv)[:min(n, len(*lv))]
}

// BBO returns the best bid and the best ask; a side without levels has ok
// false and a zero Level.
func (b *Book) BBO() (bid Level, hasBid bool, ask Level, hasAsk bool) {
	bid, hasBid = b.Level(feed.SideBuy, 0)
	ask, hasAsk = b.Level(feed.SideSell, 0)
	return bid, hasBid, ask, hasAsk
}

// Incomplete reports whether the last delta applied said the feed
// handler's book may lack orders (feed.FlagBookIncomplete: its upstream
// feed was joined mid-day).
func (b *Book) Incomplete() bool { return b.incomplete }

// Error is a level delta that does not fit the book it was applied to, or
// that is not a valid level delta.
type Error struct {
	Instrument uint32
	Side       feed.Side
	Action     byte
	Px         int64
	Reason     string
}

func (e *Error) Error() string {
	return fmt.Sprintf("book: instrument %d: level delta %q side %q px %d: %s", e.Instrument, e.Action, byte(e.Side), e.Px, e.Reason)
}
