package itch

import (
	"errors"
	"io"
	"unsafe"

	"github.com/tickcast/tickcast/config"

	"github.com/tickcast/tickcast/feed"
)

// PriceScale is the number of implied decimals of every ITCH Price(4), and so
// of every price this package normalizes.
const PriceScale = 4

// Start says whether the input starts at the beginning of the trading day,
// which decides whether the books can be complete.
type Start uint8

// Start modes.
const (
	// StartAuto: the input started at the beginning of the day if and only
	// if its first message is system event 'O' (start of messages). An
	// order reference that is not in the table later proves otherwise and
	// switches to mid-day for the rest of the run.
	StartAuto Start = iota
	// StartOfDay: the caller asserts that the input holds the whole day.
	// Unknown order references are still counted, and still switch to
	// mid-day.
	StartOfDay
	// StartMidDay: the caller asserts that the input started mid-day.
	StartMidDay
)

// MaxDepth is the largest Config.Depth: the most price levels per side
// published as level deltas.
const MaxDepth = 64

// DefaultOrderCapacity is Config.OrderCapacity's default. The table takes
// 48 to 96 bytes per order of capacity (it is kept at most half full).
const DefaultOrderCapacity = 1 << 20

// Config configures a Source.
type Config struct {
	// OrderCapacity is the most live orders the order table holds (0:
	// DefaultOrderCapacity). Adds beyond it are refused and counted in
	// Stats.TableFull; the orders stay unknown.
	OrderCapacity int
	// Start says whether the input starts at the beginning of the day.
	Start Start
	// Depth is the number of price levels per side, 0..MaxDepth, whose
	// changes are published as level deltas (feed.TypeLevelDelta; see the
	// package documentation and docs/wire-format.md). 0 publishes none.
	Depth int
	// Clock stamps each normalized message's RecvNs (nil: the wall clock,
	// in Unix ns, read as feed.NewWallClock does), but for the messages
	// of a MessageReader that tells when each arrived (see
	// NewMessageSource).
	Clock func() int64
}

var configCheck = config.Checker{Pkg: "itch", Struct: "Config"}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.OrderCapacity, DefaultOrderCapacity)
	if c.Clock == nil {
		c.Clock = feed.NewWallClock()
	}
	return c
}

// validate checks a Config whose defaults are set.
func (c Config) validate() error {
	switch {
	case c.OrderCapacity < 1:
		return configCheck.Invalid("OrderCapacity", c.OrderCapacity, "must not be negative")
	case c.Start > StartMidDay:
		return configCheck.Invalid("Start", c.Start, "want StartAuto, StartOfDay or StartMidDay")
	case c.Depth < 0 || c.Depth > MaxDepth:
		return configCheck.Invalid("Depth", c.Depth, "want 0..%d", MaxDepth)
	}
	return nil
}

// Stats counts what a Source read and did.
type Stats struct {
	// Messages is the number of framed messages read, of any type.
	Messages uint64
	// ByType counts decoded messages per ITCH type letter.
	ByType [256]uint64
	// SkippedTypes counts messages of types ITCH 5.0 does not define, per
	// first byte; they are skipped.
	SkippedTypes [256]uint64
	// Empty counts zero-length messages, skipped.
	Empty uint64
	// UnknownOrder counts, per ITCH type, events that name an order
	// reference the table does not hold. For a replace it is the original
	// reference that is unknown (and so the new one is too).
	UnknownOrder [256]uint64
	// Normalized counts emitted messages per feed.Type.
	Normalized [256]uint64
	// Duplicate counts adds and replaces whose new reference was live.
	Duplicate uint64
	// TableFull counts adds and replaces refused for want of capacity.
	TableFull uint64
	// WrongStock counts events whose order belongs to another stock locate.
	WrongStock uint64
	// Excess counts executions and cancels of more shares than the order
	// had left.
	Excess uint64
	// BadSide counts adds with a side other than 'B' or 'S'.
	BadSide uint64
	// NotPrintable counts executions with price marked non-printable: the
	// book changes, no trade is published.
	NotPrintable uint64
	// EmptyCross counts cross trades of zero shares (no cross happened):
	// no trade is published.
	EmptyCross uint64
	// Undefined counts messages dropped because they name a stock locate
	// for which no message ever gave a symbol (a broken trade can name
	// one), so no definition can be published before them.
	Undefined uint64
	// Instruments is the number of instruments defined; Provisional of them
	// by a provisional definition only.
	Instruments, Provisional int
}

// instrument is a Source's state of one stock locate.
type instrument struct {
	defined     bool
	provisional bool
	state       byte // last trading state from an 'H' message, or 0
	quoted      bool // a quote was published
	last        Top  // the last quote published
}

// tradingState returns the state to publish: the last from an 'H' message,
// or '?' if there was none.
func (in *instrument) tradingState() byte {
	if in.state == 0 {
		return feed.StateUnknownState
	}
	return in.state
}

