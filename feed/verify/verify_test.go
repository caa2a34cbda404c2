package verify

import (
	"errors"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
)

// TestVerifyEncodedStream encodes a synthetic stream with package feed's codec
// and checks every message with the verifier's own decoder.
func TestVerifyEncodedStream(t *testing.T) {
	cfg := feed.SyntheticConfig{Seed: 11, Instruments: 25, Channels: 3, Count: 30000}
	src, _ := feed.NewSynthetic(cfg)
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seq := map[int]uint64{}
	buf := make([]byte, feed.MaxLen)
	var m feed.Msg
	for src.Next(&m) == nil {
		m.SendNs = 12345 // timestamps are not checked
		n, err := m.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		c := feed.ChannelOf(src.Symbol(m.Instrument), cfg.Channels)
		seq[c]++
		if err := v.Check(c, seq[c], buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVerifyCatchesEveryByte flips each byte that carries a checked field of
// a quote, a trade and a definition, and expects a mismatch for each.
func TestVerifyCatchesEveryByte(t *testing.T) {
	cfg := feed.SyntheticConfig{Seed: 5, Instruments: 3, Channels: 1}
	v, _ := New(cfg)
	src := v.Source()
	var m feed.Msg
	kinds := map[feed.Type]bool{}
	for seq := uint64(1); len(kinds) < 3; seq++ {
		src.Expect(0, seq, &m)
		if kinds[m.Type] {
			continue
		}
		kinds[m.Type] = true
		buf := make([]byte, feed.MaxLen)
		n, _ := m.Encode(buf)
		buf = buf[:n]
		if err := v.Check(0, seq, buf); err != nil {
			t.Fatalf("seq %d unmodified: %v", seq, err)
		}
		for i := 0; i < n; i++ {
			if i >= 20 && i < 36 { // receive and send timestamps: not checked
				continue
			}
			if m.Type == feed.TypeDefinition && (i == 46 || i == 47) { // reserved
				continue
			}
			if m.Type == feed.TypeTrade && i >= 61 { // reserved
				continue
			}
			if i == 1 { // version: any >= 1 is accepted
				continue
			}
			buf[i] ^= 0x40
			err := v.Check(0, seq, buf)
			buf[i] ^= 0x40
			if err == nil {
				t.Fatalf("%s seq %d: flipping byte %d went unnoticed", m.Type, seq, i)
			}
		}
		var me *MismatchError
		buf[40] ^= 1
		if err := v.Check(0, seq, buf); !errors.As(err, &me) || me.Seq != seq {
			t.Fatalf("want MismatchError naming seq %d, got %v", seq, err)
		}
		buf[40] ^= 1
	}
}

func TestVerifyRejectsWrongPlace(t *testing.T) {
	cfg := feed.SyntheticConfig{Seed: 5, Instruments: 3, Channels: 2}
	v, _ := New(cfg)
	var m feed.Msg
	c := v.Source().ActiveChannels()[0]
	v.Source().Expect(c, 10, &m)
	buf := make([]byte, feed.MaxLen)
	n, _ := m.Encode(buf)
	if err := v.Check(c, 11, buf[:n]); err == nil {
		t.Fatal("message 10 accepted as message 11")
	}
	if err := v.Check(c, 0, buf[:n]); err == nil {
		t.Fatal("sequence 0 accepted")
	}
	if err := v.Check(99, 10, buf[:n]); err == nil {
		t.Fatal("channel 99 accepted")
	}
	if err := v.Check(c, 10, buf[:30]); err == nil {
		t.Fatal("short message accepted")
	}
}

func TestVerifyAllocatesNothing(t *testing.T) {
	cfg := feed.SyntheticConfig{Seed: 5, Instruments: 30, Channels: 1}
	v, _ := New(cfg)
	var m feed.Msg
	bufs := make([][]byte, 100)
	for i := range bufs {
		v.Source().Expect(0, uint64(i+1), &m)
		bufs[i] = make([]byte, feed.MaxLen)
		n, _ := m.Encode(bufs[i])
		bufs[i] = bufs[i][:n]
	}
	testenv.NoAllocs(t, "Check of a message", 100, len(bufs), func() {
		for i, b := range bufs {
			if err := v.Check(0, uint64(i+1), b); err != nil {
				panic(err)
			}
		}
	})
}

// TestVerifyConflatedFlag: the conflated flag is a mismatch unless
// AcceptConflated, and then only on a quote.
func TestVerifyConflatedFlag(t *testing.T) {
	cfg := feed.SyntheticConfig{Seed: 7, Instruments: 10, Channels: 1}
	v, _ := New(cfg)
	var m feed.Msg
	buf := make([]byte, feed.MaxLen)
	flagged := func(typ feed.Type) (uint64, []byte) {
		for seq := uint64(11); ; seq++ {
			v.Source().Expect(0, seq, &m)
			if m.Type == typ {
				m.Flags |= feed.FlagConflated
				n, _ := m.Encode(buf)
				return seq, buf[:n]
			}
		}
	}
	seq, q := flagged(feed.TypeQuote)
	if err := v.Check(0, seq, q); err == nil {
		t.Fatal("conflated quote accepted without AcceptConflated")
	}
	v.AcceptConflated()
	if err := v.Check(0, seq, q); err != nil {
		t.Fatalf("conflated quote with AcceptConflated: %v", err)
	}
	seq, tr := flagged(feed.TypeTrade)
	if err := v.Check(0, seq, tr); err == nil {
		t.Fatal("trade with the conflated flag accepted")
	}
}

// TestVerifyLastQuotes checks LastQuotes against a forward scan of the
// channel.
func TestVerifyLastQuotes(t *testing.T) {
	cfg := feed.SyntheticConfig{Seed: 3, Instruments: 40, Channels: 3}
	v, _ := New(cfg)
	var m feed.Msg
	for _, c := range v.Source().ActiveChannels() {
		for _, last := range []uint64{5, 100, 1234} {
			want := map[uint32]uint64{}
			for seq := uint64(1); seq <= last; seq++ {
				v.Source().Expect(c, seq, &m)
				if m.Type == feed.TypeQuote {
					want[m.Instrument] = seq
				}
			}
			got := v.LastQuotes(c, last)
			if len(got) != len(want) {
				t.Fatalf("channel %d last %d: %d instruments, want %d", c, last, len(got), len(want))
			}
			for inst, seq := range want {
				if got[inst] != seq {
					t.Errorf("channel %d last %d: instrument %d's last quote %d, want %d", c, last, inst, got[inst], seq)
				}
			}
		}
	}
}
