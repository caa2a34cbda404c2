// Package itchgen generates a deterministic synthetic TotalView-ITCH 5.0
// day: thousands of stocks, a realistic mix of order events and a live
// order population held near a target, in NASDAQ's file format.
//
// The same Config (seed included) gives the same bytes. Every message is a
// valid ITCH 5.0 message and every order event names a live order of its
// stock, so feed/itch reads the whole output without an unknown reference,
// a duplicate, an excess execution or a wrong stock.
//
// # The day
//
// The output opens with system event 'O' (start of messages), a stock
// directory 'R' and a trading action 'H' (trading) for every stock, then
// system events 'S' (start of system hours) and 'Q' (start of market
// hours). Order events follow, and the day closes with system events 'M',
// 'E' and 'C'. Timestamps rise from 04:00 to 20:00 over the day's
// messages; stock locates are 1..Stocks.
//
// # Order events
//
// Each event picks a stock, skewed as real activity is (the busiest 1% of
// the stocks take about a fifth of the events), then an event type by
// weight: adds (A, with 1 in 45 an F), deletes (D), replaces (U),
// executions (E, and C with its own price, some non-printable), cancels
// (X, mostly partial) and non-displayed trades (P). The add weight follows
// the live order count: it rises below Config.Orders and falls above it,
// so the count climbs to the target from an empty book and then moves
// around it, a percent or two either way. An event that needs a live order
// on a stock that has none becomes an add.
//
// Prices cluster near each stock's mid (fixed for the day, log-uniform
// from $2 to $500): an order rests a geometric number of cents behind the
// mid on its side (most within a few cents, 1 in 20 up to $2 away), so the
// books never cross. Executions
// take the best-priced order of eight drawn from the stock, so they
// happen at the top of the book; deletes and cancels favour the most
// recently added orders, as most orders in a real feed leave soon after
// they arrive.
package itchgen

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"

	"github.com/tickcast/tickcast/config"
)

// Defaults of Config's fields.
const (
	// DefaultStocks is Config.Stocks' default.
	DefaultStocks = 8000
	// DefaultOrders is Config.Orders' default.
	DefaultOrders = 1_000_000
	// DefaultMessages is Config.Messages' default.
	DefaultMessages = 10_000_000
)

// MaxStocks is the most stocks: a stock locate is a uint16 and 0 is
// market-wide.
const MaxStocks = math.MaxUint16

// Config configures a Generator.
type Config struct {
	// Seed selects the day: the same Config gives the same bytes.
	Seed uint64
	// Stocks is the number of stocks, 1..MaxStocks (0: DefaultStocks).
	Stocks int
	// Orders is the live order count the day holds once it has built up
	// (0: DefaultOrders). A target below a few per stock is not held: an
	// event on a stock without orders is an add.
	Orders int
	// Messages is the number of messages in the day, the opening and
	// closing ones included (0: DefaultMessages); at least
	// OpeningMessages(Stocks) + 3.
	Messages uint64
}

var configCheck = config.Checker{Pkg: "itchgen", Struct: "Config"}

func (c Config) withDefaults() Config {
	config.Default(&c.Stocks, DefaultStocks)
	config.Default(&c.Orders, DefaultOrders)
	config.Default(&c.Messages, DefaultMessages)
	return c
}

func (c Config) validate() error {
	switch {
	case c.Stocks < 1 || c.Stocks > MaxStocks:
		return configCheck.Invalid("Stocks", c.Stocks, "want 1..%d", MaxStocks)
	case c.Orders < 1:
		return configCheck.Invalid("Orders", c.Orders, "must not be negative")
	case c.Messages < OpeningMessages(c.Stocks)+closingMessages:
		return configCheck.Invalid("Messages", c.Messages, "want at least %d for %d stocks (the opening and closing messages)",
			OpeningMessages(c.Stocks)+closingMessages, c.Stocks)
	}
	return nil
}

// OpeningMessages returns the number of messages before the first order
// event of a day of stocks stocks: 'O', an 'R' and an 'H' per stock, 'S'
// and 'Q'.
func OpeningMessages(stocks int) uint64 { return 2*uint64(stocks) + 3 }

// closingMessages is the number of system events that close the day.
const closingMessages = 3

// Times of the day, ns since midnight.
const (
	dayStart = 4 * 3600 * 1e9
	dayEnd   = 20 * 3600 * 1e9
)

// tick is one cent in Price(4).
const tick = 100

