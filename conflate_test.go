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
	m := feed.Msg{Header: feed.Header{Type: typ, Version: feed.Version, Instrument: inst, InstSeq: uint32(seq)}}
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
	for k := range 4 * instruments {
		m := feed.Msg{Header: feed.Header{Type: feed.TypeQuote, Version: feed.Version, Instrument: uint32(k%instruments + 1)}}
		if k%5 == 0 {
			m.Type = feed.TypeTrade
		}
		b := make([]byte, feed.MaxLen)
		n, _ := m.Encode(b)
		msgs = append(msgs, b[:n])
	}
	seq := uint64(0)
	testenv.NoAllocs(t, "conflating quotes", 100, len(msgs), func() {
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
