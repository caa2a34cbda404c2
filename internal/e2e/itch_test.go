package e2e

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestITCHSnippetReachesSubscriber publishes the real ITCH snippet as fast
// as possible; a subscriber on every channel sees its provisional
// definitions, quotes and trades, each instrument's definition first.
func TestITCHSnippetReachesSubscriber(t *testing.T) {
	snippet, err := filepath.Abs("../../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50")
	if err != nil {
		t.Fatal(err)
	}
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := start(t, ctx, subscriberBin, "--format", "json", "--recovery=false", "--channels", "4", "--group", ga, "--idle-timeout", "3s")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	// --depth 0: the independent decode below models quotes and trades,
	// not level deltas (book/ checks those against the books).
	fh := start(t, ctx, feedhandlerBin, "--source", "itch:"+snippet, "--depth", "0", "--rate", "0", "--channels", "4", "--group", ga)
	if code := fh.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	fs := fh.summary(t)
	code := sub.wait(t, 20*time.Second)
	sum := sub.summary(t)
	if code != 0 || sum["exit_reason"] != "end-of-session" || num(t, sum, "missing") != 0 {
		t.Fatalf("subscriber exit %d, summary %v\n%s", code, sum, tail(sub.stderr.String()))
	}
	// What the snippet must normalize to, worked out from the independent
	// decode of the same file (testdata/itch/README.md) by the rules of
	// feed/itch's documentation, not by feed/itch.
	want := itchReference(t, "../../testdata/itch/12302019_SNIPPET.decoded.csv")
	t.Logf("expected from the independent decode: %+v", want)
	if num(t, fs, "messages") != want.total() || num(t, fs, "unknown_instrument") != 0 {
		t.Fatalf("feedhandler summary %v, want %d messages (%+v)", fs, want.total(), want)
	}
	types := map[string]int{}
	defined := map[float64]bool{}
	lines := strings.Split(strings.TrimSpace(sub.stdout.String()), "\n")
	for _, l := range lines[:len(lines)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		typ, inst := m["type"].(string), m["instrument"].(float64)
		types[typ]++
		flags, _ := m["flags"].(string)
		// A mid-day snippet with no stock directory: every definition is
		// provisional and every quote comes from an incomplete book.
		if typ == "definition" && !strings.Contains(flags, "provisional") {
			t.Errorf("definition of instrument %v not flagged provisional: %q", inst, flags)
		}
		if typ == "quote" && !strings.Contains(flags, "book_incomplete") {
			t.Errorf("quote of instrument %v not flagged book_incomplete: %q", inst, flags)
		}
		if typ == "definition" {
			defined[inst] = true
		} else if !defined[inst] {
			t.Errorf("%s of instrument %v before its definition", typ, inst)
		}
	}
	t.Logf("subscriber saw %v", types)
	if types["definition"] != want.definitions || types["quote"] != want.quotes || types["trade"] != want.trades ||
		types["status"] != want.statuses || uint64(len(lines)-1) != num(t, sum, "received") {
		t.Errorf("subscriber saw %v in %d lines, summary %v; want %+v", types, len(lines)-1, sum, want)
	}
}

// itchCounts are the normalized messages an ITCH input yields, by type.
type itchCounts struct {
	definitions, statuses, quotes, trades int
}

func (c itchCounts) total() uint64 {
	return uint64(c.definitions + c.statuses + c.quotes + c.trades)
}

// itchReference works out the normalized messages of an ITCH input from an
// independent decode of it, a CSV of every field of every message (made by
// the Open Markets Initiative's Wireshark dissector), by the rules that
// feed/itch documents, with order books of its own:
//   - a stock's first message with a stock field defines it (provisionally:
//     the CSV holds no stock directory);
//   - system event S: a status for every stock defined so far;
//   - A F add, E C X D U on an order the input added: a quote whenever the
//     stock's best bid or ask price or size changed; events on orders the
//     input never added change nothing;
//   - E on a known order, C printable 'Y' on a known order, P, and Q of
//     more than zero shares: a trade;
//   - I: nothing but the definition.
//
// A message type it does not model fails the test.
func itchReference(t *testing.T, path string) itchCounts {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	type order struct {
		locate int
		side   string
		price  int64
		shares int64
	}
	type top struct{ bid, bidSize, ask, askSize int64 }
	var (
		c       itchCounts
		defined = map[int]bool{}
		orders  = map[uint64]*order{}
		levels  = map[int]map[string]map[int64]int64{} // locate → side → price → shares
	)
	bestOf := func(locate int) top {
		var tp top
		for px, sh := range levels[locate]["B"] {
			if tp.bidSize == 0 || px > tp.bid {
				tp.bid, tp.bidSize = px, sh
			}
		}
		for px, sh := range levels[locate]["S"] {
			if tp.askSize == 0 || px < tp.ask {
				tp.ask, tp.askSize = px, sh
			}
		}
		return tp
	}
	move := func(o *order, shares int64) {
		if levels[o.locate] == nil {
			levels[o.locate] = map[string]map[int64]int64{"B": {}, "S": {}}
		}
		side := levels[o.locate][o.side]
		if side[o.price] += shares; side[o.price] == 0 {
			delete(side, o.price)
		}
	}
	for _, r := range rows[1:] {
		field := func(name string) string { return r[col[name]] }
		integer := func(name string) int64 {
			v, err := strconv.ParseInt(field(name), 10, 64)
			if err != nil {
				t.Fatalf("message %s: %s: %v", field("moldseq"), name, err)
			}
			return v
		}
		price := func(name string) int64 { // shown divided by 10^4
			v, err := strconv.ParseFloat(field(name), 64)
			if err != nil {
				t.Fatalf("message %s: %s: %v", field("moldseq"), name, err)
			}
			return int64(math.Round(v * 1e4))
		}
		typ, locate := field("type"), int(integer("stocklocate"))
		if field("stock") != "" && !defined[locate] {
			defined[locate] = true
			c.definitions++
		}
		var changed *order // the order whose book the message changed
		var before top
		switch typ {
		case "S":
			c.statuses += len(defined)
		case "A", "F":
			o := &order{locate: locate, side: field("buysellindicator"), price: price("price"), shares: integer("shares")}
			before, changed = bestOf(locate), o
			orders[uint64(integer("orderreferencenumber"))] = o
			move(o, o.shares)
		case "E", "C", "X", "D":
			ref := uint64(integer("orderreferencenumber"))
			o := orders[ref]
			if o == nil {
				break
			}
			before, changed = bestOf(o.locate), o
			off := o.shares
			switch typ {
			case "E", "C":
				off = integer("executedshares")
			case "X":
				off = integer("canceledshares")
			}
			move(o, -off)
			if o.shares -= off; o.shares == 0 {
				delete(orders, ref)
			}
			if typ == "E" || typ == "C" && field("printable") == "Y" {
				c.trades++
			}
		case "U":
			ref := uint64(integer("originalorderreferencenumber"))
			o := orders[ref]
			if o == nil {
				break
			}
			before, changed = bestOf(o.locate), o
			move(o, -o.shares)
			delete(orders, ref)
			n := &order{locate: o.locate, side: o.side, price: price("price"), shares: integer("shares")}
			orders[uint64(integer("neworderreferencenumber"))] = n
			move(n, n.shares)
		case "P":
			c.trades++
		case "Q":
			if integer("crossshares") > 0 {
				c.trades++
			}
		case "I":
		default:
			t.Fatalf("message %s: type %s is not modelled here", field("moldseq"), typ)
		}
		if changed != nil && bestOf(changed.locate) != before {
			c.quotes++
		}
	}
	return c
}