// Event weights, per 1000 order events, at the target live count.
const (
	wAdd     = 450 // of which 1 in 45 is an F
	wDelete  = 405
	wReplace = 90
	wExecute = 27 // of which 1 in 10 is a C
	wCancel  = 15
	wTrade   = 13
	wTotal   = wAdd + wDelete + wReplace + wExecute + wCancel + wTrade
)

// order is a live order as the generator knows it.
type order struct {
	ref    uint64
	price  uint32
	shares uint32
	side   byte
}

// stock is one stock's state.
type stock struct {
	symbol [8]byte
	mid    uint32 // Price(4), a whole number of ticks
	orders []order
}

// Generator generates one day. It is not safe for concurrent use.
type Generator struct {
	cfg    Config
	rng    *rand.Rand
	stocks []stock
	n      uint64 // messages generated
	live   int
	high   int
	ref    uint64 // last order reference used
	match  uint64 // last match number used
	ns     int64  // timestamp of the last message
	step   float64
	buf    [64]byte
}

// New returns a Generator of the day cfg describes, or a *config.Error.
func New(cfg Config) (*Generator, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x17c4)),
		stocks: make([]stock, cfg.Stocks),
		ns:     dayStart,
		step:   float64(dayEnd-dayStart) / float64(cfg.Messages),
	}
	for i := range g.stocks {
		s := &g.stocks[i]
		s.symbol = symbol(i)
		// Log-uniform from $2 to $500.
		dollars := math.Exp(math.Log(2) + g.rng.Float64()*math.Log(250))
		s.mid = uint32(dollars*100) * tick
	}
	return g, nil
}

// symbol returns the i-th symbol: A..Z, AA..ZZ, AAA.., padded with spaces.
func symbol(i int) [8]byte {
	s := [8]byte{' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}
	var b []byte
	for i++; i > 0; i = (i - 1) / 26 {
		b = append(b, byte('A'+(i-1)%26))
	}
	for j := range b {
		s[j] = b[len(b)-1-j]
	}
	return s
}

// Config returns the configuration with its defaults set.
func (g *Generator) Config() Config { return g.cfg }

// Generated returns the number of messages generated so far.
func (g *Generator) Generated() uint64 { return g.n }

// Live returns the number of live orders after the messages so far.
func (g *Generator) Live() int { return g.live }

// HighWater returns the most live orders there have been at once.
func (g *Generator) HighWater() int { return g.high }

// Next returns the next message, without its length prefix, or nil after
// the day's last message. The message is valid until the next call.
func (g *Generator) Next() []byte {
	n, stocks := g.n, uint64(len(g.stocks))
	if n >= g.cfg.Messages {
		return nil
	}
	g.n++
	g.ns = dayStart + int64(float64(n)*g.step)
	switch last := g.cfg.Messages - closingMessages; {
	case n == 0:
		return g.system('O')
	case n <= stocks:
		return g.directory(uint16(n))
	case n <= 2*stocks:
		return g.tradingAction(uint16(n - stocks))
	case n == 2*stocks+1:
		return g.system('S')
	case n == 2*stocks+2:
		return g.system('Q')
	case n == last:
		return g.system('M')
	case n == last+1:
		return g.system('E')
	case n == last+2:
		return g.system('C')
	}
	return g.event()
}

// AppendFile appends up to n messages in NASDAQ's file format (big-endian
// uint16 length, message) to dst and returns it, with the number of
// messages appended (fewer than n at the end of the day).
func (g *Generator) AppendFile(dst []byte, n int) ([]byte, int) {
	for i := range n {
		m := g.Next()
		if m == nil {
			return dst, i
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(m)))
		dst = append(dst, m...)
	}
	return dst, n
}

// WriteTo writes the rest of the day to w in NASDAQ's file format. It
// implements io.WriterTo.
func (g *Generator) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var total int64
	var frame [2]byte
	for m := g.Next(); m != nil; m = g.Next() {
		binary.BigEndian.PutUint16(frame[:], uint16(len(m)))
		if _, err := bw.Write(frame[:]); err != nil {
			return total, err
		}
		if _, err := bw.Write(m); err != nil {
			return total, err
		}
		total += int64(2 + len(m))
	}
	return total, bw.Flush()
}

// WriteGzip writes the rest of the day to w gzip-compressed, as NASDAQ
// distributes its files.
func (g *Generator) WriteGzip(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if _, err := g.WriteTo(zw); err != nil {
		return err
	}
	return zw.Close()
}

