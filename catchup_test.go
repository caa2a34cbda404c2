package tickcast

import (
	"errors"
	"io"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud"
)

// wireCount is a line that counts what it is asked to send.
type wireCount struct{ datagrams *int }

func (w wireCount) MaxDatagram() int { return 1472 }
func (w wireCount) Send(d [][]byte) error {
	*w.datagrams += len(d)
	return nil
}
func (w wireCount) Stats() ud.SendStats { return ud.SendStats{} }
func (w wireCount) Close() error        { return nil }

// stream records, per channel and sequence, the messages a publisher hands
// to OnPacket, with the host's own timestamps cleared.
type stream struct {
	t    *testing.T
	msgs []map[uint64]feed.Msg
	wire int
}

func newStreamPublisher(t *testing.T, channels int, sessions []mold.Session) (*Publisher, *stream) {
	t.Helper()
	st := &stream{t: t, msgs: make([]map[uint64]feed.Msg, channels)}
	for ch := range st.msgs {
		st.msgs[ch] = map[uint64]feed.Msg{}
	}
	pub, err := NewPublisher(PublisherConfig{
		Channels: channels, GroupA: netip.MustParseAddrPort("239.77.0.1:31001"), Sessions: sessions,
		NewSender: func(LineID) (ud.Sender, error) { return wireCount{&st.wire}, nil },
		OnPacket: func(ch int, _ mold.Session, _ uint64, pkt []byte) {
			p, err := mold.Parse(pkt)
			if err != nil {
				t.Fatal(err)
			}
			it := p.Iter()
			for b, seq, ok := it.Next(); ok; b, seq, ok = it.Next() {
				var m feed.Msg
				if err := m.Decode(b); err != nil {
					t.Fatal(err)
				}
				m.RecvNs, m.SendNs = 0, 0
				if _, dup := st.msgs[ch][seq]; dup {
					t.Fatalf("channel %d: sequence %d stored twice", ch, seq)
				}
				st.msgs[ch][seq] = m
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return pub, st
}

func publishN(t *testing.T, pub *Publisher, src feed.Source, n int) {
	t.Helper()
	var m feed.Msg
	for i := 0; i < n; i++ {
		if err := src.Next(&m); err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(&m, Now()); err != nil && !errors.Is(err, ErrUnknownInstrument) {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(Now()); err != nil {
		t.Fatal(err)
	}
}

// A publisher that joins a peer's sessions and catches up to its position
// silently then publishes the same messages at the same sequences as the
// peer, and sent nothing while catching up.
func TestCatchUpJoinsAPeersStream(t *testing.T) {
	const channels, total, peerAt = 4, 6000, 2500
	synA, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 7, Instruments: 40, Channels: channels, Count: total})
	synB, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 7, Instruments: 40, Channels: channels, Count: total})
	pubA, a := newStreamPublisher(t, channels, nil)
	publishN(t, pubA, synA, peerAt)
	target := make([]uint64, channels)
	for ch := range target {
		target[ch] = pubA.NextSeq(ch)
	}
	pubB, b := newStreamPublisher(t, channels, pubA.Sessions())
	if got, want := pubB.Sessions(), pubA.Sessions(); !slices.Equal(got, want) {
		t.Fatalf("sessions %v, want the peer's %v", got, want)
	}
	n, err := pubB.CatchUp(synB, target)
	if err != nil {
		t.Fatal(err)
	}
	if b.wire != 0 {
		t.Fatalf("catching up sent %d datagrams, want none", b.wire)
	}
	if n == 0 || pubB.Stats().CaughtUp != n || pubB.Stats().Packets != 0 {
		t.Fatalf("caught up %d messages, stats %+v", n, pubB.Stats())
	}
	for ch := range target {
		if got := pubB.NextSeq(ch); got < target[ch] {
			t.Fatalf("channel %d at %d after catching up, want at least %d", ch, got, target[ch])
		}
	}
	publishN(t, pubA, synA, total-peerAt)
	publishN(t, pubB, synB, total-int(n))
	if b.wire == 0 {
		t.Fatal("nothing sent after catching up")
	}
	for ch := range channels {
		if len(b.msgs[ch]) != len(a.msgs[ch]) || len(a.msgs[ch]) == 0 {
			t.Fatalf("channel %d: %d messages, the peer %d", ch, len(b.msgs[ch]), len(a.msgs[ch]))
		}
		for seq, ma := range a.msgs[ch] {
			if mb, ok := b.msgs[ch][seq]; !ok || mb != ma {
				t.Fatalf("channel %d sequence %d: %+v, the peer %+v", ch, seq, mb, ma)
			}
		}
	}
	// The source ends during a catch-up: io.EOF, all of it stored.
	synC, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 7, Instruments: 40, Channels: channels, Count: 100})
	pubC, c := newStreamPublisher(t, channels, nil)
	if _, err := pubC.CatchUp(synC, []uint64{1 << 40}); err != io.EOF {
		t.Fatalf("catching up past the source's end: %v, want io.EOF", err)
	}
	stored := 0
	for ch := range c.msgs {
		stored += len(c.msgs[ch])
	}
	if stored != int(pubC.Stats().Messages) || stored == 0 || c.wire != 0 {
		t.Fatalf("stored %d of %d messages, sent %d datagrams", stored, pubC.Stats().Messages, c.wire)
	}
}

func TestPublisherSessionsChecked(t *testing.T) {
	ns := func(LineID) (ud.Sender, error) { return wireCount{new(int)}, nil }
	ga := netip.MustParseAddrPort("239.77.0.1:31001")
	now := time.Now()
	s0, s1 := NewSession(0, now), NewSession(1, now)
	for _, sessions := range [][]mold.Session{{s0}, {s1, s0}} {
		_, err := NewPublisher(PublisherConfig{Channels: 2, GroupA: ga, NewSender: ns, Sessions: sessions})
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Field != "Sessions" {
			t.Errorf("sessions %v: %v, want an error naming Sessions", sessions, err)
		}
	}
}
