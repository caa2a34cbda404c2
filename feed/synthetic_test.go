package feed

import (
	"errors"
	"io"
	"testing"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/internal/testenv"
)

func TestSyntheticValidates(t *testing.T) {
	for _, cfg := range []SyntheticConfig{
		{Instruments: 0, Channels: 1},
		{Instruments: 10, Channels: 0},
		{Instruments: 26*26*26*26 + 1, Channels: 1},
	} {
		if _, err := NewSynthetic(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// TestSyntheticStream checks the stream's structure: count limit, definitions
// first, one message per instrument per round, per-instrument sequences
// without gaps, Next agreeing with Expect, and prices that stay sane.
func TestSyntheticStream(t *testing.T) {
	cfg := SyntheticConfig{Seed: 7, Instruments: 37, Channels: 4, Count: 20000}
	g, err := NewSynthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[int]uint64{}
	lastInst := map[uint32]uint32{}
	defined := map[uint32]bool{}
	var trades, quotes int
	var m, e Msg
	for {
		err := g.Next(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c := ChannelOf(g.Symbol(m.Instrument), cfg.Channels)
		seqs[c]++
		g.Expect(c, seqs[c], &e)
		e.RecvNs = m.RecvNs
		if m != e {
			t.Fatalf("channel %d seq %d: Next %+v, Expect %+v", c, seqs[c], m, e)
		}
		if m.RecvNs == 0 {
			t.Fatal("RecvNs not stamped")
		}
		if m.Type == TypeDefinition {
			defined[m.Instrument] = true
		} else if !defined[m.Instrument] {
			t.Fatalf("instrument %d: %s before its definition", m.Instrument, m.Type)
		}
		if want := lastInst[m.Instrument] + 1; m.InstSeq != want {
			t.Fatalf("instrument %d: inst seq %d, want %d", m.Instrument, m.InstSeq, want)
		}
		lastInst[m.Instrument] = m.InstSeq
		switch m.Type {
		case TypeQuote:
			quotes++
			if m.Quote.BidPx <= 0 || m.Quote.AskPx <= m.Quote.BidPx || m.Quote.BidSize == 0 {
				t.Fatalf("implausible quote %+v", m.Quote)
			}
		case TypeTrade:
			trades++
			if m.Trade.Px <= 0 || m.Trade.Size == 0 || m.Trade.Aggressor == SideUnknown {
				t.Fatalf("implausible trade %+v", m.Trade)
			}
		}
	}
	if g.Emitted() != cfg.Count {
		t.Fatalf("emitted %d, want %d", g.Emitted(), cfg.Count)
	}
	var sum uint64
	for c := 0; c < cfg.Channels; c++ {
		if seqs[c] != g.ChannelCount(c) {
			t.Fatalf("channel %d: %d messages, ChannelCount says %d", c, seqs[c], g.ChannelCount(c))
		}
		sum += seqs[c]
	}
	if sum != cfg.Count || len(defined) != cfg.Instruments {
		t.Fatalf("sum %d, defined %d", sum, len(defined))
	}
	if trades < 3000 || quotes < 12000 {
		t.Fatalf("mix: %d trades, %d quotes", trades, quotes)
	}
}

// TestSyntheticDeterministic: the same configuration gives the same stream;
// another seed gives another.
func TestSyntheticDeterministic(t *testing.T) {
	cfg := SyntheticConfig{Seed: 1, Instruments: 10, Channels: 3}
	a, _ := NewSynthetic(cfg)
	b, _ := NewSynthetic(cfg)
	cfg.Seed = 2
	c, _ := NewSynthetic(cfg)
	var ma, mb, mc Msg
	differ := 0
	for i := 0; i < 1000; i++ {
		a.Next(&ma)
		b.Next(&mb)
		c.Next(&mc)
		ma.RecvNs, mb.RecvNs, mc.RecvNs = 0, 0, 0
		if ma != mb {
			t.Fatalf("message %d differs between identical sources", i)
		}
		if ma != mc {
			differ++
		}
	}
	if differ < 900 {
		t.Fatalf("only %d of 1000 messages differ between seeds", differ)
	}
}

// TestSyntheticRoundPermutes: each round visits every instrument of the
// channel once, and consecutive rounds use different orders.
func TestSyntheticRoundPermutes(t *testing.T) {
	g, _ := NewSynthetic(SyntheticConfig{Seed: 3, Instruments: 50, Channels: 1})
	ids := g.ChannelInstruments(0)
	n := uint64(len(ids))
	var m Msg
	var prevOrder []uint32
	sameOrder := 0
	for round := uint64(0); round < 20; round++ {
		seen := map[uint32]bool{}
		var order []uint32
		for p := uint64(0); p < n; p++ {
			g.Expect(0, n+1+round*n+p, &m)
			if seen[m.Instrument] {
				t.Fatalf("round %d: instrument %d twice", round, m.Instrument)
			}
			seen[m.Instrument] = true
			order = append(order, m.Instrument)
		}
		if prevOrder != nil && equalIDs(order, prevOrder) {
			sameOrder++
		}
		prevOrder = order
	}
	if sameOrder > 1 {
		t.Fatalf("%d consecutive rounds had the same order", sameOrder)
	}
}

func equalIDs(a, b []uint32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSyntheticWalks: a price moves, but not wildly, from round to round.
func TestSyntheticWalks(t *testing.T) {
	g, _ := NewSynthetic(SyntheticConfig{Seed: 9, Instruments: 1, Channels: 1})
	prevBid, _ := g.touch(1, 0)
	first := prevBid
	moved, maxStep := 0, int64(0)
	for r := uint64(1); r < 5000; r++ {
		bid, ask := g.touch(1, r)
		if ask <= bid || bid <= 0 {
			t.Fatalf("round %d: bid %d ask %d", r, bid, ask)
		}
		d := bid - prevBid
		if d < 0 {
			d = -d
		}
		if d > 0 {
			moved++
		}
		maxStep = max(maxStep, d)
		prevBid = bid
	}
	if moved < 1000 {
		t.Fatalf("price moved in only %d of 5000 rounds", moved)
	}
	if maxStep > first/5 {
		t.Fatalf("largest one-round move %d ticks on a price of %d ticks", maxStep, first)
	}
}

func TestSyntheticNextAllocatesNothing(t *testing.T) {
	g, _ := NewSynthetic(SyntheticConfig{Seed: 1, Instruments: 100, Channels: 4})
	var m Msg
	const perRound = 1000
	testenv.NoAllocs(t, "Next", 20, perRound, func() {
		for range perRound {
			g.Next(&m)
		}
	})
}

func BenchmarkSyntheticNext(b *testing.B) {
	g, _ := NewSynthetic(SyntheticConfig{Seed: 1, Instruments: 1000, Channels: 8})
	var m Msg
	b.ReportAllocs()
	for b.Loop() {
		g.Next(&m)
	}
}

// TestSyntheticRandomAccess: Expect gives the same message whether the
// stream is walked in order (the walk cache warm) or visited at random
// (cold or jumping), so it really is a function of (channel, sequence).
func TestSyntheticRandomAccess(t *testing.T) {
	cfg := SyntheticConfig{Seed: 99, Instruments: 7, Channels: 2}
	seqGen, _ := NewSynthetic(cfg)
	randGen, _ := NewSynthetic(cfg)
	c := seqGen.ActiveChannels()[0]
	want := make([]Msg, 20000)
	for i := range want {
		seqGen.Expect(c, uint64(i+1), &want[i])
	}
	rng := uint64(12345)
	var got Msg
	for k := 0; k < 20000; k++ {
		rng = rng*6364136223846793005 + 1442695040888963407
		i := rng >> 33 % uint64(len(want))
		got = Msg{}
		randGen.Expect(c, i+1, &got)
		if got != want[i] {
			t.Fatalf("seq %d: random access %+v, in order %+v", i+1, got, want[i])
		}
	}
}

func TestSyntheticConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   SyntheticConfig
		field string
	}{
		{SyntheticConfig{Instruments: 0, Channels: 4}, "Instruments"},
		{SyntheticConfig{Instruments: MaxSyntheticInstruments + 1, Channels: 4}, "Instruments"},
		{SyntheticConfig{Instruments: 10, Channels: 0}, "Channels"},
		{SyntheticConfig{Instruments: 10, Channels: config.MaxChannels + 1}, "Channels"},
	} {
		_, err := NewSynthetic(tc.cfg)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Struct != "SyntheticConfig" || ce.Field != tc.field {
			t.Errorf("NewSynthetic(%+v) = %v, want a *config.Error naming %s", tc.cfg, err, tc.field)
		}
	}
}