// instrument returns the state of stock locate, growing the table when a
// locate beyond it first appears (once per instrument, never per message in
// steady state).
func (s *Source) instrument(locate uint16) *instrument {
	if int(locate) >= len(s.inst) {
		s.inst = append(s.inst, make([]instrument, int(locate)+1-len(s.inst))...)
	}
	return &s.inst[locate]
}

// Source normalizes ITCH 5.0 in NASDAQ's file format into feed messages: it
// implements feed.Source. See the package documentation for the mapping.
type Source struct {
	cfg    Config
	rd     MessageReader
	timed  timedReader // rd, if it tells when each message arrived
	books  *Books
	inst   []instrument // by stock locate, grown to the highest seen
	midDay bool
	first  bool // the first message was seen
	stats  Stats
	err    error // sticky

	// Normalized messages waiting for Next: one ITCH message makes at most
	// a definition, a trade, a quote and maxDeltas level deltas. A fixed
	// array, so queueing does not allocate.
	out        [3 + maxDeltas]feed.Msg
	head, tail int
	// direct is the message Next fills while an ITCH message is handled,
	// until the first push: most ITCH messages make one normalized
	// message or none, and it need not be copied out of the queue.
	direct *feed.Msg

	// A system event is broadcast as a status to every defined instrument,
	// one per Next call: bcastNext is the next stock locate to visit.
	bcast       bool
	bcastNext   int
	bcastReason [4]byte
	bcastFlags  feed.Flags
	bcastNs     int64
	recvNs      int64 // RecvNs of the ITCH message being normalized
	ahead       readAhead
	lastNs      int64 // ITCH timestamp of the last message read

	// snap is the top Config.Depth levels (best first) of the side an
	// order event is about to change, copied before a replace, which
	// touches two levels: its deltas are the difference between snap and
	// the side after it. Every other order event touches one level, whose
	// deltas follow from Books.last alone. snapped says snap is taken.
	snap    [MaxDepth]Level
	snapN   int
	snapped bool
	// exhaustive takes the snapshot before every order event and merges
	// after it, the replace's way: the reference the tests compare the
	// per-event deltas with.
	exhaustive bool
}

// NewSource returns a Source reading r, plain or gzip-compressed (told apart
// by the gzip magic bytes).
func NewSource(r io.Reader, cfg Config) (*Source, error) {
	dr, err := Decompress(r)
	if err != nil {
		return nil, err
	}
	return NewMessageSource(NewReader(dr), cfg)
}

// MessageReader yields ITCH messages one at a time: Reader does for NASDAQ's
// file format, and other framings (MoldUDP64 packets in a capture) do for
// theirs. Next returns a message, valid until the next call, and the input
// offset that locates it in errors; io.EOF at the clean end of the input.
// Offset returns the input consumed so far.
type MessageReader interface {
	Next() (msg []byte, off int64, err error)
	Offset() int64
}

// timedReader is the method of a MessageReader that also tells when the
// message its Next returned last arrived (Unix ns), as a live feed does
// (feed/upstream's Feed: its messages come in datagrams stamped as they
// are taken from the socket).
type timedReader interface {
	RecvNs() int64
}

// NewMessageSource returns a Source normalizing the messages r yields, the
// same way NewSource normalizes a file's. If r has a method RecvNs() int64
// that returns when the message its Next returned last arrived, in Unix
// ns (a live feed does), each ITCH message's normalized messages carry
// that time as their RecvNs, instead of Config.Clock's when the Source
// read the message; the time a message waited before it was normalized
// then counts in the latency downstream. The statuses of a loss the reader
// reports (ErrLost) still carry Config.Clock's time, when it was reported.
func NewMessageSource(r MessageReader, cfg Config) (*Source, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Source{
		cfg:    cfg,
		rd:     r,
		books:  NewBooks(cfg.OrderCapacity),
		midDay: cfg.Start == StartMidDay,
	}
	s.ahead.on = tableBytes(len(s.books.slots)) >= lookAheadTable
	s.ahead.grow = !s.ahead.on
	if sr, ok := r.(stableReader); ok && sr.stableBytes() >= aheadSpan {
		s.ahead.stable = true
	}
	s.ahead.pending, _ = r.(pendingReader)
	s.timed, _ = r.(timedReader)
	switch fr := r.(type) {
	case *Reader:
		s.ahead.frames, s.ahead.base = fr, &noBase
	case framedReader:
		if s.ahead.stable && s.ahead.pending == nil && s.timed == nil {
			s.ahead.frames, s.ahead.base = fr.framed()
		}
	}
	return s, nil
}

// Stats returns the counters so far.
func (s *Source) Stats() *Stats { return &s.stats }

// Books returns the source's order books (read them between Next calls).
func (s *Source) Books() *Books { return s.books }

// MidDay reports whether the source treats its input as started mid-day, so
// that its quotes carry feed.FlagBookIncomplete.
func (s *Source) MidDay() bool { return s.midDay }

// Offset returns the bytes of uncompressed input consumed so far: while
// the Source reads ahead (an order table of lookAheadTable or more, or
// books of lookAheadLevels), up to lookAhead messages past the last one
// normalized.
func (s *Source) Offset() int64 { return s.rd.Offset() }

