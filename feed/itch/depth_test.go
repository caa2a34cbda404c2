package itch

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

// levelKey names a price level of one side of one stock in deltaModel.
type levelKey struct {
	locate uint32
	side   feed.Side
}

// deltaModel applies level deltas to a map of levels by price, strictly:
// a new level must be absent, a changed or deleted one present.
type deltaModel map[levelKey]map[int64]Level

func (dm deltaModel) apply(m *feed.Msg) error {
	k := levelKey{m.Instrument, m.Delta.Side}
	if dm[k] == nil {
		dm[k] = map[int64]Level{}
	}
	side := dm[k]
	_, had := side[m.Delta.Px]
	switch m.Delta.Action {
	case feed.ActionNew:
		if had {
			return fmt.Errorf("new level %c %d of %d already held", m.Delta.Side, m.Delta.Px, m.Instrument)
		}
	case feed.ActionChange, feed.ActionDelete:
		if !had {
			return fmt.Errorf("%c of level %c %d of %d not held", m.Delta.Action, m.Delta.Side, m.Delta.Px, m.Instrument)
		}
	default:
		return fmt.Errorf("action %q", m.Delta.Action)
	}
	if m.Delta.Action == feed.ActionDelete {
		if m.Delta.Orders != 0 || m.Delta.Size != 0 {
			return fmt.Errorf("delete of %c %d carries %d orders, %d shares", m.Delta.Side, m.Delta.Px, m.Delta.Orders, m.Delta.Size)
		}
		delete(side, m.Delta.Px)
		return nil
	}
	side[m.Delta.Px] = Level{Price: uint32(m.Delta.Px), Orders: m.Delta.Orders, Shares: m.Delta.Size}
	return nil
}

// check compares the model with the top depth levels of every side of
// books, for stocks 1..stocks.
func (dm deltaModel) check(books *Books, stocks uint16, depth int) error {
	locates := make([]uint16, stocks)
	for i := range locates {
		locates[i] = uint16(i + 1)
	}
	return dm.checkLocates(books, locates, depth)
}

// checkLocates compares the model with the top depth levels of every side
// of books, for the stocks listed.
func (dm deltaModel) checkLocates(books *Books, locates []uint16, depth int) error {
	for _, l := range locates {
		for _, side := range []byte{'B', 'S'} {
			want := books.Levels(l, side, nil)
			want = want[:min(len(want), depth)]
			got := dm[levelKey{uint32(l), feed.Side(side)}]
			if len(got) != len(want) {
				return fmt.Errorf("stock %d side %c: %d levels from deltas, book's top %d has %d: %v vs %v", l, side, len(got), depth, len(want), got, want)
			}
			for _, w := range want {
				if g := got[int64(w.Price)]; g != w {
					return fmt.Errorf("stock %d side %c price %d: %+v from deltas, book has %+v", l, side, w.Price, g, w)
				}
			}
		}
	}
	return nil
}

// randomOrders returns n random order events on stocks 1..stocks around a
// few prices, every event naming an order that is live when it comes
// (plus a few unknown references), so books stay deep and change at and
// below the top.
func randomOrders(r *rand.Rand, n int, stocks uint16) []byte {
	var s stream
	s.sys('O')
	for l := uint16(1); l <= stocks; l++ {
		s.dir(l, fmt.Sprintf("S%d", l), 'Q', 100)
	}
	type live struct {
		ref    uint64
		locate uint16
		shares int
		px     int
	}
	var orders []live
	ref := uint64(1)
	for range n {
		if len(orders) == 0 || r.IntN(10) < 4 {
			l := uint16(1 + r.IntN(int(stocks)))
			side := byte('B')
			px := 100000 - 100*r.IntN(30)
			if r.IntN(2) == 0 {
				side, px = 'S', 101000+100*r.IntN(30)
			}
			sh := 1 + r.IntN(500)
			s.add(l, ref, side, sh, px, "")
			orders = append(orders, live{ref, l, sh, px})
			ref++
			continue
		}
		i := r.IntN(len(orders))
		o := &orders[i]
		gone := func() { orders[i] = orders[len(orders)-1]; orders = orders[:len(orders)-1] }
		switch r.IntN(6) {
		case 0:
			k := 1 + r.IntN(o.shares)
			s.exec(o.locate, o.ref, k, ref)
			if o.shares -= k; o.shares == 0 {
				gone()
			}
		case 1:
			k := 1 + r.IntN(o.shares)
			s.cancel(o.locate, o.ref, k)
			if o.shares -= k; o.shares == 0 {
				gone()
			}
		case 2:
			s.del(o.locate, o.ref)
			gone()
		case 3:
			sh := 1 + r.IntN(500)
			px := 100000 - 100*r.IntN(30) // a bid's price; an ask's moves into bid prices, crossing is allowed
			if r.IntN(2) == 0 {
				px = 101000 + 100*r.IntN(30)
			}
			switch r.IntN(8) {
			case 0: // the same level, the same shares: no level changes
				px, sh = o.px, o.shares
			case 1, 2: // the same level, new shares
				px = o.px
			case 3: // a new reference already live: the original only leaves
				if d := orders[r.IntN(len(orders))]; d.ref != o.ref {
					s.replace(o.locate, o.ref, d.ref, sh, px)
					gone()
					continue
				}
			}
			s.replace(o.locate, o.ref, ref, sh, px)
			o.ref, o.shares, o.px = ref, sh, px
			ref++
		case 4:
			k := 1 + r.IntN(o.shares)
			s.execPx(o.locate, o.ref, k, ref, byte("YN"[r.IntN(2)]), 100500)
			if o.shares -= k; o.shares == 0 {
				gone()
			}
		case 5:
			s.del(o.locate, ref+1000000) // unknown: changes nothing
		}
	}
	return s.b
}

