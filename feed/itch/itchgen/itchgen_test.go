package itchgen

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
)

// small is a day the default test run reads in well under a second.
var small = Config{Seed: 7, Stocks: 50, Orders: 2000, Messages: 200_000}

func generate(t testing.TB, cfg Config) ([]byte, *Generator) {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := g.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), g
}

// read normalizes a day with feed/itch and returns the source after the
// end of its input, calling each (if not nil) after every ITCH message.
func read(t testing.TB, r io.Reader, capacity int, each func(*itch.Source)) *itch.Source {
	t.Helper()
	src, err := itch.NewSource(r, itch.Config{OrderCapacity: capacity, Depth: 10, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	var m feed.Msg
	seen := uint64(0)
	for {
		err := src.Next(&m)
		if err == io.EOF {
			return src
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := src.Stats().Messages; each != nil && n != seen {
			seen = n
			each(src)
		}
	}
}

// checkClean fails unless feed/itch found nothing wrong with the day: no
// unknown reference, duplicate, full table, wrong stock, excess shares, bad
// side, skipped type or undefined instrument, and a start of day.
func checkClean(t testing.TB, src *itch.Source, want uint64) {
	t.Helper()
	st := src.Stats()
	if st.Messages != want {
		t.Errorf("feed/itch read %d messages, want %d", st.Messages, want)
	}
	for typ, n := range st.UnknownOrder {
		if n > 0 {
			t.Errorf("%d %v events name an unknown order", n, itch.Type(typ))
		}
	}
	for typ, n := range st.SkippedTypes {
		if n > 0 {
			t.Errorf("%d messages of unknown type 0x%02x", n, typ)
		}
	}
	for name, n := range map[string]uint64{"duplicate": st.Duplicate, "table full": st.TableFull, "wrong stock": st.WrongStock,
		"excess": st.Excess, "bad side": st.BadSide, "empty": st.Empty, "undefined": st.Undefined, "empty cross": st.EmptyCross} {
		if n > 0 {
			t.Errorf("%d %s", n, name)
		}
	}
	if src.MidDay() {
		t.Error("the books are flagged incomplete")
	}
}

// TestDayIsValid: every message of a generated day parses, and feed/itch
// keeps its books without a single anomaly; the books hold exactly the
// orders the generator left live.
func TestDayIsValid(t *testing.T) {
	day, g := generate(t, small)
	r := itch.NewReader(bytes.NewReader(day))
	var prev int64
	for n := uint64(0); ; n++ {
		b, off, err := r.Next()
		if err == io.EOF {
			if n != small.Messages {
				t.Errorf("%d messages in the file, want %d", n, small.Messages)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := itch.Parse(b)
		if err != nil {
			t.Fatalf("message %d at offset %d: %v", n, off, err)
		}
		if ts := m.Timestamp(); ts < prev {
			t.Fatalf("message %d: timestamp %d before %d", n, ts, prev)
		} else {
			prev = ts
		}
	}
	src := read(t, bytes.NewReader(day), 2*small.Orders, nil)
	checkClean(t, src, small.Messages)
	if got := src.Books().Orders(); got != g.Live() || got == 0 {
		t.Errorf("books hold %d orders, the generator left %d live", got, g.Live())
	}
	if got := src.Stats().Instruments; got != small.Stocks {
		t.Errorf("%d instruments, want %d", got, small.Stocks)
	}
}

// TestMix: the day has every kind of message the package promises, in
// roughly the proportions it promises.
func TestMix(t *testing.T) {
	day, _ := generate(t, small)
	st := read(t, bytes.NewReader(day), 2*small.Orders, nil).Stats()
	events := float64(small.Messages - OpeningMessages(small.Stocks) - closingMessages)
	for _, c := range []struct {
		types    string
		lo, hi   float64 // share of the order events
		required bool
	}{
		{"AF", 0.40, 0.52, true}, {"F", 0.002, 0.02, true}, {"D", 0.33, 0.45, true}, {"U", 0.06, 0.12, true},
		{"EC", 0.015, 0.04, true}, {"C", 0.001, 0.006, true}, {"X", 0.008, 0.025, true}, {"P", 0.006, 0.02, true},
	} {
		var n uint64
		for _, typ := range []byte(c.types) {
			n += st.ByType[typ]
		}
		if share := float64(n) / events; share < c.lo || share > c.hi {
			t.Errorf("%s: %.4f of the order events, want %.3f..%.3f", c.types, share, c.lo, c.hi)
		}
	}
	if st.ByType['R'] != uint64(small.Stocks) || st.ByType['H'] != uint64(small.Stocks) || st.ByType['S'] != 6 {
		t.Errorf("R %d, H %d, S %d; want %d, %d, 6", st.ByType['R'], st.ByType['H'], st.ByType['S'], small.Stocks, small.Stocks)
	}
	if st.NotPrintable == 0 {
		t.Error("no non-printable execution")
	}
}

// TestLivePopulation: the live order count climbs to the target and then
// stays near it, as the books (not the generator) count it.
func TestLivePopulation(t *testing.T) {
	day, g := generate(t, small)
	target := small.Orders
	reached := false
	lo, hi := target, 0
	read(t, bytes.NewReader(day), 2*target, func(src *itch.Source) {
		n := src.Books().Orders()
		if !reached {
			reached = n >= target
			return
		}
		lo, hi = min(lo, n), max(hi, n)
	})
	if !reached {
		t.Fatalf("the live count never reached %d (high water %d)", target, g.HighWater())
	}
	if lo < target*9/10 || hi > target*11/10 {
		t.Errorf("after reaching %d the live count ranged %d..%d, want within 10%%", target, lo, hi)
	}
	if hi == lo {
		t.Errorf("the live count stayed at %d", lo)
	}
}

// TestTopOfBook: executions happen at or near the best price of their
// side, as the books see it: most at the best price itself, nearly all
// within two ticks of it.
func TestTopOfBook(t *testing.T) {
	day, _ := generate(t, small)
	books := itch.NewBooks(2 * small.Orders)
	r := itch.NewReader(bytes.NewReader(day))
	atTop, execs := 0, 0
	near := 0 // within two ticks of the best
	for {
		b, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m := itch.Message(b)
		l := m.StockLocate()
		switch m.Type() {
		case itch.TypeAddOrder, itch.TypeAddOrderMPID:
			a := m.AddOrder()
			books.Add(l, a.OrderRef(), a.Side(), a.Shares(), a.Price())
		case itch.TypeOrderExecuted, itch.TypeOrderExecutedPrice:
			e := m.OrderExecuted()
			o, ok := books.Order(e.OrderRef())
			if !ok {
				t.Fatalf("execution of unknown order %d", e.OrderRef())
			}
			top := books.Top(l)
			best := top.AskPrice
			if o.Side == 'B' {
				best = top.BidPrice
			}
			if o.Price == best {
				atTop++
			}
			if max(o.Price, best)-min(o.Price, best) <= 2*100 {
				near++
			}
			execs++
			books.Execute(l, e.OrderRef(), e.Shares())
		case itch.TypeOrderCancel:
			c := m.OrderCancel()
			books.Cancel(l, c.OrderRef(), c.Shares())
		case itch.TypeOrderDelete:
			books.Delete(l, m.OrderDelete().OrderRef())
		case itch.TypeOrderReplace:
			u := m.OrderReplace()
			books.Replace(l, u.OriginalRef(), u.NewRef(), u.Shares(), u.Price())
		}
	}
	if execs == 0 || atTop*4 < execs*3 || near*20 < execs*19 {
		t.Errorf("%d of %d executions at the best price, %d within two ticks; want 3/4 and 19/20", atTop, execs, near)
	}
}

// TestDeterministic: the same Config gives the same bytes; another seed
// gives others; AppendFile and WriteTo agree.
func TestDeterministic(t *testing.T) {
	cfg := Config{Seed: 1, Stocks: 20, Orders: 500, Messages: 20_000}
	a, _ := generate(t, cfg)
	b, _ := generate(t, cfg)
	if !bytes.Equal(a, b) {
		t.Error("the same seed gave different days")
	}
	cfg.Seed = 2
	if c, _ := generate(t, cfg); bytes.Equal(a, c) {
		t.Error("seeds 1 and 2 gave the same day")
	}
	cfg.Seed = 1
	g, _ := New(cfg)
	var d []byte
	for {
		var n int
		if d, n = g.AppendFile(d, 999); n < 999 {
			break
		}
	}
	if !bytes.Equal(a, d) {
		t.Error("AppendFile and WriteTo wrote different days")
	}
}

// TestGzip: a gzipped day reads as the plain one does.
func TestGzip(t *testing.T) {
	cfg := Config{Seed: 3, Stocks: 20, Orders: 500, Messages: 20_000}
	plain, _ := generate(t, cfg)
	g, _ := New(cfg)
	var zbuf bytes.Buffer
	if err := g.WriteGzip(&zbuf); err != nil {
		t.Fatal(err)
	}
	if zbuf.Len() >= len(plain) || !bytes.HasPrefix(zbuf.Bytes(), []byte{0x1f, 0x8b}) {
		t.Fatalf("gzip output of %d bytes for %d plain is not gzip", zbuf.Len(), len(plain))
	}
	a := read(t, bytes.NewReader(plain), 2*cfg.Orders, nil)
	b := read(t, &zbuf, 2*cfg.Orders, nil)
	checkClean(t, b, cfg.Messages)
	if a.Stats().Normalized != b.Stats().Normalized || a.Offset() != b.Offset() {
		t.Error("the gzipped day normalizes differently from the plain one")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Stocks: -1}, "Stocks"},
		{Config{Stocks: MaxStocks + 1}, "Stocks"},
		{Config{Orders: -5}, "Orders"},
		{Config{Stocks: 10, Messages: OpeningMessages(10) + closingMessages - 1}, "Messages"},
	} {
		_, err := New(tc.cfg)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Pkg != "itchgen" || ce.Field != tc.field {
			t.Errorf("New(%+v) = %v, want a *config.Error naming %s", tc.cfg, err, tc.field)
		}
	}
	if _, err := New(Config{Stocks: 10, Messages: OpeningMessages(10) + closingMessages}); err != nil {
		t.Errorf("the shortest day: %v", err)
	}
}

func TestSymbols(t *testing.T) {
	seen := map[[8]byte]int{}
	for i := range MaxStocks {
		s := symbol(i)
		if j, dup := seen[s]; dup {
			t.Fatalf("stocks %d and %d are both %q", j, i, s)
		}
		seen[s] = i
	}
	for i, want := range map[int]string{0: "A       ", 25: "Z       ", 26: "AA      ", 27: "AB      ", 702: "AAA     "} {
		if got := symbol(i); string(got[:]) != want {
			t.Errorf("symbol(%d) = %q, want %q", i, got, want)
		}
	}
}

// FuzzGenerate: whatever the seed and the shape of the day, feed/itch
// reads it without an anomaly.
func FuzzGenerate(f *testing.F) {
	f.Add(uint64(0), uint8(1), uint16(1), uint16(0))
	f.Add(uint64(7), uint8(50), uint16(2000), uint16(5000))
	f.Add(uint64(99), uint8(3), uint16(10), uint16(60000))
	f.Fuzz(func(t *testing.T, seed uint64, stocks uint8, orders, events uint16) {
		cfg := Config{Seed: seed, Stocks: max(1, int(stocks)), Orders: max(1, int(orders))}
		cfg.Messages = OpeningMessages(cfg.Stocks) + closingMessages + uint64(events)
		day, g := generate(t, cfg)
		// A table of exactly the generator's high water: not one add refused.
		src := read(t, bytes.NewReader(day), g.HighWater(), nil)
		checkClean(t, src, cfg.Messages)
		if src.Books().Orders() != g.Live() {
			t.Errorf("books hold %d orders, the generator left %d", src.Books().Orders(), g.Live())
		}
	})
}
