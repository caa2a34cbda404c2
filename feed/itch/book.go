package itch

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/tickcast/tickcast/internal/hugepage"
)

// Result says what a book operation did.
type Result uint8

// Results of book operations.
const (
	// OK: the operation was applied.
	OK Result = iota
	// Unknown: the order reference is not in the table (added before the
	// feed started, or its add was refused). Nothing changed.
	Unknown
	// Duplicate: an add or replace named a reference that is already live.
	// Nothing was added (a replace still removed its original order).
	Duplicate
	// Full: the order table is at capacity. Nothing was added (a replace
	// still removed its original order).
	Full
	// WrongStock: the reference belongs to an order of another stock
	// locate. Nothing changed.
	WrongStock
	// Excess: an execution or cancel named more shares than the order had
	// left. The order was removed; the book lost only what it held.
	Excess
	// BadSide: an add named a side other than 'B' or 'S'. Nothing changed.
	BadSide
)

var resultNames = [...]string{OK: "ok", Unknown: "unknown", Duplicate: "duplicate", Full: "full",
	WrongStock: "wrong-stock", Excess: "excess", BadSide: "bad-side"}

// String returns the result's name, as book test files spell it.
func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("result(%d)", uint8(r))
}

// Order is a resting order.
type Order struct {
	Ref    uint64
	Shares uint32
	Price  uint32 // Price(4)
	Locate uint16
	Side   byte // 'B' or 'S'
}

// slot is an entry of the order table: 16 bytes, so that four share a
// cache line and none straddles two. It holds a live order's key (keyOf)
// and its shares and price; an empty slot's key is 0.
type slot struct {
	key    uint64
	shares uint32
	price  uint32
}

// A slot's key holds the order's reference in its top bits, above its
// stock locate (16 bits), its side (1 for the asks) and a 1 that only an
// empty slot lacks. A reference of wideRef or more does not fit: such
// orders are kept in Books.wide instead. ITCH numbers each day's orders
// upwards from a small number, and a day adds some hundreds of millions,
// so real feeds stay far below wideRef (2^46, about 7 × 10^13).
const (
	keyRefShift = 18
	wideRef     = 1 << (64 - keyRefShift)
)

// keyOf returns the key of order ref (below wideRef) of stock locate on
// side ('B' or 'S', whose bit 4 tells them apart).
func keyOf(ref uint64, locate uint16, side byte) uint64 {
	return ref<<keyRefShift | uint64(locate)<<2 | uint64(side&0x10)>>3 | 1
}

// order returns the order in s.
func (s *slot) order() Order {
	return Order{Ref: s.key >> keyRefShift, Shares: s.shares, Price: s.price, Locate: s.locate(), Side: s.side()}
}

// locate returns the stock locate of the order in s.
func (s *slot) locate() uint16 { return uint16(s.key >> 2) }

// validSide says whether side is 'B' or 'S'. Its tests are ones a sound
// feed never fails, so they are never mispredicted; a test for 'B' first
// would be taken about half the time.
func validSide(side byte) bool {
	x := uint32(side) - 'B'
	return x <= 'S'-'B' && (1|1<<('S'-'B'))>>x&1 != 0
}

// side returns the side of the order in s, 'B' or 'S'.
func (s *slot) side() byte { return 'B' + byte(s.key>>1&1)*('S'-'B') }

// Level is an aggregated price level: the shares and number of orders
// resting at one price on one side.
type Level struct {
	Price  uint32
	Orders uint32
	Shares uint64
}

// Top is a book's best bid and ask. A side without orders has Has* false and
// zero price and size.
type Top struct {
	BidPrice, AskPrice uint32
	BidSize, AskSize   uint64
	HasBid, HasAsk     bool
}

// Top keeps each of its fields in a pair, the bid's then the ask's, so that
// sideOf picks a side's by index.
var (
	_ [unsafe.Offsetof(Top{}.AskPrice) - unsafe.Offsetof(Top{}.BidPrice) - unsafe.Sizeof(uint32(0))]struct{}
	_ [unsafe.Sizeof(uint32(0)) - (unsafe.Offsetof(Top{}.AskPrice) - unsafe.Offsetof(Top{}.BidPrice))]struct{}
	_ [unsafe.Offsetof(Top{}.AskSize) - unsafe.Offsetof(Top{}.BidSize) - unsafe.Sizeof(uint64(0))]struct{}
	_ [unsafe.Sizeof(uint64(0)) - (unsafe.Offsetof(Top{}.AskSize) - unsafe.Offsetof(Top{}.BidSize))]struct{}
	_ [unsafe.Offsetof(Top{}.HasAsk) - unsafe.Offsetof(Top{}.HasBid) - 1]struct{}
	_ [1 - (unsafe.Offsetof(Top{}.HasAsk) - unsafe.Offsetof(Top{}.HasBid))]struct{}
)