// header writes the common header of a message of type t and size bytes
// and returns the message's buffer.
func (g *Generator) header(t byte, size int, locate uint16) []byte {
	b := g.buf[:size]
	clear(b)
	b[0] = t
	binary.BigEndian.PutUint16(b[1:], locate)
	binary.BigEndian.PutUint16(b[3:], uint16(g.n))
	ns := uint64(g.ns)
	b[5], b[6], b[7], b[8], b[9], b[10] = byte(ns>>40), byte(ns>>32), byte(ns>>24), byte(ns>>16), byte(ns>>8), byte(ns)
	return b
}

func (g *Generator) system(code byte) []byte {
	b := g.header('S', 12, 0)
	b[11] = code
	return b
}

func (g *Generator) directory(locate uint16) []byte {
	b := g.header('R', 39, locate)
	copy(b[11:19], g.stocks[locate-1].symbol[:])
	b[19] = "QGS"[locate%3] // market category
	b[20] = 'N'             // financial status: normal
	binary.BigEndian.PutUint32(b[21:], 100)
	b[25] = 'N'                                     // round lots only
	b[26] = 'C'                                     // issue classification: common stock
	b[27], b[28] = 'Z', ' '                         // issue sub-type
	b[29] = 'P'                                     // authenticity: production
	b[30], b[31], b[32], b[33] = 'N', 'N', '1', 'N' // short sale threshold, IPO, LULD tier, ETP
	b[38] = 'N'
	return b
}

func (g *Generator) tradingAction(locate uint16) []byte {
	b := g.header('H', 25, locate)
	copy(b[11:19], g.stocks[locate-1].symbol[:])
	b[19] = 'T'
	copy(b[21:25], "    ")
	return b
}

// pickStock returns a stock index, skewed: index i is drawn with density
// falling as u³, so low indices are the busy stocks.
func (g *Generator) pickStock() int {
	u := g.rng.Float64()
	return min(int(float64(len(g.stocks))*u*u*u), len(g.stocks)-1)
}

// event generates one order event.
func (g *Generator) event() []byte {
	si := g.pickStock()
	s := &g.stocks[si]
	locate := uint16(si + 1)
	// The add weight: wAdd at the target, up to 3 times that below it,
	// down to a tenth above it.
	dev := float64(g.cfg.Orders-g.live) / float64(g.cfg.Orders)
	add := int(float64(wAdd) * max(0.1, min(3, 1+8*dev)))
	r := g.rng.IntN(add + wTotal - wAdd)
	if r < add || len(s.orders) == 0 {
		return g.add(s, locate)
	}
	r -= add
	switch {
	case r < wDelete:
		return g.delete(s, locate)
	case r < wDelete+wReplace:
		return g.replace(s, locate)
	case r < wDelete+wReplace+wExecute:
		return g.execute(s, locate)
	case r < wDelete+wReplace+wExecute+wCancel:
		return g.cancel(s, locate)
	}
	return g.trade(s, locate)
}

// offset returns a number of ticks behind the mid: geometric with mean
// about 3, and 1 in 20 orders anywhere within 200 ticks.
func (g *Generator) offset() uint32 {
	if g.rng.IntN(20) == 0 {
		return uint32(g.rng.IntN(200))
	}
	return uint32(g.rng.ExpFloat64() * 3)
}

// price returns a price on side for s, the offset number of ticks behind
// its mid, at least one tick.
func price(s *stock, side byte, off uint32) uint32 {
	if side == 'B' {
		if s.mid <= (off+1)*tick {
			return tick
		}
		return s.mid - (off+1)*tick
	}
	return s.mid + off*tick
}

// shares returns an order size: mostly round lots, some odd lots.
func (g *Generator) shares() uint32 {
	if g.rng.IntN(10) == 0 {
		return uint32(1 + g.rng.IntN(99))
	}
	return 100 * uint32(1+int(g.rng.ExpFloat64()*2))
}

func (g *Generator) side() byte {
	if g.rng.IntN(2) == 0 {
		return 'B'
	}
	return 'S'
}

// recent returns the index of a live order of s, favouring the ones added
// last (they are at the end of the list, but for swaps by removals).
func (g *Generator) recent(s *stock) int {
	u := g.rng.Float64()
	return len(s.orders) - 1 - int(float64(len(s.orders))*u*u*u)
}