// Settled reports whether Next has returned every message normalized from
// the ITCH messages read so far: Books then holds exactly the state those
// messages describe. Between the messages of one ITCH message (a quote and
// its level deltas, say) Books is already ahead of them.
func (s *Source) Settled() bool { return s.head == s.tail && !s.bcast }

// Next fills m with the next normalized message. It returns io.EOF at the
// end of the input, and a *FormatError for a message whose length does not
// match its type or that the input cuts short; errors are sticky. Next does
// not allocate.
func (s *Source) Next(m *feed.Msg) error {
	for {
		if s.head < s.tail {
			*m = s.out[s.head]
			s.head++
			s.stats.Normalized[m.Type]++
			return nil
		}
		s.head, s.tail = 0, 0
		if s.bcast && s.broadcast(m) {
			s.stats.Normalized[m.Type]++
			return nil
		}
		if s.err != nil {
			return s.err
		}
		// The look-ahead's common case, written out here rather than
		// in next, a call less: a Reader's next message is all
		// buffered, the ring holds lookAhead-1 messages, and the
		// oldest lookAhead-1-eventAhead have had their events touched.
		// It frames the message, puts it in the ring, touches it and
		// the event of the message eventAhead before its turn, and
		// takes the oldest.
		var b []byte
		var off int64
		var err error
		a := &s.ahead
		if rd := a.frames; rd != nil && a.size == lookAhead-1 && a.touched == lookAhead-1-eventAhead && a.on && a.err == nil && !a.bigHeld {
			if p, o, ok := rd.frame(); ok {
				// As next does for a stableReader: a message too long
				// for a slot stops the reading ahead until it is handled.
				in := &a.ring[(a.head+lookAhead-1)&(lookAhead-1)]
				in.p, in.off, in.big = p, *a.base+o, len(p) > aheadSlot
				a.bigHeld = in.big
				// The oldest untouched (as touch: a.bytes(a.touched)).
				// The count is back where it was once the oldest is
				// taken.
				e := a.ring[(a.head+a.touched)&(lookAhead-1)].p
				if traceTouch != nil {
					traceTouch(e, p)
				}
				touchEvent(s, unsafe.SliceData(e), len(e), unsafe.SliceData(p), len(p))
				out := &a.ring[a.head]
				a.head = (a.head + 1) & (lookAhead - 1)
				b, off = out.p, out.off // none is too long for a slot: !bigHeld
			} else {
				b, off, err = s.next()
			}
		} else {
			b, off, err = s.next()
		}
		switch err {
		case nil:
		case feed.ErrIdle:
			return err // a live input has nothing yet; not sticky
		case ErrLost:
			s.lost()
			continue
		default:
			s.err = err
			continue
		}
		// The first message handle makes goes straight to m; the rest
		// queue.
		s.direct = m
		if s.timed == nil { // next set it from the reader's
			s.recvNs = s.cfg.Clock() // here, not in handle: a call there would spill its registers
		}
		if err := s.handle(b, off); err != nil {
			s.err = err
		}
		if s.direct == nil {
			s.stats.Normalized[m.Type]++
			return nil
		}
		s.direct = nil
	}
}

// push returns the next free output message, its header filled in for
// instrument locate at the current ITCH message: the message Next is
// filling, for the first, then the queue.
func (s *Source) push(t feed.Type, locate uint16, ns int64, flags feed.Flags) *feed.Msg {
	m := s.direct
	if m != nil {
		s.direct = nil
	} else {
		m = &s.out[s.tail]
		s.tail++
	}
	// Field by field: a composite literal zeroes the header first.
	m.Type, m.Version, m.Flags, m.Instrument, m.InstSeq = t, feed.Version, flags, uint32(locate), 0
	m.ExchangeNs, m.RecvNs, m.SendNs = ns, s.recvNs, 0
	return m
}

// define publishes a definition of locate first if it has none: a
// provisional one from the symbol the message names.
func (s *Source) define(m Message) bool {
	locate := m.StockLocate()
	in := s.instrument(locate)
	if in.defined {
		return true
	}
	sym, ok := m.Stock()
	if !ok {
		return false
	}
	in.defined, in.provisional = true, true
	s.stats.Instruments++
	s.stats.Provisional++
	d := s.push(feed.TypeDefinition, locate, m.Timestamp(), feed.FlagProvisional)
	d.Def = feed.Definition{Symbol: sym, PriceScale: PriceScale}
	return true
}

