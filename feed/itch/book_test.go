package itch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
)

// parsePx reads a decimal price with up to 4 decimals as a Price(4).
func parsePx(s string) (uint32, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 4 {
		return 0, fmt.Errorf("price %q: more than 4 decimals", s)
	}
	frac += strings.Repeat("0", 4-len(frac))
	w, err := strconv.ParseUint(whole, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("price %q: %v", s, err)
	}
	f, err := strconv.ParseUint(frac, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("price %q: %v", s, err)
	}
	return uint32(w*10000 + f), nil
}

// fmtPx writes a Price(4) with 2 to 4 decimals, as the book files do.
func fmtPx(p uint32) string {
	s := fmt.Sprintf("%d.%04d", p/10000, p%10000)
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return s
}

func fmtTop(has bool, p uint32, size uint64) string {
	if !has {
		return "-"
	}
	return fmt.Sprintf("%sx%d", fmtPx(p), size)
}

// TestBookFiles runs the scenarios in testdata/book/*.txt. A scenario is a
// list of lines `op args | result | best bid | best ask`, where op is one of
//
//	add REF SIDE SHARES PRICE
//	exec REF SHARES
//	cancel REF SHARES
//	delete REF
//	replace OLDREF NEWREF SHARES PRICE
//
// and the top of the current stock's book is checked after each step; and
// of the lines `capacity N` (new books), `stock LOCATE` (the stock the next
// lines are about), `levels SIDE | PRICExSHARES/ORDERS ...` (the side's
// levels, best first) and `orders | N` (live orders in the table).
func TestBookFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/book/*.txt")
	if len(files) == 0 {
		t.Fatal("no book files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			b := NewBooks(1 << 10)
			locate := uint16(1)
			for i, line := range strings.Split(string(data), "\n") {
				if line = strings.TrimSpace(line); line == "" || line[0] == '#' {
					continue
				}
				where := fmt.Sprintf("%s:%d: %s", file, i+1, line)
				if err := bookStep(b, &b, &locate, line); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			}
		})
	}
}

func bookStep(b *Books, bp **Books, locate *uint16, line string) error {
	cols := strings.Split(line, "|")
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	f := strings.Fields(cols[0])
	num := func(i int) uint64 {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			panic(fmt.Sprintf("argument %d: %v", i, err))
		}
		return v
	}
	price := func(i int) uint32 {
		p, err := parsePx(f[i])
		if err != nil {
			panic(err)
		}
		return p
	}
	switch f[0] {
	case "capacity":
		*bp = NewBooks(int(num(1)))
		return nil
	case "stock":
		*locate = uint16(num(1))
		return nil
	case "levels":
		var got []string
		for _, l := range b.Levels(*locate, f[1][0], nil) {
			got = append(got, fmt.Sprintf("%sx%d/%d", fmtPx(l.Price), l.Shares, l.Orders))
		}
		want := ""
		if len(cols) > 1 {
			want = strings.Join(strings.Fields(cols[1]), " ")
		}
		if g := strings.Join(got, " "); g != want {
			return fmt.Errorf("levels %s, want %s", g, want)
		}
		return nil
	case "orders":
		if g := strconv.Itoa(b.Orders()); g != cols[1] {
			return fmt.Errorf("orders %s, want %s", g, cols[1])
		}
		return nil
	}
	if len(cols) != 4 {
		return fmt.Errorf("want 4 columns: op | result | bid | ask")
	}
	var res Result
	switch f[0] {
	case "add":
		res = b.Add(*locate, num(1), f[2][0], uint32(num(3)), price(4))
	case "exec":
		_, res = b.Execute(*locate, num(1), uint32(num(2)))
	case "cancel":
		_, res = b.Cancel(*locate, num(1), uint32(num(2)))
	case "delete":
		_, res = b.Delete(*locate, num(1))
	case "replace":
		_, res = b.Replace(*locate, num(1), num(2), uint32(num(3)), price(4))
	default:
		return fmt.Errorf("unknown op %q", f[0])
	}
	top := b.Top(*locate)
	got := []string{res.String(), fmtTop(top.HasBid, top.BidPrice, top.BidSize), fmtTop(top.HasAsk, top.AskPrice, top.AskSize)}
	if want := cols[1:]; strings.Join(got, " | ") != strings.Join(want, " | ") {
		return fmt.Errorf("got %s, want %s", strings.Join(got, " | "), strings.Join(want, " | "))
	}
	return nil
}

// TestBooksAgainstModel applies random events to Books with a small table
// (so probe runs collide and wrap) and to a plain map model, and compares
// every order and every level after each step. The stock locates include
// the largest, whose bits fill a slot key's. In "wide", half the
// references are too large for a slot's key (wideRef and more, up to
// 2^64-1, and those just below it), so that events move orders between
// the table and the map of such orders, and each may fill the capacity.
func TestBooksAgainstModel(t *testing.T) {
	for _, wide := range []bool{false, true} {
		name := "narrow"
		if wide {
			name = "wide"
		}
		t.Run(name, func(t *testing.T) { booksAgainstModel(t, wide) })
	}
}

func booksAgainstModel(t *testing.T, wide bool) {
	type mo struct {
		locate        uint16
		side          byte
		shares, price uint32
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const capacity = 64
	b := NewBooks(capacity)
	model := map[uint64]mo{}
	refs := func() uint64 {
		r := uint64(rng.IntN(100))
		if wide && rng.IntN(2) == 0 {
			switch rng.IntN(3) {
			case 0:
				return wideRef - 50 + r // both sides of the boundary
			case 1:
				return 1<<63 | r
			default:
				return math.MaxUint64 - r
			}
		}
		if rng.IntN(2) == 0 {
			return r // neighbours share a run of slots
		}
		return r * 1024 // multiples of 1024 collide more
	}
	locates := []uint16{0, 1, math.MaxUint16}
	for step := 0; step < 200000; step++ {
		ref := refs()
		o, live := model[ref]
		locate := locates[rng.IntN(len(locates))]
		if live && rng.IntN(8) != 0 {
			locate = o.locate
		}
		shares := uint32(1 + rng.IntN(300))
		px := uint32(100 + rng.IntN(10))
		// want is the result the model expects: an event on an order names
		// it first (Unknown, WrongStock), then its shares (Excess).
		var res, want Result
		switch {
		case !live:
			want = Unknown
		case o.locate != locate:
			want = WrongStock
		}
		var got Order
		op := rng.IntN(5)
		switch op {
		case 0:
			side := byte("BS"[rng.IntN(2)])
			res = b.Add(locate, ref, side, shares, px)
			switch {
			case live:
				want = Duplicate
			case len(model) >= capacity:
				want = Full
			default:
				want = OK
				model[ref] = mo{locate, side, shares, px}
			}
		case 1, 2:
			if op == 1 {
				got, res = b.Execute(locate, ref, shares)
			} else {
				got, res = b.Cancel(locate, ref, shares)
			}
			if want == OK {
				if shares > o.shares {
					want = Excess
				}
				if shares >= o.shares {
					delete(model, ref)
				} else {
					left := o
					left.shares -= shares
					model[ref] = left
				}
			}
		case 3:
			got, res = b.Delete(locate, ref)
			if want == OK {
				delete(model, ref)
			}
		case 4:
			nref := refs()
			got, res = b.Replace(locate, ref, nref, shares, px)
			if want == OK {
				delete(model, ref)
				if _, dup := model[nref]; dup {
					want = Duplicate
				} else {
					model[nref] = mo{locate, o.side, shares, px}
				}
			}
		}
		if res != want {
			t.Fatalf("step %d: op %d on ref %d (live %v): result %v, want %v", step, op, ref, live, res, want)
		}
		// An event on a live order of its stock returns the order as it
		// was; one that was refused returns none.
		if op != 0 {
			wantOrder := Order{}
			if res == OK || res == Excess || (op == 4 && res == Duplicate) {
				wantOrder = Order{Ref: ref, Shares: o.shares, Price: o.price, Locate: o.locate, Side: o.side}
			}
			if got != wantOrder {
				t.Fatalf("step %d: op %d on ref %d returned %+v, want %+v", step, op, ref, got, wantOrder)
			}
		}
		if b.Orders() != len(model) {
			t.Fatalf("step %d: %d orders, model %d", step, b.Orders(), len(model))
		}
		if step%97 != 0 {
			continue
		}
		levels := map[[3]uint64]Level{}
		for r, m := range model {
			got, ok := b.Order(r)
			if !ok || got.Ref != r || got.Locate != m.locate || got.Side != m.side || got.Shares != m.shares || got.Price != m.price {
				t.Fatalf("step %d: order %d = %+v %v, model %+v", step, r, got, ok, m)
			}
			k := [3]uint64{uint64(m.locate), uint64(m.side), uint64(m.price)}
			l := levels[k]
			l.Price, l.Orders, l.Shares = m.price, l.Orders+1, l.Shares+uint64(m.shares)
			levels[k] = l
		}
		n := 0
		for _, locate := range locates {
			for _, side := range []byte("BS") {
				ls := b.Levels(locate, side, nil)
				for i, l := range ls {
					if i > 0 && (l.Price > ls[i-1].Price) == (side == 'B') {
						t.Fatalf("step %d: %c levels out of order: %v", step, side, ls)
					}
					if levels[[3]uint64{uint64(locate), uint64(side), uint64(l.Price)}] != l {
						t.Fatalf("step %d: level %+v, model %+v", step, l, levels[[3]uint64{uint64(locate), uint64(side), uint64(l.Price)}])
					}
					n++
				}
			}
		}
		if n != len(levels) {
			t.Fatalf("step %d: %d levels, model %d", step, n, len(levels))
		}
	}
	if b.HighWater() != capacity {
		t.Errorf("high water %d, want the capacity %d", b.HighWater(), capacity)
	}
}

// TestBooksNoAllocs: order events on a warm book do not allocate.
func TestBooksNoAllocs(t *testing.T) {
	b := NewBooks(1024)
	for i := range 100 {
		b.Add(1, uint64(i), "BS"[i%2], 100, uint32(1000+i))
	}
	ref := uint64(1000)
	const perRound = 100
	testenv.NoAllocs(t, "round of order events", 50, perRound, func() {
		for range perRound {
			b.Add(1, ref, 'B', 100, 1010)
			b.Execute(1, ref, 10)
			b.Cancel(1, ref, 10)
			b.Replace(1, ref, ref+1, 50, 1011)
			b.Delete(1, ref+1)
			_ = b.Top(1)
			ref += 2
		}
	})
}

// TestBooksBadSide: an add is refused, changing nothing, for every side
// byte but 'B' and 'S', and taken for those two (validSide tests without a
// comparison per side).
func TestBooksBadSide(t *testing.T) {
	b := NewBooks(1024)
	for v := range 256 {
		side := byte(v)
		res := b.Add(7, uint64(v), side, 100, 1000)
		want := BadSide
		if side == 'B' || side == 'S' {
			want = OK
		}
		if res != want {
			t.Fatalf("Add with side %q (%#x) = %v, want %v", side, side, res, want)
		}
	}
	if b.Orders() != 2 {
		t.Fatalf("%d live orders after the adds, want 2 (one a side)", b.Orders())
	}
	top := b.Top(7)
	if !top.HasBid || !top.HasAsk || top.BidSize != 100 || top.AskSize != 100 {
		t.Fatalf("top %+v, want 100 shares on each side", top)
	}
}

// TestLevelIndex: levelIndex finds every price of sides of every length
// up to 40 (bids ascending, asks descending, as the books keep them), and
// for every absent price the index where it belongs.
func TestLevelIndex(t *testing.T) {
	// Prices near 0 and near the largest Price(4): levelIndex compares
	// asks' prices inverted.
	for _, base := range []uint32{0, math.MaxUint32 - 10*40 - 20} {
		for n := range 41 {
			for _, bid := range []bool{true, false} {
				side := make([]Level, n)
				for i := range side {
					p := base + uint32(10+10*i) // present prices: base+10, base+20, ...
					if !bid {
						p = base + uint32(10+10*(n-1-i))
					}
					side[i] = Level{Price: p}
				}
				for d := uint32(0); d <= uint32(10*n+20); d++ {
					price := base + d
					want, found := 0, false
					for want < n && side[want].Price != price && (side[want].Price < price) == bid {
						want++
					}
					found = want < n && side[want].Price == price
					got, ok := levelIndex(side, price, bid)
					if got != want || ok != found {
						t.Fatalf("%d levels, bid %v, price %d: levelIndex %d, %v; want %d, %v", n, bid, price, got, ok, want, found)
					}
				}
			}
		}
	}
	// Sides that span the whole Price(4) range, 0 and the largest
	// included, with prices 2^31 and more apart (a comparison in 32
	// bits would wrap).
	span := []uint32{0, 1, 2, 1<<31 - 2, 1<<31 - 1, 1 << 31, 1<<31 + 1, math.MaxUint32 - 2, math.MaxUint32 - 1, math.MaxUint32}
	for lo := 0; lo <= 2; lo++ {
		for _, bid := range []bool{true, false} {
			asc := span[lo:]
			side := make([]Level, len(asc))
			for i, p := range asc {
				if bid {
					side[i] = Level{Price: p}
				} else {
					side[len(asc)-1-i] = Level{Price: p}
				}
			}
			for _, p := range span {
				for _, price := range []uint32{p - 1, p, p + 1} {
					want := 0
					for want < len(side) && side[want].Price != price && (side[want].Price < price) == bid {
						want++
					}
					found := want < len(side) && side[want].Price == price
					if got, ok := levelIndex(side, price, bid); got != want || ok != found {
						t.Fatalf("%d levels from %d to %d, bid %v, price %d: levelIndex %d, %v; want %d, %v",
							len(side), asc[0], asc[len(asc)-1], bid, price, got, ok, want, found)
					}
				}
			}
		}
	}
}
