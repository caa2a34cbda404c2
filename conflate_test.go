package tickcast

import (
	"encoding/binary"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
)

// delivered is what a conflator handed on.
type delivered struct {
	seq     uint64
	typ     feed.Type
	inst    uint32
	flagged bool
}

// conflatorUnderTest returns a conflator with threshold 2 and the list it
// delivers into.
func conflatorUnderTest() (*conflator, *[]delivered) {
	out := &[]delivered{}
	c := newConflator(ConflateConfig{On: true, Threshold: 2}, func(seq uint64, msg []byte, line int, recvNs int64) {
		f := feed.Flags(binary.LittleEndian.Uint16(msg[2:]))
		*out = append(*out, delivered{seq, feed.Type(msg[0]), binary.LittleEndian.Uint32(msg[4:]), f&feed.FlagConflated != 0})
	})
	c.every = 1000 // no periodic delivery within these tests
	return c, out
}

// send offers message seq of type typ of instrument inst to c, and delivers
// it at once when c does not hold it, as subChannel.Release does.
func send(c *conflator, seq uint64, typ feed.Type, inst uint32) {
	offer(c, seq, feed.Msg{Header: feed.Header{Type: typ, Version: feed.Version, Instrument: inst, InstSeq: uint32(seq)}})
}

// offer offers message m, of sequence seq, to c, and delivers it at once
// when c does not hold it.
func offer(c *conflator, seq uint64, m feed.Msg) {
	buf := make([]byte, feed.MaxLen)
	n, err := m.Encode(buf)
	if err != nil {
		panic(err)
	}
	if !c.hold(seq, buf[:n], 0, 0) {
		c.deliver(seq, buf[:n], 0, 0)
	}
}

func TestConflatorRules(t *testing.T) {
	c, out := conflatorUnderTest()
	send(c, 1, feed.TypeDefinition, 1)
	send(c, 2, feed.TypeQuote, 1) // backlog 2: not past the threshold yet
	send(c, 3, feed.TypeQuote, 1) // held
	send(c, 4, feed.TypeQuote, 2) // instrument 2 has no definition: delivered
	send(c, 5, feed.TypeQuote, 1) // supersedes 3
	send(c, 6, feed.TypeTrade, 1) // delivered at once; 5 stays held
	send(c, 7, feed.TypeQuote, 1) // supersedes 5
	send(c, 8, feed.TypeStatus, 1)
	want := []delivered{
		{1, feed.TypeDefinition, 1, false}, {2, feed.TypeQuote, 1, false}, {4, feed.TypeQuote, 2, false},
		{6, feed.TypeTrade, 1, false}, {7, feed.TypeQuote, 1, true}, {8, feed.TypeStatus, 1, false},
	}
	check := func(want []delivered) {
		t.Helper()
		if len(*out) != len(want) {
			t.Fatalf("delivered %v, want %v", *out, want)
		}
		for i := range want {
			if (*out)[i] != want[i] {
				t.Fatalf("delivery %d: %v, want %v (all: %v)", i, (*out)[i], want[i], *out)
			}
		}
	}
	check(want)
	if c.conflated != 2 {
		t.Fatalf("conflated %d, want 2 (quotes 3 and 5)", c.conflated)
	}
	send(c, 9, feed.TypeQuote, 1) // held, supersedes nothing
	if c.pending() != 1 {
		t.Fatalf("pending %d, want 1", c.pending())
	}
	c.endPoll(false) // still behind: stays held
	if c.pending() != 1 {
		t.Fatalf("pending %d after a Poll still behind, want 1", c.pending())
	}
	c.endPoll(true) // caught up: delivered, unflagged, and quotes flow again
	want = append(want, delivered{9, feed.TypeQuote, 1, false})
	send(c, 10, feed.TypeQuote, 1)
	want = append(want, delivered{10, feed.TypeQuote, 1, false})
	check(want)
	if c.on || c.conflated != 2 {
		t.Fatalf("after catching up: on %v, conflated %d", c.on, c.conflated)
	}
}

