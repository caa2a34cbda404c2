package archive

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
)

// TestRetrieve records two sessions of a channel in many small records,
// and a third session that ends in a loss record, through a real
// JetStream, and reads ranges back as a retransmission does: every message
// of a range byte for byte, wherever it starts and ends; a range past a
// session's end, or inside a loss record, is not archived; a range past
// the last record stored is not archived yet.
func TestRetrieve(t *testing.T) {
	_, nc := jetStreamServer(t)
	rec, err := NewRecorder(context.Background(), RecorderConfig{Feed: "R", Channels: 1, Conn: nc, RecordBytes: 70 << 10})
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := mold.ParseSession("00SEAAAAAA")
	sb, _ := mold.ParseSession("00SEBBBBBB")
	sc, _ := mold.ParseSession("00SECCCCCC")
	msgs := map[mold.Session]map[uint64][]byte{}
	var nextOf = map[mold.Session]uint64{}
	for _, s := range []mold.Session{sa, sb, sc} {
		n := map[mold.Session]int{sa: 3000, sb: 2000, sc: 100}[s]
		pkts, next := packets(t, s, 1, n)
		nextOf[s] = next
		msgs[s] = map[uint64][]byte{}
		for _, p := range pkts {
			pk, err := mold.Parse(p)
			if err != nil {
				t.Fatal(err)
			}
			it := pk.Iter()
			for m, seq, ok := it.Next(); ok; m, seq, ok = it.Next() {
				msgs[s][seq] = m
			}
			rec.Record(0, p)
			// Never faster than JetStream stores: no loss record here.
			for rec.Stats().PendingRecords >= 8 {
				time.Sleep(time.Millisecond)
			}
		}
		if s != sc {
			rec.Record(0, mold.AppendEndOfSession(nil, s, next))
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if st := rec.Stats(); st.LostPackets != 0 {
		t.Fatalf("recording lost %d packets: %+v", st.LostPackets, st)
	}
	// Session C ends in a loss record of 50 messages.
	var b builder
	b.buf, b.capBytes = make([]byte, HeaderLen), HeaderLen
	b.loss(0, sc, nextOf[sc], nextOf[sc]+50, 1)
	if _, err := nc.Request(Subject("R", 0), b.finish(), 5*time.Second); err != nil {
		t.Fatal(err)
	}

	r, err := NewRetriever(nc, "R")
	if err != nil {
		t.Fatal(err)
	}
	read := func(s mold.Session, seq uint64, n int) (int, error) {
		got := 0
		err := r.Read(0, s, seq, n, func(q uint64, m []byte) error {
			if want := seq + uint64(got); q != want || !bytes.Equal(m, msgs[s][q]) {
				t.Fatalf("session %s from %d: message %d (%x), want %d (%x)", s, seq, q, m, want, msgs[s][want])
			}
			got++
			return nil
		})
		return got, err
	}
	for _, c := range []struct {
		s      mold.Session
		seq    uint64
		n      int
		reason string
	}{
		{sa, 1, 10, "the first messages"},
		{sa, 7777, 10000, "across many records"},
		{sa, nextOf[sa] - 5, 5, "the session's last messages"},
		{sb, 1, 1, "the next session's first"},
		{sb, 12345, 3000, "the middle of the next session"},
		{sc, 2, int(nextOf[sc] - 2), "up to the loss record"},
	} {
		got, err := read(c.s, c.seq, c.n)
		if err != nil || got != c.n {
			t.Fatalf("%s (session %s, %d from %d): %d messages, %v", c.reason, c.s, c.n, c.seq, got, err)
		}
	}
	if _, err := read(sa, nextOf[sa]-5, 10); !errors.Is(err, ErrNotArchived) || errors.Is(err, recovery.ErrNotYetArchived) {
		t.Errorf("past the end of a session followed by another: %v, want not archived", err)
	}
	if _, err := read(sc, nextOf[sc]+10, 5); !errors.Is(err, ErrNotArchived) || !strings.Contains(err.Error(), "loss record") {
		t.Errorf("inside a loss record: %v, want not archived, naming the loss record", err)
	}
	if _, err := read(sc, nextOf[sc]+60, 5); !errors.Is(err, recovery.ErrNotYetArchived) {
		t.Errorf("past the last record stored: %v, want not archived yet", err)
	}
}