// sideOf returns the fields of side i of t (sideIndex: 0 the bid, 1 the
// ask), chosen without a branch: i fields on from the bid's.
func (t *Top) sideOf(i int) (has *bool, price *uint32, size *uint64) {
	return (*bool)(unsafe.Add(unsafe.Pointer(&t.HasBid), i)),
		(*uint32)(unsafe.Add(unsafe.Pointer(&t.BidPrice), i*int(unsafe.Sizeof(uint32(0))))),
		(*uint64)(unsafe.Add(unsafe.Pointer(&t.BidSize), i*int(unsafe.Sizeof(uint64(0)))))
}

// levelChange says how a book operation changed a side's levels.
type levelChange uint8

const (
	levelSame    levelChange = iota // nothing changed
	levelChanged                    // an existing level's orders or shares changed
	levelNew                        // a level was inserted
	levelGone                       // a level was removed
)

// levelEvent is what the last book operation did to the levels of the side
// it touched, for Source.depth: how, at which level counted from the best
// (0), and the price of a removed level. A replace touches two levels and
// leaves only its add's here.
type levelEvent struct {
	kind  levelChange
	pos   int
	price uint32
}

// book is one stock's aggregated price levels. Each side is sorted so that
// its best level is last: most changes happen near the top, so inserts and
// removals shift few elements, and the best level is read in O(1).
type book struct {
	// sides holds the bids (ascending price: best, highest, last) and
	// the asks (descending price: best, lowest, last), by sideIndex.
	sides [2][]Level
}

// Indexes of book.sides.
const (
	bidSide = 0
	askSide = 1
)

// The look-ahead's assembly (touch_amd64.h) finds the asks 24 bytes after
// the bids: a slice header's size.
var (
	_ [unsafe.Sizeof([]Level(nil)) - 24]struct{}
	_ [24 - unsafe.Sizeof([]Level(nil))]struct{}
)

// sideIndex returns the index in book.sides of side 'B' or 'S' (bit 4,
// the one that tells them apart): chosen without a branch, because the
// side is as random as the feed, and a branch on it would be mispredicted
// about half the time.
func sideIndex(side byte) int { return int(side >> 4 & 1) }

// Books is the order books of every stock locate of one feed: a table of
// live orders by reference, and per stock the aggregated levels of each
// side. ITCH order references are unique across all stocks for the day, so
// one table serves every stock; each order remembers its stock locate.
//
// The order table is an open-addressing hash table with linear probing and
// backward-shift deletion (no tombstones), sized at creation for a fixed
// capacity: adds, executions, cancels, deletes and replaces never allocate.
// Orders whose references are too large for a slot's key (wideRef and
// more, which no exchange reaches) are kept in a map instead, made when
// the first comes: correct, slower, and it may allocate. The capacity
// counts them too.
// A stock's book starts with room for 32 levels a side; a side grows (by
// doubling) when it first holds more levels than ever before, which
// becomes rare once the day has warmed up, into a level arena made with the
// table (levelArena; docs/scale.md), so that growing does not allocate.
// Every level holds at least one live order, so the levels are bounded by
// the table's capacity.
type Books struct {
	slots    []slot
	wide     map[uint64]Order // orders of references of wideRef and more
	mask     uint64
	shift    uint8
	run      uint8  // refRunLarge or refRunSmall
	runMask  uint64 // 1<<run - 1
	live     int
	capacity int
	high     int
	levels   levelArena
	books    []book // by stock locate, grown to the highest seen; held inline, one memory access fewer per event
	last     levelEvent
}