// runDepth runs in through a Source of the given depth, applying every
// level delta to a deltaModel, and returns both.
func runDepth(t *testing.T, in []byte, depth int) (*Source, deltaModel, int) {
	t.Helper()
	src, err := NewSource(bytes.NewReader(in), Config{OrderCapacity: 1 << 16, Depth: depth, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	dm := deltaModel{}
	deltas := 0
	var m feed.Msg
	for {
		err := src.Next(&m)
		if err == io.EOF {
			return src, dm, deltas
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == feed.TypeLevelDelta {
			deltas++
			if err := dm.apply(&m); err != nil {
				t.Fatalf("after %d ITCH messages: %v", src.Stats().Messages, err)
			}
		}
	}
}

// TestDepthProperty: for random sequences of adds, executions, cancels,
// deletes and replaces, the level deltas published, applied by price,
// rebuild exactly the books' top Depth levels of every side; each delta
// fits (a new level was not held, a changed or deleted one was).
func TestDepthProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 4))
	for run := range 300 {
		depth := 1 + r.IntN(12)
		if run%50 == 0 {
			depth = MaxDepth
		}
		stocks := uint16(1 + r.IntN(4))
		in := randomOrders(r, 1+r.IntN(600), stocks)
		src, dm, _ := runDepth(t, in, depth)
		if err := dm.check(src.Books(), stocks, depth); err != nil {
			t.Fatalf("run %d (depth %d): %v", run, depth, err)
		}
	}
}

// TestDepthLongRun: the same on one long run of 200,000 events.
func TestDepthLongRun(t *testing.T) {
	n := 200000
	if testing.Short() {
		n = 20000
	}
	const stocks, depth = 20, 10
	in := randomOrders(rand.New(rand.NewPCG(1, 2)), n, stocks)
	src, dm, deltas := runDepth(t, in, depth)
	if err := dm.check(src.Books(), stocks, depth); err != nil {
		t.Fatal(err)
	}
	if deltas == 0 || src.Stats().Normalized[feed.TypeLevelDelta] != uint64(deltas) {
		t.Fatalf("%d deltas seen, stats count %d", deltas, src.Stats().Normalized[feed.TypeLevelDelta])
	}
	t.Logf("%d ITCH messages, %d level deltas", src.Stats().Messages, deltas)
}

// TestDepthSnippet: the real snippet's deltas rebuild its books' top 10.
func TestDepthSnippet(t *testing.T) {
	in := snippetBytes(t)
	src, dm, deltas := runDepth(t, in, 10)
	var top uint16
	for l := range 1 << 16 {
		if len(src.Books().Levels(uint16(l), 'B', nil))+len(src.Books().Levels(uint16(l), 'S', nil)) > 0 {
			top = uint16(l)
		}
	}
	if err := dm.check(src.Books(), top, 10); err != nil {
		t.Fatal(err)
	}
	if deltas == 0 {
		t.Fatal("no level deltas from the snippet")
	}
}

