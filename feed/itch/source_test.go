package itch

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
)

// stream builds ITCH messages in NASDAQ's file format.
type stream struct {
	b  []byte
	ns int64
}

func (s *stream) msg(t Type, locate uint16, body ...any) *stream {
	m := []byte{byte(t)}
	m = be.AppendUint16(m, locate)
	m = be.AppendUint16(m, 0)
	s.ns += 1000
	m = append(m, byte(s.ns>>40), byte(s.ns>>32), byte(s.ns>>24), byte(s.ns>>16), byte(s.ns>>8), byte(s.ns))
	for _, f := range body {
		switch v := f.(type) {
		case byte:
			m = append(m, v)
		case uint32:
			m = be.AppendUint32(m, v)
		case uint64:
			m = be.AppendUint64(m, v)
		case int: // a Price(4) or a 4-byte count
			m = be.AppendUint32(m, uint32(v))
		case string: // a stock (8 bytes, padded) or a short alpha field
			if len(v) > 4 {
				v += strings.Repeat(" ", 8-len(v))
			}
			m = append(m, v...)
		default:
			panic(fmt.Sprintf("field %T", f))
		}
	}
	if Size(t) != 0 && len(m) != Size(t) {
		panic(fmt.Sprintf("%s built with %d bytes", t, len(m)))
	}
	s.b = be.AppendUint16(s.b, uint16(len(m)))
	s.b = append(s.b, m...)
	return s
}

func sym8(s string) string { return s + strings.Repeat(" ", 8-len(s)) }

func (s *stream) sys(code byte) *stream { return s.msg(TypeSystemEvent, 0, code) }
func (s *stream) dir(locate uint16, stock string, cat byte, lot uint32) *stream {
	return s.msg(TypeStockDirectory, locate, sym8(stock), cat, byte('N'), lot, byte('N'), byte('C'), "Z ", byte('P'), byte('N'), byte('N'), byte('1'), byte('N'), uint32(0), byte('N'))
}
func (s *stream) action(locate uint16, stock string, state byte, reason string) *stream {
	return s.msg(TypeTradingAction, locate, sym8(stock), state, byte(0), reason)
}
func (s *stream) add(locate uint16, ref uint64, side byte, shares, px int, stock string) *stream {
	return s.msg(TypeAddOrder, locate, ref, side, shares, sym8(stock), px)
}
func (s *stream) addF(locate uint16, ref uint64, side byte, shares, px int, stock string) *stream {
	return s.msg(TypeAddOrderMPID, locate, ref, side, shares, sym8(stock), px, "VIRT")
}
func (s *stream) exec(locate uint16, ref uint64, shares int, match uint64) *stream {
	return s.msg(TypeOrderExecuted, locate, ref, shares, match)
}
func (s *stream) execPx(locate uint16, ref uint64, shares int, match uint64, printable byte, px int) *stream {
	return s.msg(TypeOrderExecutedPrice, locate, ref, shares, match, printable, px)
}
func (s *stream) cancel(locate uint16, ref uint64, shares int) *stream {
	return s.msg(TypeOrderCancel, locate, ref, shares)
}
func (s *stream) del(locate uint16, ref uint64) *stream { return s.msg(TypeOrderDelete, locate, ref) }
func (s *stream) replace(locate uint16, old, nw uint64, shares, px int) *stream {
	return s.msg(TypeOrderReplace, locate, old, nw, shares, px)
}