// removeOrder removes s's order i.
func (g *Generator) removeOrder(s *stock, i int) {
	last := len(s.orders) - 1
	s.orders[i] = s.orders[last]
	s.orders = s.orders[:last]
	g.live--
}

func (g *Generator) add(s *stock, locate uint16) []byte {
	g.ref++
	o := order{ref: g.ref, side: g.side(), shares: g.shares()}
	o.price = price(s, o.side, g.offset())
	s.orders = append(s.orders, o)
	g.live++
	g.high = max(g.high, g.live)
	t, size := byte('A'), 36
	if g.rng.IntN(45) == 0 {
		t, size = 'F', 40
	}
	b := g.header(t, size, locate)
	binary.BigEndian.PutUint64(b[11:], o.ref)
	b[19] = o.side
	binary.BigEndian.PutUint32(b[20:], o.shares)
	copy(b[24:32], s.symbol[:])
	binary.BigEndian.PutUint32(b[32:], o.price)
	if t == 'F' {
		copy(b[36:40], "MPID")
	}
	return b
}

func (g *Generator) delete(s *stock, locate uint16) []byte {
	i := g.recent(s)
	b := g.header('D', 19, locate)
	binary.BigEndian.PutUint64(b[11:], s.orders[i].ref)
	g.removeOrder(s, i)
	return b
}

func (g *Generator) replace(s *stock, locate uint16) []byte {
	i := g.recent(s)
	o := &s.orders[i]
	b := g.header('U', 35, locate)
	binary.BigEndian.PutUint64(b[11:], o.ref)
	g.ref++
	o.ref = g.ref
	o.shares = g.shares()
	o.price = price(s, o.side, g.offset())
	binary.BigEndian.PutUint64(b[19:], o.ref)
	binary.BigEndian.PutUint32(b[27:], o.shares)
	binary.BigEndian.PutUint32(b[31:], o.price)
	return b
}

// top returns the index of the best-priced order of eight drawn from s:
// the highest bid or the lowest ask, whichever lies less far behind the
// mid.
func (g *Generator) top(s *stock) int {
	best, behind := 0, int64(math.MaxInt64)
	for range 8 {
		i := g.rng.IntN(len(s.orders))
		o := &s.orders[i]
		d := int64(o.price) - int64(s.mid) // an ask's distance behind the mid
		if o.side == 'B' {
			d = int64(s.mid) - tick - int64(o.price)
		}
		if d < behind {
			best, behind = i, d
		}
	}
	return best
}

// take returns the shares an execution or cancel takes from o: all of
// them with probability 1 in every, else part.
func (g *Generator) take(o *order, every int) uint32 {
	if o.shares == 1 || g.rng.IntN(every) == 0 {
		return o.shares
	}
	return uint32(1 + g.rng.IntN(int(o.shares-1)))
}

func (g *Generator) execute(s *stock, locate uint16) []byte {
	i := g.top(s)
	o := &s.orders[i]
	n := g.take(o, 2)
	g.match++
	var b []byte
	if g.rng.IntN(10) == 0 {
		b = g.header('C', 36, locate)
		b[31] = 'Y'
		if g.rng.IntN(5) == 0 {
			b[31] = 'N'
		}
		binary.BigEndian.PutUint32(b[32:], o.price)
	} else {
		b = g.header('E', 31, locate)
	}
	binary.BigEndian.PutUint64(b[11:], o.ref)
	binary.BigEndian.PutUint32(b[19:], n)
	binary.BigEndian.PutUint64(b[23:], g.match)
	if o.shares -= n; o.shares == 0 {
		g.removeOrder(s, i)
	}
	return b
}

func (g *Generator) cancel(s *stock, locate uint16) []byte {
	i := g.recent(s)
	o := &s.orders[i]
	n := g.take(o, 10)
	b := g.header('X', 23, locate)
	binary.BigEndian.PutUint64(b[11:], o.ref)
	binary.BigEndian.PutUint32(b[19:], n)
	if o.shares -= n; o.shares == 0 {
		g.removeOrder(s, i)
	}
	return b
}

func (g *Generator) trade(s *stock, locate uint16) []byte {
	side := g.side()
	g.match++
	b := g.header('P', 44, locate)
	b[19] = side
	binary.BigEndian.PutUint32(b[20:], g.shares())
	copy(b[24:32], s.symbol[:])
	binary.BigEndian.PutUint32(b[32:], price(s, side, 0))
	binary.BigEndian.PutUint64(b[36:], g.match)
	return b
}