// TestConflatorInterval: while a channel conflates, its held quotes go
// every Interval messages past the threshold, each instrument's latest, and
// not in between.
func TestConflatorInterval(t *testing.T) {
	var out []delivered
	c := newConflator(ConflateConfig{On: true, Threshold: 2, Interval: 4}.withDefaults(), func(seq uint64, msg []byte, line int, recvNs int64) {
		f := feed.Flags(binary.LittleEndian.Uint16(msg[2:]))
		out = append(out, delivered{seq, feed.Type(msg[0]), binary.LittleEndian.Uint32(msg[4:]), f&feed.FlagConflated != 0})
	})
	send(c, 1, feed.TypeDefinition, 1)
	send(c, 2, feed.TypeDefinition, 2) // backlog 2: the threshold
	for seq := uint64(3); seq <= 13; seq++ {
		send(c, seq, feed.TypeQuote, uint32(seq%2+1))
	}
	// Quotes alternate between instruments 2 (odd) and 1 (even), held from
	// 3 on. The message that takes the backlog to 2+4 (quote 6) first
	// delivers what is held, in the order first held: 5 (superseding 3),
	// then 4 (superseding nothing); 2+8 (quote 10) delivers 8 (superseding
	// 6) and 9 (superseding 7).
	want := []delivered{
		{1, feed.TypeDefinition, 1, false}, {2, feed.TypeDefinition, 2, false},
		{5, feed.TypeQuote, 2, true}, {4, feed.TypeQuote, 1, false},
		{8, feed.TypeQuote, 1, true}, {9, feed.TypeQuote, 2, true},
	}
	if len(out) != len(want) {
		t.Fatalf("delivered %v, want %v", out, want)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("delivery %d: %v, want %v (all: %v)", i, out[i], want[i], out)
		}
	}
	if c.pending() != 2 || c.conflated != 5 {
		t.Fatalf("pending %d, conflated %d: want 2 (quotes 12 and 13) and 5 (3, 6, 7, 10 and 11 superseded)", c.pending(), c.conflated)
	}
}

// TestConflatorSessionStart: a new session delivers what is held and
// forgets the definitions.
func TestConflatorSessionStart(t *testing.T) {
	c, out := conflatorUnderTest()
	for seq, typ := range []feed.Type{feed.TypeDefinition, feed.TypeQuote, feed.TypeQuote, feed.TypeQuote} {
		send(c, uint64(seq+1), typ, 3)
	}
	c.sessionStart()
	if len(*out) != 3 || !(*out)[2].flagged || (*out)[2].seq != 4 {
		t.Fatalf("delivered %v, want 1, 2 and 4 flagged", *out)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		send(c, seq, feed.TypeQuote, 3) // no definition in this session yet
	}
	if len(*out) != 7 || c.conflated != 1 {
		t.Fatalf("delivered %d, conflated %d: want 7 and 1", len(*out), c.conflated)
	}
}

// TestConflatorAllocs: holding, superseding and delivering quotes allocate
// nothing once the instruments are defined.
func TestConflatorAllocs(t *testing.T) {
	c := newConflator(ConflateConfig{On: true, Threshold: 1}, func(uint64, []byte, int, int64) {})
	c.every = 1 << 40
	const instruments = 50
	msgs := make([][]byte, 0, 4*instruments)
	for i := uint32(1); i <= instruments; i++ {
		send(c, uint64(i), feed.TypeDefinition, i)
	}
	actions := []byte{feed.ActionNew, feed.ActionChange, feed.ActionDelete}
	for k := range 4 * instruments {
		m := feed.Msg{Header: feed.Header{Type: feed.TypeQuote, Version: feed.Version, Instrument: uint32(k%instruments + 1)}}
		switch {
		case k%5 == 0:
			m.Type = feed.TypeTrade
		case k%5 == 1:
			m.Type = feed.TypeLevelDelta
			m.Delta = feed.LevelDelta{Side: feed.Side('B'), Action: actions[k%3], Px: int64(k % 7), Size: 100}
		}
		b := make([]byte, feed.MaxLen)
		n, _ := m.Encode(b)
		msgs = append(msgs, b[:n])
	}
	seq := uint64(0)
	testenv.NoAllocs(t, "conflating quotes and level deltas", 100, len(msgs), func() {
		for _, m := range msgs {
			seq++
			if !c.hold(seq, m, 0, 0) {
				c.deliver(seq, m, 0, 0)
			}
		}
		c.endPoll(seq%3 == 0)
	})
	if c.conflated == 0 {
		t.Fatal("nothing was conflated")
	}
}

// offerDelta offers level delta seq of inst to c, delivering it at once
// when c does not hold it.
func offerDelta(c *conflator, seq uint64, inst uint32, side feed.Side, action byte, px int64, size uint64) {
	offer(c, seq, feed.Msg{Header: feed.Header{Type: feed.TypeLevelDelta, Version: feed.Version, Instrument: inst, InstSeq: uint32(seq)},
		Delta: feed.LevelDelta{Side: side, Action: action, Px: px, Size: size}})
}

