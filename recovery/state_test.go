package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
)

// encodeMsg encodes a message of type typ for instrument id; tag makes the
// bytes distinct.
func encodeMsg(t testing.TB, typ feed.Type, id uint32, tag int64) []byte {
	t.Helper()
	m := feed.Msg{Header: feed.Header{Type: typ, Instrument: id, InstSeq: uint32(tag), ExchangeNs: tag, SendNs: tag * 3}}
	switch typ {
	case feed.TypeDefinition:
		m.Def = feed.Definition{Symbol: feed.Symbol{'S', byte('A' + tag%26), ' ', ' ', ' ', ' ', ' ', ' '}, PriceScale: 4, RoundLot: 100}
	case feed.TypeQuote:
		m.Quote = feed.Quote{BidPx: tag, BidSize: 100, AskPx: tag + 1, AskSize: 200}
	case feed.TypeTrade:
		m.Trade = feed.Trade{Px: tag, Size: 5, MatchID: uint64(tag), Aggressor: feed.SideBuy}
	case feed.TypeStatus:
		m.Status = feed.Status{State: feed.StateTrading, Reason: [4]byte{'A', 'B', 'C', 'D'}}
	case feed.TypeTradeBust:
		m.Bust.MatchID = uint64(tag)
	case feed.TypeLevelDelta:
		m.Delta = feed.LevelDelta{Side: feed.SideSell, Action: feed.ActionChange, Px: tag}
	}
	b := make([]byte, feed.MaxLen)
	n, err := m.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func snapshotAll(t testing.TB, snap func(func([]byte) error) (mold.Session, uint64, error)) (mold.Session, uint64, [][]byte) {
	t.Helper()
	var out [][]byte
	sess, seq, err := snap(func(msg []byte) error {
		out = append(out, clone(msg))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess, seq, out
}

func TestStateSnapshot(t *testing.T) {
	var st state
	if _, _, err := st.snapshot(func([]byte) error { return nil }); err != ErrUnknownSession {
		t.Fatalf("snapshot of empty state: %v", err)
	}
	a := mustSession(t, "ST00000001")
	st.reset(a, 0)
	ids := []uint32{7, 0, 1<<20 - 1, 1 << 20, 5_000_000, 1<<32 - 1, 3, 2_000_000}
	types := []feed.Type{feed.TypeTrade, feed.TypeQuote, feed.TypeStatus, feed.TypeDefinition}
	last := map[[2]uint32][]byte{}
	seq := uint64(0)
	apply := func(msg []byte) {
		seq++
		st.apply(seq, msg)
	}
	for round := range 5 {
		for i, id := range ids {
			for j, typ := range types {
				if (i+j+round)%3 == 0 && round < 4 {
					continue // leave some slots empty for a while
				}
				if id == 3 && typ != feed.TypeQuote {
					continue // instrument with a quote only
				}
				msg := encodeMsg(t, typ, id, int64(round*1000+i*10+j))
				if round == 3 && typ == feed.TypeQuote {
					// A newer version, longer than the slot's buffer.
					msg = append(msg, bytes.Repeat([]byte{0xEE}, 50)...)
				}
				apply(msg)
				last[[2]uint32{id, uint32(typ)}] = msg
				// Ignored: busts, short level deltas, short and empty messages.
				apply(encodeMsg(t, feed.TypeTradeBust, id, 1))
				apply(encodeMsg(t, feed.TypeLevelDelta, id, 2)[:feed.LevelDeltaLen-1])
				apply(msg[:feed.HeaderLen-1])
				apply(nil)
			}
		}
		sess, gotSeq, got := snapshotAll(t, st.snapshot)
		if sess != a || gotSeq != seq {
			t.Fatalf("snapshot: session %v seq %d, want %v %d", sess, gotSeq, a, seq)
		}
		var want [][]byte
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		for _, id := range sorted {
			for _, typ := range []feed.Type{feed.TypeDefinition, feed.TypeStatus, feed.TypeQuote, feed.TypeTrade} {
				if m, ok := last[[2]uint32{id, uint32(typ)}]; ok {
					want = append(want, m)
				}
			}
		}
		if err := sameMessages(got, want); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	// fn's error stops the snapshot and is returned.
	stop := errors.New("stop")
	calls := 0
	if _, _, err := st.snapshot(func([]byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("fn error: %v after %d calls", err, calls)
	}
	// A new session resets the state.
	b := mustSession(t, "ST00000002")
	q := encodeMsg(t, feed.TypeQuote, 9, 1)
	st.reset(b, 0)
	st.apply(1, q)
	sess, gotSeq, got := snapshotAll(t, st.snapshot)
	if sess != b || gotSeq != 1 || sameMessages(got, [][]byte{q}) != nil {
		t.Errorf("after new session: %v %d %d messages", sess, gotSeq, len(got))
	}
}

// sameMessages compares two message lists exactly.
func sameMessages(got, want [][]byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d messages, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			return fmt.Errorf("message %d of %d: got %x, want %x", i, len(got), got[i], want[i])
		}
	}
	return nil
}

func TestStateApplyAllocs(t *testing.T) {
	var st state
	st.reset(mustSession(t, "SA00000001"), 0)
	var msgs [][]byte
	for id := uint32(1); id <= 100; id++ {
		for _, typ := range []feed.Type{feed.TypeDefinition, feed.TypeStatus, feed.TypeQuote, feed.TypeTrade, feed.TypeLevelDelta} {
			msgs = append(msgs, encodeMsg(t, typ, id, int64(id)))
		}
	}
	msgs = append(msgs, encodeMsg(t, feed.TypeQuote, 3_000_000, 1))
	// Levels that come and go at the top and bottom of both sides.
	for px := int64(1); px <= 20; px++ {
		for _, side := range []feed.Side{feed.SideBuy, feed.SideSell} {
			msgs = append(msgs, levelDelta(t, 5, side, feed.ActionNew, px, 1, 10), levelDelta(t, 5, side, feed.ActionDelete, 21-px, 0, 0))
		}
	}
	seq := uint64(0)
	for _, m := range msgs {
		seq++
		st.apply(seq, m)
	}
	i := 0
	const perRound = 1000
	testenv.NoAllocs(t, "Apply", 20, perRound, func() {
		for range perRound {
			seq++
			st.apply(seq, msgs[i%len(msgs)])
			i++
		}
	})
}

// levelDelta encodes a level delta of instrument id.
func levelDelta(t testing.TB, id uint32, side feed.Side, action byte, px int64, orders uint32, size uint64) []byte {
	t.Helper()
	m := feed.Msg{Header: feed.Header{Type: feed.TypeLevelDelta, Instrument: id, InstSeq: uint32(px), ExchangeNs: px},
		Delta: feed.LevelDelta{Side: side, Action: action, Orders: orders, Px: px, Size: size}}
	b := make([]byte, feed.MaxLen)
	n, err := m.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// TestStateLevels: random level deltas of two instruments; the snapshot
// carries, after each instrument's other messages, its levels as the
// deltas describe them: bids from the highest price, then asks from the
// lowest, each the last delta of its price with action N.
func TestStateLevels(t *testing.T) {
	var st state
	st.reset(mustSession(t, "SL00000001"), 0)
	r := rand.New(rand.NewPCG(3, 4))
	type key struct {
		id   uint32
		side feed.Side
	}
	model := map[key]map[int64][]byte{}
	seq := uint64(0)
	defs := map[uint32][]byte{}
	for _, id := range []uint32{4, 9} {
		defs[id] = encodeMsg(t, feed.TypeDefinition, id, int64(id))
		seq++
		st.apply(seq, defs[id])
	}
	for step := range 5000 {
		k := key{[]uint32{4, 9}[r.IntN(2)], []feed.Side{feed.SideBuy, feed.SideSell}[r.IntN(2)]}
		if model[k] == nil {
			model[k] = map[int64][]byte{}
		}
		px := int64(100 + r.IntN(30))
		action := []byte{feed.ActionNew, feed.ActionChange, feed.ActionDelete}[r.IntN(3)]
		msg := levelDelta(t, k.id, k.side, action, px, uint32(1+r.IntN(9)), uint64(r.IntN(1000)))
		if r.IntN(4) == 0 {
			// A newer version, some longer than a level entry's room:
			// kept whole, and never shared with a neighbouring level.
			msg = append(msg, bytes.Repeat([]byte{byte(step)}, r.IntN(2*levelCap))...)
		}
		seq++
		st.apply(seq, msg)
		if action == feed.ActionDelete {
			delete(model[k], px)
		} else {
			want := clone(msg)
			want[feed.HeaderLen+1] = feed.ActionNew
			model[k][px] = want
		}
		if step%50 != 0 {
			continue
		}
		_, _, got := snapshotAll(t, st.snapshot)
		var want [][]byte
		for _, id := range []uint32{4, 9} {
			want = append(want, defs[id])
			for _, side := range []feed.Side{feed.SideBuy, feed.SideSell} {
				pxs := slices.Sorted(maps.Keys(model[key{id, side}]))
				if side == feed.SideBuy {
					slices.Reverse(pxs)
				}
				for _, p := range pxs {
					want = append(want, model[key{id, side}][p])
				}
			}
		}
		if err := sameMessages(got, want); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

func BenchmarkSnapshot(b *testing.B) {
	c, err := NewChannel(StoreConfig{MaxMessages: 1 << 16, MaxBytes: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	st := newStream(b, "BS00000001", 1000, 14, true)
	for st.seq < 20_000 {
		first, pkt := st.packet(20, nil)
		if err := c.OnPacket(st.session, first, pkt); err != nil {
			b.Fatal(err)
		}
	}
	out := make([]byte, 0, 1<<20)
	msgs := 0
	fn := func(msg []byte) error {
		out = append(out, msg...)
		msgs++
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		out = out[:0]
		msgs = 0
		if _, _, err := c.Snapshot(fn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(msgs), "msgs/snapshot")
}

func BenchmarkApply(b *testing.B) {
	var st state
	s := newStream(b, "BP00000001", 1000, 15, true)
	st.reset(s.session, 0)
	var msgs [][]byte
	for s.seq < 10_000 {
		s.packet(20, func(_ uint64, msg []byte) { msgs = append(msgs, clone(msg)) })
	}
	seq := uint64(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		seq++
		st.apply(seq, msgs[i%len(msgs)])
	}
}

// BenchmarkApplyITCHDay applies the normalized messages of a generated ITCH
// day (8,000 stocks, 100,000 live orders, depth 10) as the feed handler's
// snapshot state does: most are level deltas, spread over thousands of
// instruments, so the cost is mostly memory traffic.
func BenchmarkApplyITCHDay(b *testing.B) {
	g, err := itchgen.New(itchgen.Config{Seed: 1, Stocks: 8000, Orders: 100_000, Messages: 400_000})
	if err != nil {
		b.Fatal(err)
	}
	var day bytes.Buffer
	if _, err := g.WriteTo(&day); err != nil {
		b.Fatal(err)
	}
	src, err := itch.NewSource(&day, itch.Config{Depth: 10})
	if err != nil {
		b.Fatal(err)
	}
	var msgs [][]byte
	var m feed.Msg
	var seq [1 << 16]uint32
	for src.Next(&m) == nil {
		seq[m.Instrument&0xffff]++
		m.InstSeq = seq[m.Instrument&0xffff]
		buf := make([]byte, feed.Size(m.Type))
		if _, err := m.Encode(buf); err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, buf)
	}
	var st state
	st.reset(mold.Session{}, 0)
	for i, msg := range msgs { // every instrument and level seen once
		st.apply(uint64(i+1), msg)
	}
	seqNo := uint64(len(msgs))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		seqNo++
		st.apply(seqNo, msgs[i%len(msgs)])
	}
}