// TestDepthOffPublishesNone: Depth 0 publishes no level delta.
func TestDepthOffPublishesNone(t *testing.T) {
	_, _, deltas := runDepth(t, steadyStream(100), 0)
	if deltas != 0 {
		t.Fatalf("%d level deltas with depth off", deltas)
	}
}

// TestDepthExample: a level pushed out of the top and pulled back in.
func TestDepthExample(t *testing.T) {
	var s stream
	s.sys('O').dir(1, "AAPL", 'Q', 100)
	s.add(1, 1, 'B', 100, 100000, "") // N 10.0000
	s.add(1, 2, 'B', 200, 99000, "")  // N 9.9000
	s.add(1, 3, 'B', 300, 101000, "") // N 10.1000, D 9.9000 (pushed out of the top 2)
	s.add(1, 4, 'B', 50, 100000, "")  // C 10.0000
	s.del(1, 3)                       // D 10.1000, N 9.9000 (pulled in)
	src, err := NewSource(bytes.NewReader(s.b), Config{Depth: 2, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var m feed.Msg
	for src.Next(&m) == nil {
		if m.Type == feed.TypeLevelDelta {
			got = append(got, fmt.Sprintf("%c %c %d %d/%d", m.Delta.Action, m.Delta.Side, m.Delta.Px, m.Delta.Size, m.Delta.Orders))
		}
	}
	want := []string{"N B 100000 100/1", "N B 99000 200/1", "N B 101000 300/1", "D B 99000 0/0",
		"C B 100000 150/2", "D B 101000 0/0", "N B 99000 200/1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("deltas\n%q\nwant\n%q", got, want)
	}
}

// snippetBytes returns the real snippet, or skips the test when it is
// absent.
func snippetBytes(t *testing.T) []byte {
	t.Helper()
	in, err := os.ReadFile(snippetPath)
	if err != nil {
		t.Skipf("the real ITCH snippet is not here: %v", err)
	}
	return in
}

// sameOutput runs two Sources over the same input, one computing each
// event's level deltas from the level it touched (the default), the other
// exhaustive: merging the side's top before and after every event. Every
// normalized message must be the same, in the same order; it returns how
// many level deltas there were.
func sameOutput(t *testing.T, fast, ref *Source) int {
	t.Helper()
	ref.exhaustive = true
	deltas := 0
	var a, b feed.Msg
	for i := 0; ; i++ {
		ea, eb := fast.Next(&a), ref.Next(&b)
		if ea != nil || eb != nil {
			if ea != io.EOF || eb != io.EOF {
				t.Fatalf("message %d: %v, reference %v", i, ea, eb)
			}
			return deltas
		}
		if a != b {
			t.Fatalf("message %d (ITCH message %d):\n%+v\nreference (merge):\n%+v", i, fast.Stats().Messages, a, b)
		}
		if a.Type == feed.TypeLevelDelta {
			deltas++
		}
	}
}

// TestDepthPerEventMatchesMerge: the level deltas and quotes computed from
// the one level an event touched are exactly those of merging the side's
// top before and after it, on random order flows at every depth from 0 to
// MaxDepth and on a generated day.
func TestDepthPerEventMatchesMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 8))
	clock := func() int64 { return 0 }
	deltas := 0
	for run := range 200 {
		depth := run % (MaxDepth + 1)
		if run%3 == 0 {
			depth = run % 12
		}
		stocks := uint16(1 + r.IntN(4))
		in := randomOrders(r, 1+r.IntN(800), stocks)
		open := func() *Source {
			src, err := NewSource(bytes.NewReader(in), Config{OrderCapacity: 1 << 16, Depth: depth, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return src
		}
		deltas += sameOutput(t, open(), open())
	}
	n := 600_000
	if testing.Short() {
		n = 100_000
	}
	cfg := itchgen.Config{Seed: 5, Stocks: 300, Orders: 30_000, Messages: uint64(n)}
	for _, depth := range []int{1, 10} {
		open := func() *Source {
			src, err := NewMessageSource(newGenReader(t, cfg, 1<<16), Config{Depth: depth, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return src
		}
		fast := open()
		d := sameOutput(t, fast, open())
		if d == 0 || fast.Stats().Messages < uint64(n) {
			t.Fatalf("generated day at depth %d: %d ITCH messages, %d deltas", depth, fast.Stats().Messages, d)
		}
		deltas += d
	}
	t.Logf("%d level deltas the same", deltas)
}