// NewBooks returns empty books whose order table holds up to capacity live
// orders (at least 1).
func NewBooks(capacity int) *Books {
	capacity = max(capacity, 1)
	// At most half full, so probe sequences stay short.
	n := 1 << bits.Len(uint(2*capacity-1))
	n = max(n, 2)
	slots := make([]slot, n)
	hugepage.Advise(slots)
	run := uint8(refRunSmall)
	if tableBytes(n) >= lookAheadTable {
		run = refRunLarge
	}
	return &Books{slots: slots, mask: uint64(n - 1), shift: uint8(64 - bits.TrailingZeros(uint(n))), run: run, runMask: 1<<run - 1,
		capacity: capacity, levels: newLevelArena(levelArenaSize(capacity))}
}

// tableBytes is the size of an order table of n slots.
func tableBytes(n int) uintptr { return uintptr(n) * unsafe.Sizeof(slot{}) }

// Capacity returns the most live orders the table holds.
func (b *Books) Capacity() int { return b.capacity }

// Orders returns the number of live orders: the table's occupancy.
func (b *Books) Orders() int { return b.live }

// HighWater returns the most live orders there have been at once.
func (b *Books) HighWater() int { return b.high }

// Runs of consecutive references that share a Fibonacci hash (their homes
// are consecutive slots), log2: in a table the look-ahead serves
// (lookAheadTable and more) and in a smaller one.
const (
	refRunLarge = 1
	refRunSmall = 3
)

// home returns ref's first slot. Runs of consecutive references (ITCH
// numbers orders in sequence, and most leave soon after they came) get
// consecutive slots, sharing cache lines while they are live; the runs are
// spread over the table by Fibonacci hashing, so sequential references do
// not pile up in one region. In a large table, read ahead, the runs are
// pairs: longer ones (8, 4) shared more lines but made longer probe runs,
// which lookups, inserts and the backward shift of deletes walk beyond the
// lines the look-ahead prefetches (tableLines). In a small one, which stays in
// the caches, runs of 8 are faster (docs/scale.md).
func (b *Books) home(ref uint64) uint64 {
	// The shifts are masked to 63 so that they compile to plain shifts
	// (b.run and b.shift are below 64 anyway).
	return ((ref>>(b.run&63))*0x9e3779b97f4a7c15>>(b.shift&63) + ref&b.runMask) & b.mask
}

// find returns the slot of ref (below wideRef), or -1.
func (b *Books) find(ref uint64) int {
	i, live := b.probe(ref)
	if !live {
		return -1
	}
	return int(i)
}

// probe returns the slot of ref (below wideRef) and true, or the empty
// slot that ends its probe run and false: where an insert puts it.
func (b *Books) probe(ref uint64) (i uint64, live bool) {
	for i = b.home(ref); ; i = (i + 1) & b.mask {
		k := b.slots[i].key
		if k == 0 {
			return i, false
		}
		if k>>keyRefShift == ref {
			return i, true
		}
	}
}

// remove empties slot i, moving later members of its probe run back so that
// no lookup stops early.
func (b *Books) remove(i int) {
	b.live--
	hole := uint64(i)
	for j := (hole + 1) & b.mask; b.slots[j].key != 0; j = (j + 1) & b.mask {
		// Move j into the hole unless its home lies cyclically in (hole,
		// j]: unless it is nearer its home than the hole is.
		if (j-b.home(b.slots[j].key>>keyRefShift))&b.mask >= (j-hole)&b.mask {
			b.slots[hole] = b.slots[j]
			hole = j
		}
	}
	b.slots[hole] = slot{}
}

// initialLevels is the capacity of each side of a new book, in levels.
const initialLevels = 32

// newBook makes stock locate's book, the first time an order is added
// to it (add looks up the books that exist itself).
func (b *Books) newBook(locate uint16) *book {
	if int(locate) >= len(b.books) {
		b.books = append(b.books, make([]book, int(locate)+1-len(b.books))...)
	}
	bk := &b.books[locate]
	if bk.sides[bidSide] == nil {
		// Room for the levels most stocks ever hold; a wider side grows
		// by doubling, in the level arena.
		bk.sides[bidSide], bk.sides[askSide] = b.levels.get(initialLevels), b.levels.get(initialLevels)
	}
	return bk
}

// levelArenaSize is the level arena's size, in levels, for an order table
// of capacity orders: a level per order the table holds, and as much again
// for the room sides keep to grow into, plus the first blocks of 1,024
// stocks. Touched only as it is used: a day that never fills the table
// never touches most of it.
func levelArenaSize(capacity int) int {
	return 2*capacity + 2*initialLevels*1024
}