// handle normalizes one framed ITCH message at input offset off.
// It is long for a reason: one switch case per ITCH message type, the
// specification's table in code order.
func (s *Source) handle(b []byte, off int64) error {
	s.stats.Messages++
	if len(b) == 0 {
		s.stats.Empty++
		return nil
	}
	t := Type(b[0])
	if n := Size(t); n == 0 {
		s.stats.SkippedTypes[t]++
		return nil
	} else if len(b) != n {
		return &FormatError{Type: t, Offset: off, Field: "length", Len: len(b), Want: n,
			Reason: "length does not match the type"}
	}
	s.stats.ByType[t]++
	_ = b[11] // every type is at least 12 bytes: no more bounds checks for the header's fields
	m := Message(b)
	if !s.first {
		s.first = true
		if s.cfg.Start == StartAuto && !(t == TypeSystemEvent && m.SystemEvent().EventCode() == 'O') {
			s.midDay = true
		}
	}
	s.snapped = false
	locate := m.StockLocate()
	ns := m.Timestamp()
	s.lastNs = ns
	switch t {
	case TypeSystemEvent:
		s.startBroadcast([4]byte{'S', 'Y', 'S', m.SystemEvent().EventCode()}, 0, ns)
	case TypeStockDirectory:
		r := m.StockDirectory()
		in := s.instrument(locate)
		if !in.defined {
			s.stats.Instruments++
		} else if in.provisional {
			s.stats.Provisional--
		}
		in.defined, in.provisional = true, false
		d := s.push(feed.TypeDefinition, locate, ns, 0)
		d.Def = feed.Definition{Symbol: r.Stock(), PriceScale: PriceScale,
			MarketCategory: r.MarketCategory(), RoundLot: r.RoundLotSize()}
	case TypeTradingAction:
		s.define(m)
		a := m.TradingAction()
		s.instrument(locate).state = a.TradingState()
		st := s.push(feed.TypeStatus, locate, ns, 0)
		st.Status = feed.Status{State: a.TradingState(), Reason: a.Reason()}
	case TypeRegSHO:
		s.define(m)
		st := s.push(feed.TypeStatus, locate, ns, 0)
		st.Status = feed.Status{State: s.instrument(locate).tradingState(), Reason: [4]byte{'S', 'H', 'O', m.RegSHO().Action()}}
	case TypeOperationalHalt:
		s.define(m)
		h := m.OperationalHalt()
		state := byte(feed.StateTrading)
		if h.Action() == 'H' {
			state = feed.StateHalted
		}
		st := s.push(feed.TypeStatus, locate, ns, 0)
		st.Status = feed.Status{State: state, Reason: [4]byte{'O', 'P', 'H', h.MarketCode()}}
	case TypeParticipantPosition, TypeIPOQuotingPeriod, TypeLULDAuctionCollar, TypeNOII, TypeRPII, TypeDLCR:
		// No normalized message of their own (yet), but they name the
		// stock: a subscriber learns of the instrument as early as the
		// feed does.
		s.define(m)
	case TypeMWCBDeclineLevel, TypeMWCBStatus:
		// Market-wide; Price(8) index levels are no instrument's prices.
	case TypeAddOrder, TypeAddOrderMPID:
		_ = b[35]                  // the length was checked: no bounds checks for the fields
		in := s.instrument(locate) // define does not move it
		if !in.defined {
			s.define(m)
		}
		a := m.AddOrder()
		if s.exhaustive {
			s.snapshot(locate, a.Side())
		}
		res, lv := s.books.add(locate, a.OrderRef(), a.Side(), a.Shares(), a.Price())
		s.count(t, res)
		if lv != nil && !s.exhaustive {
			s.sideChanged(in, lv, locate, a.Side(), ns)
			break
		}
		s.changed(locate, a.Side(), ns, false)
	case TypeOrderExecuted, TypeOrderExecutedPrice:
		e := m.OrderExecuted()
		if s.exhaustive {
			s.snapshotOrder(locate, e.OrderRef())
		}
		o, res := s.books.Execute(locate, e.OrderRef(), e.Shares())
		if !s.count(t, res) {
			break
		}
		px := o.Price
		if printable, p, ok := e.WithPrice(); ok {
			if printable != 'Y' {
				s.stats.NotPrintable++
				s.changed(locate, o.Side, ns, false)
				break
			}
			px = p
		}
		tr := s.push(feed.TypeTrade, locate, ns, 0)
		tr.Trade = feed.Trade{Px: int64(px), Size: uint64(e.Shares()), MatchID: e.MatchNumber(), Aggressor: opposite(o.Side)}
		s.changed(locate, o.Side, ns, false)
	case TypeOrderCancel:
		c := m.OrderCancel()
		if s.exhaustive {
			s.snapshotOrder(locate, c.OrderRef())
		}
		o, res := s.books.Cancel(locate, c.OrderRef(), c.Shares())
		if s.count(t, res) {
			s.changed(locate, o.Side, ns, false)
		}
	case TypeOrderDelete:
		_ = b[18]
		if s.exhaustive {
			s.snapshotOrder(locate, m.OrderDelete().OrderRef())
		}
		side, _, res, lv := s.books.delete(locate, m.OrderDelete().OrderRef())
		if !s.count(t, res) {
			break
		}
		if !s.exhaustive {
			s.sideChanged(s.instrument(locate), lv, locate, side, ns)
			break
		}
		s.changed(locate, side, ns, false)
	case TypeOrderReplace:
		_ = b[34]
		u := m.OrderReplace()
		if s.cfg.Depth > 0 && !s.exhaustive {
			s.replace(t, locate, ns, u)
			break
		}
		s.snapshotOrder(locate, u.OriginalRef())
		o, res := s.books.Replace(locate, u.OriginalRef(), u.NewRef(), u.Shares(), u.Price())
		if res != Unknown && res != WrongStock {
			// The original left the book even if the new order was refused.
			s.changed(locate, o.Side, ns, true)
		}
		s.count(t, res)
	case TypeTrade:
		s.define(m)
		p := m.Trade()
		tr := s.push(feed.TypeTrade, locate, ns, 0)
		tr.Trade = feed.Trade{Px: int64(p.Price()), Size: uint64(p.Shares()), MatchID: p.MatchNumber(), Aggressor: opposite(p.Side())}
	case TypeCrossTrade:
		s.define(m)
		q := m.CrossTrade()
		if q.Shares() == 0 {
			s.stats.EmptyCross++
			break
		}
		tr := s.push(feed.TypeTrade, locate, ns, feed.FlagCross)
		tr.Trade = feed.Trade{Px: int64(q.Price()), Size: q.Shares(), MatchID: q.MatchNumber()}
	case TypeBrokenTrade:
		if !s.instrument(locate).defined {
			s.stats.Undefined++
			break
		}
		bt := s.push(feed.TypeTradeBust, locate, ns, 0)
		bt.Bust.MatchID = m.BrokenTrade().MatchNumber()
	}
	return nil
}