// describe writes a normalized message on one line, without timestamps.
func describe(m *feed.Msg) string {
	h := fmt.Sprintf("%s %d", m.Type, m.Instrument)
	var fl []string
	for _, f := range []struct {
		f feed.Flags
		n string
	}{{feed.FlagProvisional, "provisional"}, {feed.FlagBookIncomplete, "incomplete"}, {feed.FlagCross, "cross"}} {
		if m.Flags&f.f != 0 {
			fl = append(fl, f.n)
		}
	}
	if len(fl) > 0 {
		h += " [" + strings.Join(fl, ",") + "]"
	}
	side := func(present feed.Flags, px int64, size uint64) string {
		if m.Flags&present == 0 {
			return "-"
		}
		return fmt.Sprintf("%sx%d", fmtPx(uint32(px)), size)
	}
	switch m.Type {
	case feed.TypeDefinition:
		return fmt.Sprintf("%s %s scale=%d cat=%q lot=%d", h, m.Def.Symbol, m.Def.PriceScale, m.Def.MarketCategory, m.Def.RoundLot)
	case feed.TypeQuote:
		return fmt.Sprintf("%s %s / %s", h, side(feed.FlagBidPresent, m.Quote.BidPx, m.Quote.BidSize), side(feed.FlagAskPresent, m.Quote.AskPx, m.Quote.AskSize))
	case feed.TypeTrade:
		return fmt.Sprintf("%s %sx%d match=%d aggressor=%q", h, fmtPx(uint32(m.Trade.Px)), m.Trade.Size, m.Trade.MatchID, byte(m.Trade.Aggressor))
	case feed.TypeTradeBust:
		return fmt.Sprintf("%s match=%d", h, m.Bust.MatchID)
	case feed.TypeStatus:
		return fmt.Sprintf("%s state=%c reason=%q", h, m.Status.State, m.Status.Reason[:])
	}
	return h
}

func drain(t *testing.T, src *Source) ([]string, error) {
	t.Helper()
	var out []string
	var m feed.Msg
	for {
		err := src.Next(&m)
		if err != nil {
			return out, err
		}
		out = append(out, describe(&m))
	}
}