// TestConflatorLevels: held level deltas conflate to the latest state of
// each level (instrument, side, price), delivered as the action that
// brings the handler there from what it knew: a level created and deleted
// while held is delivered as nothing. Every delta offered is delivered,
// conflated or still held.
func TestConflatorLevels(t *testing.T) {
	type got struct {
		seq     uint64
		inst    uint32
		side    feed.Side
		action  byte
		px      int64
		size    uint64
		flagged bool
	}
	var out []got
	c := newConflator(ConflateConfig{On: true, Threshold: 2, Interval: 1000}.withDefaults(), func(seq uint64, msg []byte, line int, recvNs int64) {
		var m feed.Msg
		if err := m.Decode(msg); err != nil {
			t.Fatal(err)
		}
		if m.Type == feed.TypeLevelDelta {
			out = append(out, got{seq, m.Instrument, m.Delta.Side, m.Delta.Action, m.Delta.Px, m.Delta.Size, m.Flags&feed.FlagConflated != 0})
		}
	})
	bid, ask := feed.Side('B'), feed.Side('S')
	send(c, 1, feed.TypeDefinition, 1)
	send(c, 2, feed.TypeDefinition, 2) // backlog 2: conflating from the next
	offered := uint64(0)
	delta := func(seq uint64, inst uint32, side feed.Side, action byte, px int64, size uint64) {
		offered++
		offerDelta(c, seq, inst, side, action, px, size)
	}
	delta(3, 1, bid, feed.ActionNew, 100, 10)
	delta(4, 1, bid, feed.ActionChange, 100, 20) // new, then changed: new with size 20
	delta(5, 1, bid, feed.ActionNew, 101, 10)
	delta(6, 1, bid, feed.ActionDelete, 101, 0) // created and deleted: nothing
	delta(7, 1, bid, feed.ActionChange, 102, 30)
	delta(8, 1, bid, feed.ActionChange, 102, 40) // changed twice: the latest change
	delta(9, 1, bid, feed.ActionChange, 103, 30)
	delta(10, 1, bid, feed.ActionDelete, 103, 0) // changed, then deleted: deleted
	delta(11, 1, bid, feed.ActionDelete, 104, 0)
	delta(12, 1, bid, feed.ActionNew, 104, 50) // deleted, then back: changed
	delta(13, 1, ask, feed.ActionNew, 100, 60) // the other side's level at 100: its own
	delta(14, 2, bid, feed.ActionChange, 100, 70)
	if len(out) != 0 || c.pending() != 7 {
		t.Fatalf("while conflating: delivered %v, %d held; want nothing and 7 levels held", out, c.pending())
	}
	// A status of instrument 1 delivers its levels, in the order first
	// held, and leaves instrument 2's held.
	send(c, 15, feed.TypeStatus, 1)
	want := []got{
		{4, 1, bid, feed.ActionNew, 100, 20, true},
		{8, 1, bid, feed.ActionChange, 102, 40, true},
		{10, 1, bid, feed.ActionDelete, 103, 0, true},
		{12, 1, bid, feed.ActionChange, 104, 50, true},
		{13, 1, ask, feed.ActionNew, 100, 60, false},
	}
	if len(out) != len(want) {
		t.Fatalf("after instrument 1's status: delivered %v, want %v", out, want)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("delivery %d: %+v, want %+v (all: %+v)", i, out[i], want[i], out)
		}
	}
	if c.pending() != 1 {
		t.Fatalf("held after instrument 1's status: %d, want 1 (instrument 2's)", c.pending())
	}
	delta(16, 2, bid, feed.ActionChange, 100, 80)
	c.endPoll(true)
	want = append(want, got{16, 2, bid, feed.ActionChange, 100, 80, true})
	if len(out) != len(want) || out[len(out)-1] != want[len(want)-1] {
		t.Fatalf("after catching up: delivered %+v, want %+v last", out, want[len(want)-1])
	}
	if n := uint64(len(out)) + c.conflated + uint64(c.pending()); n != offered {
		t.Fatalf("delivered %d + conflated %d + held %d = %d, offered %d", len(out), c.conflated, c.pending(), n, offered)
	}
	// Caught up: deltas flow one by one again.
	delta(17, 1, bid, feed.ActionNew, 105, 1)
	if last := out[len(out)-1]; last.seq != 17 || last.action != feed.ActionNew || last.flagged {
		t.Fatalf("after catching up: %+v, want delta 17 delivered as it is", last)
	}
}