// count records the result of a book operation for an ITCH message of type
// t and reports whether the order was known.
func (s *Source) count(t Type, res Result) bool {
	switch res {
	case OK:
	case Unknown:
		s.stats.UnknownOrder[t]++
		// An order added before the input began: the books cannot be
		// complete, whatever the start said.
		s.midDay = true
		return false
	case WrongStock:
		s.stats.WrongStock++
		return false
	case Duplicate:
		s.stats.Duplicate++
	case Full:
		s.stats.TableFull++
	case Excess:
		s.stats.Excess++
	case BadSide:
		s.stats.BadSide++
	}
	return true
}

// changed publishes what an order event on side ('B' or 'S') of stock
// locate changed: the level deltas of that side's top Config.Depth levels,
// then the quote. An order event changes one side only (a replace keeps
// its side). replace says the event was a replace, which touches two
// levels: Books.last tells only of the second.
func (s *Source) changed(locate uint16, side byte, ns int64, replace bool) {
	if s.cfg.Depth > 0 {
		if s.snapped {
			s.merge(locate, side, ns, s.snap[:s.snapN])
		} else if !replace {
			s.depth(locate, side, ns)
		}
	}
	s.quote(locate, side, ns, replace || s.exhaustive)
	s.snapped = false
}

// maxDeltas is the most level deltas one ITCH message makes. It touches
// at most two price levels of one side (a replace: its original's and its
// new order's), and each touched level makes at most two deltas: itself
// (new, changed or deleted) and the level it pushes out of the top or
// pulls into it.
const maxDeltas = 4

// bookSide returns side ('B' or 'S') of stock locate's book, best last, and
// whether it is a bid side; nil for a side that never held an order.
func (s *Source) bookSide(locate uint16, side byte) ([]Level, bool) {
	if int(locate) >= len(s.books.books) {
		return nil, side == 'B'
	}
	p, bid := s.books.books[locate].side(side)
	return *p, bid
}

// snapshot copies the top Config.Depth levels of side of stock locate
// into snap, best first, for merge.
func (s *Source) snapshot(locate uint16, side byte) {
	if s.cfg.Depth == 0 || !validSide(side) {
		return
	}
	lv, _ := s.bookSide(locate, side)
	n := min(len(lv), s.cfg.Depth)
	for j := range n {
		s.snap[j] = lv[len(lv)-1-j]
	}
	s.snapN, s.snapped = n, true
}

// snapshotOrder takes the snapshot of the side of live order ref, if it
// belongs to stock locate (otherwise the event changes nothing).
func (s *Source) snapshotOrder(locate uint16, ref uint64) {
	if s.cfg.Depth == 0 {
		return
	}
	if o, ok := s.books.Order(ref); ok && o.Locate == locate {
		s.snapshot(locate, o.Side)
	}
}

// depth publishes the level deltas of side's top Config.Depth levels of
// stock locate that the last book operation (Books.last), which touched
// one level, made (eventDeltas). These are exactly the deltas merge would
// find between the top before and after (TestDepthPerEventMatchesMerge),
// at O(1) instead of O(Depth), and with no copy of the top kept per stock.
func (s *Source) depth(locate uint16, side byte, ns int64) {
	if ev := s.books.last; ev.kind == levelSame || ev.pos >= s.cfg.Depth || !validSide(side) {
		return
	}
	if !s.instrument(locate).defined {
		return // as in quote: no order event reaches a book before its add defined it
	}
	lv, _ := s.bookSide(locate, side)
	s.pushDeltas(lv, locate, side, ns)
}