// levelIndex returns the index of price in side (sorted best last; asc
// for bids, desc for asks) and whether it is there; if not, the index where
// it belongs. Most events are at the best few levels, the end of the side,
// whose lines the look-ahead prefetched, but at which of them is as random
// as the feed (on a full-size day a quarter at the best level, a fifth at
// the next, and so on): a search that branches on each comparison has its
// branches mispredicted. So the best topScan levels are compared without a
// branch, and how many of them rank before price says where it is. Only a
// price below them (one event in eight on a full-size day) searches on:
// it gallops back from there (1, 3, 7, 15 ... levels, each step twice the
// last) to bracket the price, and then halves the bracket, so that it
// reads only levels near the top. (Halving the whole side reads its
// middle first: a cache miss on a long side.)
func levelIndex(side []Level, price uint32, bid bool) (int, bool) {
	lo, hi := 0, len(side)
	if hi >= topScan {
		// How many of the best topScan levels rank before price, as a
		// sum of sign bits (p-x is negative when p is below x). An
		// ask ranks before price when it is below price; a bid when
		// it is above price, that is when it is not below price+1, so
		// for the bids the sum counts the others and is turned round
		// (^n + topScan + 1 is topScan-n). No difference overflows 64
		// bits. one, 1 for the bids, is chosen without a branch: the
		// side is as random as the feed.
		var one int64
		if bid {
			one = 1
		}
		x := int64(price) + one
		t := (*[topScan]Level)(side[hi-topScan:])
		n := uint64(int64(t[0].Price)-x)>>63 + uint64(int64(t[1].Price)-x)>>63 +
			uint64(int64(t[2].Price)-x)>>63 + uint64(int64(t[3].Price)-x)>>63 +
			uint64(int64(t[4].Price)-x)>>63 + uint64(int64(t[5].Price)-x)>>63 +
			uint64(int64(t[6].Price)-x)>>63 + uint64(int64(t[7].Price)-x)>>63
		m := uint64(-one)
		if c := int((n ^ m) + (topScan+1)&m); c < topScan {
			// side[i-1] is the best level not better than price:
			// price's own, or the one it goes above.
			i := hi - c
			eq := side[i-1].Price == price
			if eq {
				i--
			}
			return i, eq
		}
		hi -= topScan
	}
	for step := 1; hi-step >= 0; step <<= 1 {
		k := hi - step
		p := side[k].Price
		if p == price {
			return k, true
		}
		if (p < price) == bid {
			lo = k + 1 // price ranks before p
			break
		}
		hi = k
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		p := side[mid].Price
		if p == price {
			return mid, true
		}
		if (p < price) == bid {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, false
}

// topScan is how many of a side's best levels levelIndex compares without
// branching (written out for 8).
const topScan = 8

var _ [0]struct{} = [topScan - 8]struct{}{} // levelIndex's comparisons are written out for 8

// side returns side s ('B' or 'S') of bk and whether it is the bids.
func (bk *book) side(s byte) (*[]Level, bool) {
	i := sideIndex(s)
	return &bk.sides[i], i == bidSide
}

// shortShift is the most levels shiftUp and shiftDown move one by one;
// more are moved by copy. Most inserts and removals are near the best
// level, the end of a side, and move a few levels: a loop costs less than
// the call copy makes.
const shortShift = 8

// shiftUp moves side[:len-1] up by one level, into side[1:].
func shiftUp(side []Level) {
	if len(side) > shortShift {
		copy(side[1:], side)
		return
	}
	for k := len(side) - 1; k > 0; k-- {
		side[k] = side[k-1]
	}
}

// shiftDown moves side[1:] down by one level, into side[:len-1].
func shiftDown(side []Level) {
	if len(side) > shortShift {
		copy(side, side[1:])
		return
	}
	for k := 1; k < len(side); k++ {
		side[k-1] = side[k]
	}
}

// reduce removes shares at price and, if gone, one order, and says what
// that did; it returns the side's levels after it.
func (bk *book) reduce(s byte, price, shares uint32, gone bool) (levelEvent, []Level) {
	lv, bid := bk.side(s)
	i, ok := levelIndex(*lv, price, bid)
	if !ok {
		// Cannot happen: every live order is in its level.
		panic(fmt.Sprintf("itch: book has no %c level at %d", s, price))
	}
	ev := levelEvent{pos: len(*lv) - 1 - i}
	l := &(*lv)[i]
	l.Shares -= uint64(shares)
	if gone {
		l.Orders--
	}
	switch {
	case l.Orders == 0:
		ev.kind, ev.price = levelGone, price
		shiftDown((*lv)[i:])
		*lv = (*lv)[:len(*lv)-1]
	case shares != 0 || gone:
		ev.kind = levelChanged
	}
	return ev, *lv
}

// Add adds a new order. A zero-share order is added too (it holds a level's
// order count until deleted), as the feed may later replace it.
func (b *Books) Add(locate uint16, ref uint64, side byte, shares, price uint32) Result {
	res, _ := b.add(locate, ref, side, shares, price)
	return res
}

// add is Add, also returning the side the order went to (nil if it was
// refused).
func (b *Books) add(locate uint16, ref uint64, side byte, shares, price uint32) (Result, []Level) {
	b.last = levelEvent{}
	if !validSide(side) {
		return BadSide, nil
	}
	if ref >= wideRef {
		if _, live := b.wide[ref]; live {
			return Duplicate, nil
		}
		if b.live >= b.capacity {
			return Full, nil
		}
		if b.wide == nil {
			b.wide = make(map[uint64]Order)
		}
		b.wide[ref] = Order{Ref: ref, Shares: shares, Price: price, Locate: locate, Side: side}
	} else {
		i, live := b.probe(ref)
		if live {
			return Duplicate, nil
		}
		if b.live >= b.capacity {
			return Full, nil
		}
		b.slots[i] = slot{key: keyOf(ref, locate, side), shares: shares, price: price}
	}
	b.live++
	b.high = max(b.high, b.live)
	var bk *book
	if int(locate) < len(b.books) && b.books[locate].sides[bidSide] != nil {
		bk = &b.books[locate]
	} else {
		bk = b.newBook(locate)
	}
	// The order's shares join its level, or make a new one.
	lv, bid := bk.side(side)
	j, ok := levelIndex(*lv, price, bid)
	if ok {
		(*lv)[j].Orders++
		(*lv)[j].Shares += uint64(shares)
		b.last = levelEvent{kind: levelChanged, pos: len(*lv) - 1 - j}
		return OK, *lv
	}
	if len(*lv) == cap(*lv) {
		b.levels.grow(lv)
	}
	*lv = append(*lv, Level{})
	shiftUp((*lv)[j:])
	(*lv)[j] = Level{Price: price, Orders: 1, Shares: uint64(shares)}
	b.last = levelEvent{kind: levelNew, pos: len(*lv) - 1 - j}
	return OK, *lv
}

// lookup finds ref (below wideRef) for an event of stock locate.
func (b *Books) lookup(locate uint16, ref uint64) (int, Result) {
	i := b.find(ref)
	if i < 0 {
		return -1, Unknown
	}
	if b.slots[i].locate() != locate {
		return -1, WrongStock
	}
	return i, OK
}

// reduce takes shares off order o in its book: all it holds, and the
// order itself (gone), when shares reach what it holds, with Excess when
// they exceed it. The caller takes them off the order, or removes it.
func (b *Books) reduce(o *Order, shares uint32) (gone bool, res Result) {
	bk := &b.books[o.Locate]
	if shares >= o.Shares {
		if shares > o.Shares {
			res = Excess
		}
		b.last, _ = bk.reduce(o.Side, o.Price, o.Shares, true)
		return true, res
	}
	b.last, _ = bk.reduce(o.Side, o.Price, shares, false)
	return false, OK
}

// Execute takes shares off an order that traded. It returns the order as it
// was before (its side and price price the trade).
func (b *Books) Execute(locate uint16, ref uint64, shares uint32) (Order, Result) {
	b.last = levelEvent{}
	if ref >= wideRef {
		return b.executeWide(locate, ref, shares)
	}
	i, res := b.lookup(locate, ref)
	if res != OK {
		return Order{}, res
	}
	o := b.slots[i].order()
	gone, res := b.reduce(&o, shares)
	if gone {
		b.remove(i)
	} else {
		b.slots[i].shares -= shares
	}
	return o, res
}

// lookupWide finds ref (wideRef or more) for an event of stock locate.
func (b *Books) lookupWide(locate uint16, ref uint64) (Order, Result) {
	o, live := b.wide[ref]
	if !live {
		return Order{}, Unknown
	}
	if o.Locate != locate {
		return Order{}, WrongStock
	}
	return o, OK
}

// removeWide removes the live order ref (wideRef or more).
func (b *Books) removeWide(ref uint64) {
	delete(b.wide, ref)
	b.live--
}

// executeWide is Execute for a reference of wideRef or more.
func (b *Books) executeWide(locate uint16, ref uint64, shares uint32) (Order, Result) {
	o, res := b.lookupWide(locate, ref)
	if res != OK {
		return Order{}, res
	}
	gone, res := b.reduce(&o, shares)
	if gone {
		b.removeWide(ref)
	} else {
		left := o
		left.Shares -= shares
		b.wide[ref] = left
	}
	return o, res
}

// Cancel takes shares off an order (a partial cancel; cancelling all that is
// left removes it). It returns the order as it was before.
func (b *Books) Cancel(locate uint16, ref uint64, shares uint32) (Order, Result) {
	return b.Execute(locate, ref, shares)
}

// Delete removes an order. It returns the order as it was.
func (b *Books) Delete(locate uint16, ref uint64) (Order, Result) {
	o, _ := b.Order(ref)
	if _, _, res, _ := b.delete(locate, ref); res != OK {
		return Order{}, res
	}
	return o, OK
}

// delete is Delete returning only what normalizing an order event needs,
// in registers: the side the order was on, its shares, and that side's
// levels after it (nil if the order was not deleted). lookup and the
// removal are written out: it serves the most common event but one.
func (b *Books) delete(locate uint16, ref uint64) (side byte, shares uint32, res Result, lv []Level) {
	b.last = levelEvent{}
	var price uint32
	if ref >= wideRef {
		o, r := b.lookupWide(locate, ref)
		if r != OK {
			return 0, 0, r, nil
		}
		side, shares, price = o.Side, o.Shares, o.Price
		b.removeWide(ref)
	} else {
		i := b.find(ref)
		if i < 0 {
			return 0, 0, Unknown, nil
		}
		s := &b.slots[i]
		if s.locate() != locate {
			return 0, 0, WrongStock, nil
		}
		side, shares, price = s.side(), s.shares, s.price
		b.remove(i)
	}
	b.last, lv = b.books[locate].reduce(side, price, shares, true)
	return side, shares, OK, lv
}

// Replace removes order oldRef and adds newRef on the same side with a new
// price and size. It returns the original order. If newRef is already live
// (Duplicate) or the table is full, the original is still removed.
func (b *Books) Replace(locate uint16, oldRef, newRef uint64, shares, price uint32) (Order, Result) {
	o, res := b.Delete(locate, oldRef)
	if res != OK {
		return o, res
	}
	return o, b.Add(locate, newRef, o.Side, shares, price)
}

// Order returns the live order ref.
func (b *Books) Order(ref uint64) (Order, bool) {
	if ref >= wideRef {
		o, live := b.wide[ref]
		return o, live
	}
	i := b.find(ref)
	if i < 0 {
		return Order{}, false
	}
	return b.slots[i].order(), true
}

// Top returns the best bid and ask of stock locate.
func (b *Books) Top(locate uint16) Top {
	var t Top
	if int(locate) >= len(b.books) {
		return t
	}
	bids, asks := b.books[locate].sides[bidSide], b.books[locate].sides[askSide]
	if n := len(bids); n > 0 {
		t.HasBid, t.BidPrice, t.BidSize = true, bids[n-1].Price, bids[n-1].Shares
	}
	if n := len(asks); n > 0 {
		t.HasAsk, t.AskPrice, t.AskSize = true, asks[n-1].Price, asks[n-1].Shares
	}
	return t
}

// Levels appends the levels of one side ('B' or 'S') of stock locate to dst,
// best first, and returns it (dst as it is for another side byte).
func (b *Books) Levels(locate uint16, side byte, dst []Level) []Level {
	if int(locate) >= len(b.books) || !validSide(side) {
		return dst
	}
	bk := &b.books[locate]
	lv, _ := bk.side(side)
	for i := len(*lv) - 1; i >= 0; i-- {
		dst = append(dst, (*lv)[i])
	}
	return dst
}
