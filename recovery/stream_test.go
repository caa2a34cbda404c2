package recovery

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
)

// stream makes the messages and packets of one channel for tests: the
// synthetic feed's messages (definitions, quotes, trades), encoded with
// feed.Msg.Encode, optionally mixed with statuses, trade busts, level deltas,
// longer messages of a "newer version", short and zero-length messages.
type stream struct {
	t       testing.TB
	syn     *feed.Synthetic
	ch      int
	ids     []uint32
	session mold.Session
	seq     uint64 // last sequence produced
	b       *mold.Builder
	m       feed.Msg
	buf     [feed.MaxLen + 64]byte
	rng     *rand.Rand
	mixed   bool // add other message kinds
	sendNs  int64
}

func newStream(t testing.TB, session string, instruments int, seed uint64, mixed bool) *stream {
	t.Helper()
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mold.NewBuilder(1400)
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{t: t, syn: syn, ch: 0, ids: syn.ChannelInstruments(0), b: b,
		rng: rand.New(rand.NewPCG(seed, 7)), mixed: mixed, sendNs: feed.SyntheticEpochNs}
	s.newSession(session)
	return s
}

func (s *stream) newSession(name string) {
	sess, err := mold.ParseSession(name)
	if err != nil {
		s.t.Fatal(err)
	}
	s.session = sess
	s.seq = 0
}

// message returns the bytes of the message with sequence seq (the next one)
// in s.buf. Synthetic messages come from Expect(ch, k) where k counts the
// synthetic messages; extra kinds are interleaved once the definitions are
// out.
func (s *stream) message(seq uint64) []byte {
	n := uint64(len(s.ids))
	if !s.mixed || seq <= n {
		return s.encode(seq)
	}
	switch r := s.rng.IntN(100); {
	case r < 4: // status
		s.m = feed.Msg{}
		s.m.Type = feed.TypeStatus
		s.m.Instrument = s.ids[s.rng.IntN(len(s.ids))]
		s.m.InstSeq = uint32(seq)
		s.m.Status = feed.Status{State: "HPQT"[s.rng.IntN(4)], Reason: [4]byte{'R', byte('A' + s.rng.IntN(26)), ' ', ' '}}
		return s.put()
	case r < 6: // trade bust: not part of a snapshot
		s.m = feed.Msg{}
		s.m.Type = feed.TypeTradeBust
		s.m.Instrument = s.ids[s.rng.IntN(len(s.ids))]
		s.m.Bust.MatchID = seq
		return s.put()
	case r < 9: // level delta: a new level at a new price
		s.m = feed.Msg{}
		s.m.Type = feed.TypeLevelDelta
		s.m.Instrument = s.ids[s.rng.IntN(len(s.ids))]
		s.m.Delta = feed.LevelDelta{Side: feed.SideBuy, Action: feed.ActionNew, Orders: 1, Px: int64(seq), Size: 100}
		return s.put()
	case r < 10: // zero-length message
		return s.buf[:0]
	case r < 11: // shorter than a header, looks like a quote
		b := s.encode(seq)
		return b[:20]
	case r < 14: // a newer version: longer, with trailing bytes
		b := s.encode(seq)
		l := len(b) + 1 + s.rng.IntN(40)
		for i := len(b); i < l; i++ {
			s.buf[i] = byte(seq + uint64(i))
		}
		s.buf[1] = 2
		return s.buf[:l]
	}
	return s.encode(seq)
}

func (s *stream) encode(seq uint64) []byte {
	s.syn.Expect(s.ch, seq, &s.m)
	s.m.RecvNs = s.sendNs - 1000
	return s.put()
}

func (s *stream) put() []byte {
	n, err := s.m.Encode(s.buf[:])
	if err != nil {
		s.t.Fatal(err)
	}
	return s.buf[:n]
}

// packet builds the next packet of up to max messages; each message is also
// passed to record (if not nil) with its sequence. The packet's bytes are
// valid until the next call.
func (s *stream) packet(max int, record func(seq uint64, msg []byte)) (firstSeq uint64, pkt []byte) {
	s.sendNs += 1000
	s.b.Start(s.session, s.seq+1)
	for s.b.Count() < max {
		seq := s.seq + 1
		msg := s.message(seq)
		if len(msg) >= feed.HeaderLen {
			feed.PutSendNs(msg, s.sendNs)
		}
		if !s.b.Add(msg) {
			if s.b.Count() == 0 {
				s.t.Fatalf("message of %d bytes does not fit an empty packet", len(msg))
			}
			// Put it back: the next packet regenerates a message for seq.
			break
		}
		s.seq = seq
		if record != nil {
			record(seq, msg)
		}
	}
	return s.b.FirstSeq(), s.b.Finish()
}

// rawPacket builds a packet of session at firstSeq carrying msgs.
func rawPacket(t testing.TB, session mold.Session, firstSeq uint64, msgs ...[]byte) []byte {
	t.Helper()
	b, err := mold.NewBuilder(65507)
	if err != nil {
		t.Fatal(err)
	}
	b.Start(session, firstSeq)
	for _, m := range msgs {
		if !b.Add(m) {
			t.Fatalf("message of %d bytes does not fit", len(m))
		}
	}
	return append([]byte(nil), b.Finish()...)
}

// setPacketSeq rewrites the first-sequence field of a packet in place.
func setPacketSeq(pkt []byte, seq uint64) {
	binary.BigEndian.PutUint64(pkt[mold.SessionLen:], seq)
}

func mustSession(t testing.TB, s string) mold.Session {
	t.Helper()
	sess, err := mold.ParseSession(s)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func clone(b []byte) []byte { return append([]byte{}, b...) }