// pushDeltas queues the level deltas of side's top Config.Depth levels,
// whose levels are now lv, that the last book operation (Books.last), which
// touched one level, made: the deltas eventDeltas finds, written straight
// into the queue.
func (s *Source) pushDeltas(lv []Level, locate uint16, side byte, ns int64) {
	ev := s.books.last
	d := s.cfg.Depth
	if ev.kind == levelSame || ev.pos >= d {
		return
	}
	flags := s.bookFlags()
	n := len(lv)
	// The first delta is written here (the common case, a changed level,
	// makes only it); a second, through delta.
	var action byte
	var l *Level
	switch ev.kind {
	case levelChanged:
		action, l = feed.ActionChange, &lv[n-1-ev.pos]
	case levelNew:
		action, l = feed.ActionNew, &lv[n-1-ev.pos]
	default: // levelGone
		action, l = feed.ActionDelete, &Level{Price: ev.price}
	}
	m := s.push(feed.TypeLevelDelta, locate, ns, flags)
	m.Delta.Side, m.Delta.Action, m.Delta.Orders, m.Delta.Px, m.Delta.Size = feed.Side(side), action, l.Orders, int64(l.Price), l.Shares
	switch {
	case ev.kind == levelNew && n > d:
		s.delta(locate, ns, flags, side, feed.ActionDelete, &Level{Price: lv[n-1-d].Price})
	case ev.kind == levelGone && n >= d:
		s.delta(locate, ns, flags, side, feed.ActionNew, &lv[n-d])
	}
}

// sideChanged is changed for an order event other than a replace that
// changed side, whose levels after it are lv, of stock locate, whose state
// is in: what depth and quote do, without looking either up again (but
// for an instrument's first quote, which goes through changed).
func (s *Source) sideChanged(in *instrument, lv []Level, locate uint16, side byte, ns int64) {
	if !in.quoted {
		s.changed(locate, side, ns, false) // the first quote
		return
	}
	// A quoted instrument is defined.
	ev := s.books.last
	if ev.kind == levelSame {
		return
	}
	if ev.kind == levelChanged && ev.pos < s.cfg.Depth {
		// The most common delta, written here.
		l := &lv[len(lv)-1-ev.pos]
		m := s.push(feed.TypeLevelDelta, locate, ns, s.bookFlags())
		m.Delta.Side, m.Delta.Action, m.Delta.Orders, m.Delta.Px, m.Delta.Size = feed.Side(side), feed.ActionChange, l.Orders, int64(l.Price), l.Shares
	} else {
		s.pushDeltas(lv, locate, side, ns)
	}
	if ev.pos == 0 {
		s.quoteSide(in, lv, locate, side, ns)
	}
}

// pendingDelta is a level delta not queued yet.
type pendingDelta struct {
	action byte
	l      Level
}

// eventDeltas puts into dst the level deltas of the top Config.Depth
// levels of the side the last book operation (Books.last) touched, whose
// levels after it are lv, and returns how many: nothing below the top; a
// changed level; a new level, and the level it pushed out of the top; a
// removed level, and the level it pulled into the top.
func (s *Source) eventDeltas(dst *[2]pendingDelta, lv []Level) int {
	ev := s.books.last
	d := s.cfg.Depth
	if ev.kind == levelSame || ev.pos >= d {
		return 0
	}
	at := func(pos int) Level { return lv[len(lv)-1-pos] }
	switch ev.kind {
	case levelChanged:
		dst[0] = pendingDelta{feed.ActionChange, at(ev.pos)}
		return 1
	case levelNew:
		dst[0] = pendingDelta{feed.ActionNew, at(ev.pos)}
		if len(lv) > d {
			dst[1] = pendingDelta{feed.ActionDelete, Level{Price: at(d).Price}}
			return 2
		}
		return 1
	case levelGone:
		dst[0] = pendingDelta{feed.ActionDelete, Level{Price: ev.price}}
		if len(lv) >= d {
			dst[1] = pendingDelta{feed.ActionNew, at(d - 1)}
			return 2
		}
		return 1
	}
	return 0
}

// bookFlags returns the flags every level delta and quote carries:
// feed.FlagBookIncomplete while the books are incomplete.
func (s *Source) bookFlags() feed.Flags {
	if s.midDay {
		return feed.FlagBookIncomplete
	}
	return 0
}