func run(t *testing.T, in []byte, cfg Config) (*Source, []string) {
	t.Helper()
	src, err := NewSource(bytes.NewReader(in), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := drain(t, src)
	if err != io.EOF {
		t.Fatalf("after %d messages: %v", len(out), err)
	}
	return src, out
}

func checkLines(t *testing.T, got []string, want string) {
	t.Helper()
	var w []string
	for _, l := range strings.Split(want, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			w = append(w, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}

// TestNormalizeFullDay covers each mapping on a feed that starts with
// system event 'O': quotes are not flagged incomplete until an unknown
// order reference proves otherwise.
func TestNormalizeFullDay(t *testing.T) {
	var s stream
	s.sys('O')
	s.dir(1, "AAPL", 'Q', 100)
	s.action(1, "AAPL", 'T', "    ")
	s.sys('Q')
	s.add(1, 1, 'B', 100, 1500000, "AAPL")
	s.addF(1, 2, 'S', 200, 1501000, "AAPL")
	s.add(1, 5, 'B', 100, 1490000, "AAPL") // below the best bid: no quote
	s.exec(1, 1, 40, 11)                   // trade at the resting price, seller aggressed
	s.execPx(1, 2, 50, 12, 'Y', 1500500)   // printable: trade at its own price
	s.execPx(1, 2, 10, 13, 'N', 1500500)   // not printable: the book moves, no trade
	s.cancel(1, 2, 40)                     // partial cancel
	s.replace(1, 1, 3, 100, 1500100)       // same side, new price and size
	s.del(1, 3)                            // the next bid level shows
	s.msg(TypeTrade, 1, uint64(0), byte('B'), 30, sym8("AAPL"), 1500000, uint64(14))
	s.msg(TypeCrossTrade, 1, uint64(0), sym8("AAPL"), 1500000, uint64(15), byte('C')) // no shares: nothing
	s.msg(TypeCrossTrade, 1, uint64(5000), sym8("AAPL"), 1500000, uint64(16), byte('C'))
	s.msg(TypeBrokenTrade, 1, uint64(14))
	s.msg(TypeRegSHO, 1, sym8("AAPL"), byte('1'))
	s.msg(TypeOperationalHalt, 1, sym8("AAPL"), byte('Q'), byte('H'))
	s.msg(TypeMWCBDeclineLevel, 0, uint64(1), uint64(2), uint64(3))
	s.exec(1, 99, 10, 17)                  // unknown: the books are incomplete from here on
	s.add(1, 6, 'S', 100, 1502000, "AAPL") // behind the best ask: no quote
	s.del(1, 2)
	s.msg(TypeBrokenTrade, 9, uint64(15)) // a stock never named: nothing
	src, got := run(t, s.b, Config{OrderCapacity: 16})
	checkLines(t, got, `
		definition 1 AAPL scale=4 cat='Q' lot=100
		status 1 state=T reason="    "
		status 1 state=T reason="SYSQ"
		quote 1 150.00x100 / -
		quote 1 150.00x100 / 150.10x200
		trade 1 150.00x40 match=11 aggressor='S'
		quote 1 150.00x60 / 150.10x200
		trade 1 150.05x50 match=12 aggressor='B'
		quote 1 150.00x60 / 150.10x150
		quote 1 150.00x60 / 150.10x140
		quote 1 150.00x60 / 150.10x100
		quote 1 150.01x100 / 150.10x100
		quote 1 149.00x100 / 150.10x100
		trade 1 150.00x30 match=14 aggressor='S'
		trade 1 [cross] 150.00x5000 match=16 aggressor='\x00'
		trade-bust 1 match=14
		status 1 state=T reason="SHO1"
		status 1 state=H reason="OPHQ"
		quote 1 [incomplete] 149.00x100 / 150.20x100
	`)
	st := src.Stats()
	if st.UnknownOrder['E'] != 1 || st.NotPrintable != 1 || st.EmptyCross != 1 || st.Undefined != 1 || !src.MidDay() {
		t.Errorf("stats: unknown E %d, not printable %d, empty cross %d, undefined %d, mid-day %v",
			st.UnknownOrder['E'], st.NotPrintable, st.EmptyCross, st.Undefined, src.MidDay())
	}
	if st.Instruments != 1 || st.Provisional != 0 {
		t.Errorf("%d instruments, %d provisional", st.Instruments, st.Provisional)
	}
}

// TestNormalizeMidDay: without a start-of-messages event, stocks get
// provisional definitions from their first message, every quote is flagged
// incomplete, and a later stock directory message gives the full definition.
func TestNormalizeMidDay(t *testing.T) {
	var s stream
	s.del(2, 12345) // added before the feed began
	s.add(2, 1, 'S', 100, 99900, "ZVZZT")
	s.msg(TypeNOII, 3, uint64(100), uint64(10), byte('B'), sym8("ZXZZT"), 1, 2, 3, byte('O'), byte(' '))
	s.replace(2, 777, 778, 100, 100000) // unknown original: new ref unknown too
	s.exec(2, 778, 100, 1)
	s.dir(2, "ZVZZT", 'G', 50)
	s.sys('M')
	_, got := run(t, s.b, Config{})
	checkLines(t, got, `
		definition 2 [provisional] ZVZZT scale=4 cat='\x00' lot=0
		quote 2 [incomplete] - / 9.99x100
		definition 3 [provisional] ZXZZT scale=4 cat='\x00' lot=0
		definition 2 ZVZZT scale=4 cat='G' lot=50
		status 2 state=? reason="SYSM"
		status 3 state=? reason="SYSM"
	`)
	_, got = run(t, s.b, Config{Start: StartOfDay})
	if len(got) < 2 || got[1] != "quote 2 [incomplete] - / 9.99x100" {
		t.Errorf("StartOfDay after an unknown delete: %q, want the quote flagged incomplete", got)
	}
}

// TestSnippet normalizes the real snippet: the counts of the issue, a
// provisional definition before each instrument's first message, and every
// quote flagged incomplete and consistent with the books.
func TestSnippet(t *testing.T) {
	in, err := os.ReadFile(snippetPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(bytes.NewReader(in), Config{OrderCapacity: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defined := map[uint32]bool{}
	var m feed.Msg
	for {
		err := src.Next(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Type == feed.TypeDefinition:
			if m.Flags != feed.FlagProvisional || defined[m.Instrument] {
				t.Errorf("definition %s", describe(&m))
			}
			defined[m.Instrument] = true
		case !defined[m.Instrument]:
			t.Errorf("%s before its definition", describe(&m))
		case m.Type == feed.TypeQuote:
			if m.Flags&feed.FlagBookIncomplete == 0 {
				t.Errorf("quote not flagged incomplete: %s", describe(&m))
			}
			top := src.Books().Top(uint16(m.Instrument))
			if int64(top.BidPrice) != m.Quote.BidPx || top.BidSize != m.Quote.BidSize || int64(top.AskPrice) != m.Quote.AskPx || top.AskSize != m.Quote.AskSize {
				t.Errorf("quote %s, book %+v", describe(&m), top)
			}
		}
	}
	st := src.Stats()
	want := map[byte][2]uint64{'A': {367, 0}, 'U': {225, 225}, 'F': {193, 0}, 'D': {167, 139}, 'E': {28, 28},
		'X': {6, 6}, 'I': {4, 0}, 'P': {4, 0}, 'Q': {4, 0}, 'S': {1, 0}, 'C': {1, 1}}
	for typ := range 256 {
		w := want[byte(typ)]
		if st.ByType[typ] != w[0] || st.UnknownOrder[typ] != w[1] {
			t.Errorf("type %c: %d messages, %d unknown orders; want %d, %d", typ, st.ByType[typ], st.UnknownOrder[typ], w[0], w[1])
		}
	}
	if st.Messages != 1000 || src.Offset() != int64(len(in)) || !src.MidDay() {
		t.Errorf("%d messages, offset %d, mid-day %v", st.Messages, src.Offset(), src.MidDay())
	}
	// 4 non-cross trades, 2 of the 4 crosses had shares; no execution could
	// be priced.
	if st.Normalized[feed.TypeTrade] != 6 || st.Normalized[feed.TypeDefinition] != 190 || st.Normalized[feed.TypeQuote] == 0 {
		t.Errorf("normalized: %d trades, %d definitions, %d quotes", st.Normalized[feed.TypeTrade],
			st.Normalized[feed.TypeDefinition], st.Normalized[feed.TypeQuote])
	}
	// Live orders: adds (560) less the 28 known deletes.
	if src.Books().Orders() != 560-28 {
		t.Errorf("%d live orders", src.Books().Orders())
	}
}

// TestGzip reads the snippet gzipped and gets the same result as plain.
func TestGzip(t *testing.T) {
	in, err := os.ReadFile(snippetPath)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(in)
	zw.Close()
	_, plain := run(t, in, Config{OrderCapacity: 4096})
	src, zipped := run(t, z.Bytes(), Config{OrderCapacity: 4096})
	if strings.Join(plain, "\n") != strings.Join(zipped, "\n") || src.Stats().Messages != 1000 {
		t.Errorf("gzip: %d normalized messages from %d ITCH, plain %d", len(zipped), src.Stats().Messages, len(plain))
	}
}

// TestSourceErrors: unknown types are skipped and counted; a length that
// does not match the type, and a truncated message, are errors naming type
// and offset.
func TestSourceErrors(t *testing.T) {
	var s stream
	s.sys('O')
	s.msg('Z', 0, uint64(1)) // unknown type, any length
	s.b = append(s.b, 0, 0)  // a zero-length message
	s.sys('S')
	src, _ := run(t, s.b, Config{})
	if st := src.Stats(); st.SkippedTypes['Z'] != 1 || st.Empty != 1 || st.ByType['S'] != 2 || st.Messages != 4 {
		t.Errorf("skipped %d, empty %d, S %d, messages %d", st.SkippedTypes['Z'], st.Empty, st.ByType['S'], st.Messages)
	}

	bad := append([]byte{}, s.b...)
	bad = append(bad, 0, 13, 'S', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'Q', 0) // 13 bytes for a 12-byte type
	src, err := NewSource(bytes.NewReader(bad), Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = drain(t, src)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Type != TypeSystemEvent || fe.Offset != int64(len(s.b)) || fe.Field != "length" || fe.Len != 13 {
		t.Fatalf("%v, want a length error at offset %d", err, len(s.b))
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("offset %d", len(s.b))) || !strings.Contains(err.Error(), "system event") {
		t.Errorf("error %q names neither type nor offset", err)
	}
	var m feed.Msg
	if err2 := src.Next(&m); err2 != err {
		t.Errorf("error not sticky: %v", err2)
	}

	trunc := s.b[:len(s.b)-3]
	src, _ = NewSource(bytes.NewReader(trunc), Config{})
	if _, err := drain(t, src); !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &fe) || fe.Offset != int64(len(s.b)-14) {
		t.Errorf("truncated: %v", err)
	}
}

// TestSourceNoAllocs: in steady state Next does not allocate, with depth
// off and with level deltas of the top 10 levels.
func TestSourceNoAllocs(t *testing.T) {
	in := steadyStream(5000)
	for _, depth := range []int{0, 10} {
		src, err := NewSource(bytes.NewReader(in), Config{OrderCapacity: 4096, Depth: depth})
		if err != nil {
			t.Fatal(err)
		}
		var m feed.Msg
		for range 4000 { // warm: every book has its levels
			if err := src.Next(&m); err != nil {
				t.Fatal(err)
			}
		}
		const perRound = 100
		testenv.NoAllocs(t, fmt.Sprintf("Next at depth %d", depth), 50, perRound, func() {
			for range perRound {
				if err := src.Next(&m); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// steadyStream returns rounds of order events on 8 stocks that leave no
// order behind: adds, a replace, partial and full executions, a cancel, a
// delete, and a trade, all within a few price levels.
func steadyStream(rounds int) []byte {
	var s stream
	s.sys('O')
	for l := uint16(1); l <= 8; l++ {
		s.dir(l, fmt.Sprintf("STK%d", l), 'Q', 100)
	}
	ref := uint64(1)
	for r := range rounds {
		l := uint16(1 + r%8)
		px := 100000 + 100*(r%5)
		s.add(l, ref, 'B', 300, px, "")
		s.add(l, ref+1, 'S', 200, px+1000, "")
		s.replace(l, ref, ref+2, 300, px+100)
		s.exec(l, ref+2, 100, uint64(r))
		s.execPx(l, ref+1, 50, uint64(r), 'Y', px+1000)
		s.cancel(l, ref+1, 50)
		s.exec(l, ref+2, 200, uint64(r))
		s.del(l, ref+1)
		s.msg(TypeTrade, l, uint64(0), byte('B'), 10, sym8(fmt.Sprintf("STK%d", l)), px, uint64(r))
		ref += 3
	}
	return s.b
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{OrderCapacity: -1}, "OrderCapacity"},
		{Config{Start: StartMidDay + 1}, "Start"},
	} {
		_, err := NewSource(bytes.NewReader(nil), tc.cfg)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Pkg != "itch" || ce.Field != tc.field {
			t.Errorf("NewSource(%+v) = %v, want a *config.Error naming %s", tc.cfg, err, tc.field)
		}
	}
}

// lossyReader yields the messages of a stream, with steps between them: a
// loss (ErrLost) or nothing yet (feed.ErrIdle) before the message at each
// index in at.
type lossyReader struct {
	msgs [][]byte
	at   map[int]error
	i    int
}

func (r *lossyReader) Next() ([]byte, int64, error) {
	if err, ok := r.at[r.i]; ok {
		delete(r.at, r.i)
		return nil, int64(r.i), err
	}
	if r.i == len(r.msgs) {
		return nil, int64(r.i), io.EOF
	}
	r.i++
	return r.msgs[r.i-1], int64(r.i - 1), nil
}

func (r *lossyReader) Offset() int64 { return int64(r.i) }

// TestInputLost: a reader's ErrLost makes a status flagged book-incomplete,
// reason LOST, for every instrument defined so far, and flags every later
// quote; feed.ErrIdle passes through without ending the source. Both come
// out where they fell among the messages, though the source reads ahead,
// and a message too long for a look-ahead slot (of no ITCH type) in the
// middle leaves the messages around it whole.
func TestInputLost(t *testing.T) {
	var s stream
	s.sys('O')
	s.dir(1, "AAPL", 'Q', 100)
	s.action(1, "AAPL", 'H', "    ")
	s.dir(3, "MSFT", 'Q', 100)
	s.add(1, 1, 'B', 100, 1500000, "AAPL")
	s.add(3, 2, 'S', 100, 2500000, "MSFT")
	s.add(1, 3, 'B', 100, 1510000, "AAPL")
	msgs := readAll(t, bytes.NewReader(s.b))
	big := bytes.Repeat([]byte{'z'}, 3*aheadSlot)
	msgs = slices.Insert(msgs, 3, big)
	r := &lossyReader{msgs: msgs, at: map[int]error{1: feed.ErrIdle, 6: ErrLost}}
	src, err := NewMessageSource(r, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var m feed.Msg
	idle := 0
	for err = src.Next(&m); err != io.EOF; err = src.Next(&m) {
		switch {
		case err == feed.ErrIdle:
			idle++
			got = append(got, "idle")
		case err != nil:
			t.Fatal(err)
		default:
			got = append(got, describe(&m))
		}
	}
	if idle != 1 {
		t.Errorf("ErrIdle passed on %d times, want 1", idle)
	}
	if n := src.Stats().SkippedTypes['z']; n != 1 {
		t.Errorf("%d messages of type 'z' skipped, want 1", n)
	}
	checkLines(t, got, `
		idle
		definition 1 AAPL scale=4 cat='Q' lot=100
		status 1 state=H reason="    "
		definition 3 MSFT scale=4 cat='Q' lot=100
		quote 1 150.00x100 / -
		status 1 [incomplete] state=H reason="LOST"
		status 3 [incomplete] state=? reason="LOST"
		quote 3 [incomplete] - / 250.00x100
		quote 1 [incomplete] 151.00x100 / -
	`)
}

// TestShortAddReadAhead: with an order table large enough to read ahead
// (the default), a message too short for its type is reported as such when
// its turn comes; the look-ahead, which reads order events early to
// prefetch for them, must not read past its end (an add 19 bytes long, cut
// just before its side, once panicked there).
func TestShortAddReadAhead(t *testing.T) {
	var s stream
	s.sys('O')
	s.dir(1, "AAPL", 'Q', 100)
	// The stock has a book by the time the short add is read ahead.
	for ref := uint64(1); ref <= 2*lookAhead; ref++ {
		s.add(1, ref, 'B', 100, 1500000, "AAPL")
	}
	good := len(s.b)
	s.b = append(s.b, 0, 19, 'A', 0, 1) // length 19, add, locate 1
	s.b = append(s.b, make([]byte, 16)...)
	src, err := NewSource(bytes.NewReader(s.b), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !src.ahead.on {
		t.Fatal("the default order table does not read ahead: the test tests nothing")
	}
	_, err = drain(t, src)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Type != TypeAddOrder || fe.Field != "length" || fe.Len != 19 || fe.Offset != int64(good) {
		t.Fatalf("%v, want a length error for the 19-byte add at offset %d", err, good)
	}
}
