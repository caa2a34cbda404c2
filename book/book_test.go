package book

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
)

// encode returns a level delta message of instrument id.
func encode(t testing.TB, id uint32, flags feed.Flags, side feed.Side, action byte, px int64, size uint64, orders uint32) []byte {
	t.Helper()
	m := feed.Msg{Header: feed.Header{Type: feed.TypeLevelDelta, Flags: flags, Instrument: id},
		Delta: feed.LevelDelta{Side: side, Action: action, Px: px, Size: size, Orders: orders}}
	b := make([]byte, feed.LevelDeltaLen)
	if _, err := m.Encode(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// show renders side s of b as "px:size/orders" best first.
func show(b *Book, s feed.Side) string {
	var parts []string
	for _, l := range b.Depth(s, b.Len(s)) {
		parts = append(parts, fmt.Sprintf("%d:%d/%d", l.Px, l.Size, l.Orders))
	}
	return strings.Join(parts, " ")
}

func TestApplyAndQueries(t *testing.T) {
	var bs Books
	steps := []struct {
		msg  []byte
		bids string
		asks string
	}{
		{encode(t, 7, 0, feed.SideBuy, feed.ActionNew, 100, 10, 1), "100:10/1", ""},
		{encode(t, 7, 0, feed.SideBuy, feed.ActionNew, 102, 5, 1), "102:5/1 100:10/1", ""},
		{encode(t, 7, 0, feed.SideBuy, feed.ActionNew, 101, 7, 2), "102:5/1 101:7/2 100:10/1", ""},
		{encode(t, 7, 0, feed.SideSell, feed.ActionNew, 105, 3, 1), "102:5/1 101:7/2 100:10/1", "105:3/1"},
		{encode(t, 7, 0, feed.SideSell, feed.ActionNew, 104, 4, 1), "102:5/1 101:7/2 100:10/1", "104:4/1 105:3/1"},
		{encode(t, 7, 0, feed.SideBuy, feed.ActionChange, 101, 9, 3), "102:5/1 101:9/3 100:10/1", "104:4/1 105:3/1"},
		{encode(t, 7, 0, feed.SideBuy, feed.ActionDelete, 102, 0, 0), "101:9/3 100:10/1", "104:4/1 105:3/1"},
		{encode(t, 7, 0, feed.SideSell, feed.ActionDelete, 105, 0, 0), "101:9/3 100:10/1", "104:4/1"},
		// Not a level delta: nothing changes.
		{encode(t, 7, 0, feed.SideSell, feed.ActionDelete, 104, 0, 0)[:feed.HeaderLen-1], "101:9/3 100:10/1", "104:4/1"},
	}
	for i, s := range steps {
		err := bs.Apply(s.msg)
		if i == len(steps)-1 {
			if err == nil {
				t.Errorf("step %d: a message shorter than a header was taken", i)
			}
		} else if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		b := bs.Book(7)
		if got := show(b, feed.SideBuy); got != s.bids {
			t.Errorf("step %d: bids %q, want %q", i, got, s.bids)
		}
		if got := show(b, feed.SideSell); got != s.asks {
			t.Errorf("step %d: asks %q, want %q", i, got, s.asks)
		}
	}
	b := bs.Book(7)
	bid, hasBid, ask, hasAsk := b.BBO()
	if !hasBid || !hasAsk || bid != (Level{Px: 101, Size: 9, Orders: 3}) || ask != (Level{Px: 104, Size: 4, Orders: 1}) {
		t.Errorf("BBO %+v %v %+v %v", bid, hasBid, ask, hasAsk)
	}
	if l, ok := b.Level(feed.SideBuy, 1); !ok || l.Px != 100 {
		t.Errorf("Level(B, 1) = %+v %v", l, ok)
	}
	if _, ok := b.Level(feed.SideBuy, 2); ok {
		t.Error("Level(B, 2) of a two-level side")
	}
	if got := b.Depth(feed.SideBuy, 1); len(got) != 1 || got[0].Px != 101 {
		t.Errorf("Depth(B, 1) = %+v", got)
	}
	if b.Depth(feed.SideBuy, -1) != nil || b.Depth(feed.Side('X'), 3) != nil || b.Len(feed.Side('X')) != 0 {
		t.Error("bad side or count answered")
	}
	if bs.Book(8) != nil || bs.Book(1<<30) != nil {
		t.Error("book of an instrument never seen")
	}
	bs.Reset()
	if _, hasBid, _, hasAsk := b.BBO(); hasBid || hasAsk {
		t.Error("levels after Reset")
	}
}

// TestMisfits: deltas that do not fit the book are applied and reported.
func TestMisfits(t *testing.T) {
	var bs Books
	for _, c := range []struct {
		msg    []byte
		reason string
	}{
		{encode(t, 3, 0, feed.SideBuy, feed.ActionChange, 100, 1, 1), "does not hold"},
		{encode(t, 3, 0, feed.SideBuy, feed.ActionNew, 100, 2, 1), "holds"},
		{encode(t, 3, 0, feed.SideBuy, feed.ActionDelete, 99, 0, 0), "does not hold"},
		{encode(t, 3, 0, feed.Side('X'), feed.ActionNew, 99, 0, 0), "side"},
		{encode(t, 3, 0, feed.SideSell, 'Z', 99, 0, 0), "action"},
	} {
		err := bs.Apply(c.msg)
		var e *Error
		if !errors.As(err, &e) || e.Instrument != 3 || !strings.Contains(e.Reason, c.reason) {
			t.Errorf("%x: %v, want an *Error of instrument 3 saying %q", c.msg[feed.HeaderLen:feed.HeaderLen+2], err, c.reason)
		}
	}
	if got := show(bs.Book(3), feed.SideBuy); got != "100:2/1" {
		t.Errorf("bids %q after misfits, want the last state applied", got)
	}
}

// TestIncomplete: the book says whether the last delta came from an
// incomplete book.
func TestIncomplete(t *testing.T) {
	var bs Books
	bs.Apply(encode(t, 1, feed.FlagBookIncomplete, feed.SideBuy, feed.ActionNew, 5, 1, 1))
	if !bs.Book(1).Incomplete() {
		t.Error("not incomplete after a flagged delta")
	}
	bs.Apply(encode(t, 1, 0, feed.SideBuy, feed.ActionChange, 5, 2, 1))
	if bs.Book(1).Incomplete() {
		t.Error("incomplete after an unflagged delta")
	}
}

// TestAgainstModel: random deltas that fit, applied to Books and to a map
// of levels by price; the book is the map, sorted best first.
func TestAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var bs Books
	model := map[feed.Side]map[int64]Level{feed.SideBuy: {}, feed.SideSell: {}}
	for step := range 20000 {
		side := []feed.Side{feed.SideBuy, feed.SideSell}[r.IntN(2)]
		px := int64(r.IntN(40))
		_, held := model[side][px]
		action := feed.ActionNew
		switch {
		case held && r.IntN(2) == 0:
			action = feed.ActionDelete
		case held:
			action = feed.ActionChange
		}
		l := Level{Px: px, Size: uint64(r.IntN(1000)), Orders: uint32(1 + r.IntN(5))}
		if err := bs.Apply(encode(t, 1<<21, 0, side, action, px, l.Size, l.Orders)); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if action == feed.ActionDelete {
			delete(model[side], px)
		} else {
			model[side][px] = l
		}
		for _, s := range []feed.Side{feed.SideBuy, feed.SideSell} {
			pxs := slices.Sorted(maps.Keys(model[s]))
			if s == feed.SideBuy {
				slices.Reverse(pxs)
			}
			got := bs.Book(1<<21).Depth(s, 1000)
			if len(got) != len(pxs) {
				t.Fatalf("step %d side %c: %d levels, want %d", step, s, len(got), len(pxs))
			}
			for i, p := range pxs {
				if got[i] != model[s][p] {
					t.Fatalf("step %d side %c level %d: %+v, want %+v", step, s, i, got[i], model[s][p])
				}
			}
		}
	}
}

// TestApplyNoAllocs: once warm, Apply does not allocate.
func TestApplyNoAllocs(t *testing.T) {
	var bs Books
	var msgs [][]byte
	for id := uint32(0); id < 50; id++ {
		for px := int64(1); px <= 10; px++ {
			msgs = append(msgs, encode(t, id, 0, feed.SideBuy, feed.ActionNew, px, 1, 1),
				encode(t, id, 0, feed.SideSell, feed.ActionNew, px, 1, 1),
				encode(t, id, 0, feed.SideBuy, feed.ActionChange, px, 2, 1))
		}
		for px := int64(1); px <= 10; px++ {
			msgs = append(msgs, encode(t, id, 0, feed.SideBuy, feed.ActionDelete, px, 0, 0),
				encode(t, id, 0, feed.SideSell, feed.ActionDelete, 11-px, 0, 0))
		}
	}
	for _, m := range msgs {
		if err := bs.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	testenv.NoAllocs(t, "Apply", 20, len(msgs), func() {
		for range msgs {
			if err := bs.Apply(msgs[i%len(msgs)]); err != nil {
				t.Fatal(err)
			}
			i++
		}
	})
}