// replace handles an order replace with depth: its delete and its add each
// touch one level, and their deltas, taken as each happens, are netted per
// price and queued best first, as merge would find them between the top
// before and after, without a copy of the top (TestDepthPerEventMatchesMerge).
func (s *Source) replace(t Type, locate uint16, ns int64, u OrderReplace) {
	side, shares, res, lv := s.books.delete(locate, u.OriginalRef())
	if res != OK {
		s.count(t, res) // unknown or of another stock: nothing changed
		return
	}
	in := s.instrument(locate)
	var del, add [2]pendingDelta
	nd, na := 0, 0
	if in.defined {
		nd = s.eventDeltas(&del, lv)
	}
	res, alv := s.books.add(locate, u.NewRef(), side, u.Shares(), u.Price())
	if alv != nil { // nil if the new order was refused: lv is the side
		lv = alv
		if in.defined {
			na = s.eventDeltas(&add, lv)
		}
	}
	flags := s.bookFlags()
	switch {
	case nd == 0 || na == 0:
		// Nothing to net, and each list is best first already: a
		// level, then the one it pushed out of the top or pulled in.
		for _, d := range del[:nd] {
			s.delta(locate, ns, flags, side, d.action, &d.l)
		}
		for _, d := range add[:na] {
			s.delta(locate, ns, flags, side, d.action, &d.l)
		}
	case nd == 1 && na == 1 && del[0].l.Price != add[0].l.Price:
		// Two levels, neither pushing or pulling another: best first.
		first, second := &del[0], &add[0]
		if better(second.l.Price, first.l.Price, side == 'B') {
			first, second = second, first
		}
		s.delta(locate, ns, flags, side, first.action, &first.l)
		s.delta(locate, ns, flags, side, second.action, &second.l)
	default:
		net, n := netDeltas(del[:nd], add[:na], side, shares, u.Shares())
		for _, d := range net[:n] {
			s.delta(locate, ns, flags, side, d.action, &d.l)
		}
	}
	if in.quoted {
		// A replace keeps its side: the last quote holds the other.
		s.quoteSide(in, lv, locate, side, ns)
	} else {
		s.quote(locate, side, ns, true)
	}
	s.count(t, res)
}

// netDeltas nets the level deltas of a replace's delete, del, and of its
// add, add, both on side, the original order having had oldShares and the
// new one having shares: per price, and then best first.
func netDeltas(del, add []pendingDelta, side byte, oldShares, shares uint32) ([4]pendingDelta, int) {
	var net [4]pendingDelta
	n := 0
	var matched [2]bool
	for _, a := range del {
		j := -1
		for k := range add {
			if add[k].l.Price == a.l.Price {
				j = k
			}
		}
		if j < 0 {
			net[n] = a
			n++
			continue
		}
		matched[j] = true
		b := add[j]
		switch {
		case a.action == feed.ActionNew && b.action == feed.ActionDelete:
			// Pulled into the top and pushed out again: in neither.
		case a.action == feed.ActionDelete && b.action == feed.ActionNew:
			// The original was the level's only order, and the new order
			// made the level again: changed unless it is the same.
			if b.l != (Level{Price: b.l.Price, Orders: 1, Shares: uint64(oldShares)}) {
				net[n] = pendingDelta{feed.ActionChange, b.l}
				n++
			}
		case a.action == feed.ActionChange && b.action == feed.ActionChange:
			// The new order took the original's place in the level.
			if shares != oldShares {
				net[n] = b
				n++
			}
		case a.action == feed.ActionNew:
			// Pulled into the top, then changed: new as it is now.
			net[n] = pendingDelta{feed.ActionNew, b.l}
			n++
		default:
			// Changed, then pushed out of the top.
			net[n] = b
			n++
		}
	}
	for k, b := range add {
		if !matched[k] {
			net[n] = b
			n++
		}
	}
	// Best first, as merge walks the two tops (at most four, all prices
	// distinct).
	bid := side == 'B'
	for i := 1; i < n; i++ {
		for j := i; j > 0 && better(net[j].l.Price, net[j-1].l.Price, bid); j-- {
			net[j], net[j-1] = net[j-1], net[j]
		}
	}
	return net, n
}

// merge publishes a level delta for each of side's top Config.Depth levels
// of stock locate that differs from pub, the same top before the event
// (best first): a merge of the two lists. A price in pub only is deleted
// (its level is gone, or was pushed below the top); a price in the book's
// top only is new (a new level, or one pulled up into the top); a price in
// both whose orders or shares differ is changed. It costs O(Depth).
func (s *Source) merge(locate uint16, side byte, ns int64, pub []Level) {
	if !s.instrument(locate).defined {
		return
	}
	lv, bid := s.bookSide(locate, side)
	n := min(len(lv), s.cfg.Depth)
	flags := s.bookFlags()
	i, j := 0, 0
	for i < len(pub) || j < n {
		var cur Level
		if j < n {
			cur = lv[len(lv)-1-j]
		}
		switch {
		case j == n || (i < len(pub) && better(pub[i].Price, cur.Price, bid)):
			s.delta(locate, ns, flags, side, feed.ActionDelete, &Level{Price: pub[i].Price})
			i++
		case i == len(pub) || better(cur.Price, pub[i].Price, bid):
			s.delta(locate, ns, flags, side, feed.ActionNew, &cur)
			j++
		default: // the same price
			if cur != pub[i] {
				s.delta(locate, ns, flags, side, feed.ActionChange, &cur)
			}
			i++
			j++
		}
	}
}

// better reports whether price p ranks before price q on a side: higher
// for bids, lower for asks.
func better(p, q uint32, bid bool) bool { return p != q && (p > q) == bid }

// delta queues one level delta.
func (s *Source) delta(locate uint16, ns int64, flags feed.Flags, side byte, action byte, l *Level) {
	d := s.push(feed.TypeLevelDelta, locate, ns, flags)
	d.Delta.Side, d.Delta.Action, d.Delta.Orders, d.Delta.Px, d.Delta.Size = feed.Side(side), action, l.Orders, int64(l.Price), l.Shares
}

// quote publishes stock locate's best bid and ask if either price or size
// changed since its last quote, after an order event on side. Unless full,
// it trusts Books.last: a book operation that changed no level, or none at
// the top, changed no quote. Once a quote was published, only side's best
// level is read: an order event changes one side, and the last quote holds
// the other (reading it would be one more cache miss for an add, whose
// other side the look-ahead does not prefetch).
func (s *Source) quote(locate uint16, side byte, ns int64, full bool) {
	in := s.instrument(locate)
	if in.quoted && !full && !s.exhaustive && validSide(side) {
		if ev := s.books.last; ev.kind == levelSame || ev.pos > 0 {
			return
		}
		lv, _ := s.bookSide(locate, side)
		s.quoteSide(in, lv, locate, side, ns)
		return
	}
	top := s.books.Top(locate)
	if in.quoted && top == in.last {
		return
	}
	if !in.defined {
		// Only an order event can change a book, and only an add puts an
		// order in one, after defining the instrument.
		return
	}
	in.quoted, in.last = true, top
	s.pushQuote(locate, ns, &in.last)
}

// quoteSide is quote once a quote was published, after an event that
// changed the best level of side, whose levels are now lv: it compares that
// side's best level with the last quote's.
func (s *Source) quoteSide(in *instrument, lv []Level, locate uint16, side byte, ns int64) {
	var best Level
	n := len(lv)
	if n > 0 {
		best = lv[n-1]
	}
	t := &in.last
	has, price, size := t.sideOf(sideIndex(side))
	if *has == (n > 0) && *price == best.Price && *size == best.Shares {
		return
	}
	*has, *price, *size = n > 0, best.Price, best.Shares
	s.pushQuote(locate, ns, t)
}

// pushQuote queues a quote of top.
func (s *Source) pushQuote(locate uint16, ns int64, top *Top) {
	flags := s.bookFlags()
	if top.HasBid {
		flags |= feed.FlagBidPresent
	}
	if top.HasAsk {
		flags |= feed.FlagAskPresent
	}
	q := s.push(feed.TypeQuote, locate, ns, flags)
	q.Quote.BidPx, q.Quote.BidSize, q.Quote.AskPx, q.Quote.AskSize = int64(top.BidPrice), top.BidSize, int64(top.AskPrice), top.AskSize
}

// startBroadcast makes Next emit a status with reason and flags for every
// instrument defined so far, one per call, before it reads on.
func (s *Source) startBroadcast(reason [4]byte, flags feed.Flags, ns int64) {
	s.bcast, s.bcastNext, s.bcastReason, s.bcastFlags, s.bcastNs = true, 0, reason, flags, ns
}

// ErrLost is what a MessageReader's Next returns, unwrapped, when input
// messages were lost for good before the next one it yields (an upstream
// gap that could not be recovered). The Source then reads on: it reports
// every instrument defined so far with a status flagged
// feed.FlagBookIncomplete and reason LossReason, and treats its books as
// incomplete from then on (MidDay), so that every later quote is flagged
// too. The messages lost may have touched any instrument.
var ErrLost = errors.New("itch: input messages lost")

// LossReason is the reason code of the statuses a loss of input
// (ErrLost) broadcasts.
var LossReason = [4]byte{'L', 'O', 'S', 'T'}

// lost takes a loss of input (ErrLost): every instrument is reported
// book-incomplete, and the books are incomplete from now on.
func (s *Source) lost() {
	s.midDay = true
	s.recvNs = s.cfg.Clock()
	s.startBroadcast(LossReason, feed.FlagBookIncomplete, s.lastNs)
}

// broadcast emits the pending broadcast's status for the next defined
// instrument, and reports whether there was one.
func (s *Source) broadcast(m *feed.Msg) bool {
	for ; s.bcastNext < len(s.inst); s.bcastNext++ {
		in := &s.inst[s.bcastNext]
		if !in.defined {
			continue
		}
		m.Header = feed.Header{Type: feed.TypeStatus, Version: feed.Version, Flags: s.bcastFlags,
			Instrument: uint32(s.bcastNext), ExchangeNs: s.bcastNs, RecvNs: s.recvNs}
		m.Status = feed.Status{State: in.tradingState(), Reason: s.bcastReason}
		s.bcastNext++
		return true
	}
	s.bcast = false
	return false
}

func opposite(side byte) feed.Side {
	switch side {
	case 'B':
		return feed.SideSell
	case 'S':
		return feed.SideBuy
	}
	return feed.SideUnknown
}
