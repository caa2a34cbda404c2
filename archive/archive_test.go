package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
)

// jetStreamServer starts an embedded NATS server with JetStream in a
// temporary directory and connects to it.
func jetStreamServer(t testing.TB) (*natsconn.Server, *nats.Conn) {
	t.Helper()
	srv, err := natsconn.StartServer(natsconn.ServerConfig{JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return srv, nc
}

// packets builds n data packets of session s from sequence first, of 1 to
// 30 messages of 40 bytes each, and returns them and the next sequence.
func packets(t testing.TB, s mold.Session, first uint64, n int) ([][]byte, uint64) {
	t.Helper()
	b, err := mold.NewBuilder(1472)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	seq := first
	for i := range n {
		b.Start(s, seq)
		msg := make([]byte, 40)
		for j := range 1 + i%30 {
			msg[0], msg[1] = byte(seq), byte(j)
			if !b.Add(msg) {
				t.Fatal("a message did not fit")
			}
			seq++
		}
		out = append(out, append([]byte(nil), b.Finish()...))
	}
	return out, seq
}

// readAll reads channel ch's whole archive.
func readAll(t testing.TB, nc *nats.Conn, feed string, ch int) []Record {
	t.Helper()
	r, err := OpenReader(context.Background(), ReaderConfig{Feed: feed, Channel: ch, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []Record
	for {
		rec, _, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		// The record aliases the message; keep a copy.
		rec.body = append([]byte(nil), rec.body...)
		recs = append(recs, rec)
	}
}

// TestRecordAndRead records two channels' packets and an end of session
// through a real JetStream and reads back exactly the packets sent, in
// order, in records no larger than their limit.
func TestRecordAndRead(t *testing.T) {
	_, nc := jetStreamServer(t)
	rec, err := NewRecorder(context.Background(), RecorderConfig{Feed: "T", Channels: 2, Conn: nc, RecordBytes: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	s0, _ := mold.ParseSession("S0")
	s1, _ := mold.ParseSession("S1")
	want := make([][][]byte, 2)
	var next [2]uint64
	want[0], next[0] = packets(t, s0, 1, 5000)
	want[1], next[1] = packets(t, s1, 1, 3000)
	want[0] = append(want[0], mold.AppendEndOfSession(nil, s0, next[0]))
	for i := range max(len(want[0]), len(want[1])) {
		for ch := range 2 {
			if i < len(want[ch]) {
				rec.Record(ch, want[ch][i])
			}
		}
	}
	rec.Record(1, mold.AppendHeartbeat(nil, s1, next[1])) // not recorded
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	st := rec.Stats()
	if st.Packets != uint64(len(want[0])+len(want[1])) || st.LostPackets != 0 || st.Errors != 0 || st.PendingRecords != 0 {
		t.Fatalf("stats %+v, want %d packets stored, none lost", st, len(want[0])+len(want[1]))
	}
	for ch := range 2 {
		var got [][]byte
		for _, r := range readAll(t, nc, "T", ch) {
			if r.Kind != KindPackets || r.Channel != ch {
				t.Fatalf("channel %d: %v", ch, &r)
			}
			if err := r.EachPacket(func(p []byte) error { got = append(got, append([]byte(nil), p...)); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != len(want[ch]) {
			t.Fatalf("channel %d: read %d packets, recorded %d", ch, len(got), len(want[ch]))
		}
		for i := range got {
			if string(got[i]) != string(want[ch][i]) {
				t.Fatalf("channel %d packet %d differs", ch, i)
			}
		}
	}
}

// TestLossIsRecorded has JetStream refuse records (the stream deleted under
// the recorder): their packets are counted lost, and once the stream is
// back the archive holds a loss record covering exactly them, and the
// packets recorded after.
func TestLossIsRecorded(t *testing.T) {
	_, nc := jetStreamServer(t)
	var errs []error
	rec, err := NewRecorder(context.Background(), RecorderConfig{Feed: "T", Channels: 1, Conn: nc,
		RecordDelay: 5 * time.Millisecond, OnError: func(err error) { errs = append(errs, err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	s, _ := mold.ParseSession("S")
	a, next := packets(t, s, 1, 100)
	for _, p := range a {
		rec.Record(0, p)
	}
	waitFor(t, func() bool { return rec.Stats().Packets == 100 })
	js := jetStreamOf(t, nc)
	if err := js.DeleteStream(context.Background(), StreamName("T")); err != nil {
		t.Fatal(err)
	}
	b, next2 := packets(t, s, next, 50)
	for _, p := range b {
		rec.Record(0, p)
	}
	waitFor(t, func() bool { return rec.Stats().LostPackets == 50 })
	if err := ensureStream(context.Background(), js, "T", StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	c, _ := packets(t, s, next2, 20)
	for _, p := range c {
		rec.Record(0, p)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	st := rec.Stats()
	if st.LostMessages != next2-next || st.LossRecords != 1 || len(errs) == 0 {
		t.Fatalf("stats %+v, %d errors reported; want %d messages lost, one loss record, errors", st, len(errs), next2-next)
	}
	// The loss record may follow the packets recorded after the outage: a
	// loss record refused (the stream still gone) is tried again later.
	var loss, after []Record
	for _, r := range readAll(t, nc, "T", 0) {
		if r.Kind == KindLoss {
			loss = append(loss, r)
		} else if r.First >= next {
			after = append(after, r)
		}
	}
	if len(loss) != 1 || loss[0].First != next || loss[0].Next != next2 {
		t.Fatalf("loss records after the outage: %v; want one of messages %d..%d", loss, next, next2-1)
	}
	if len(after) == 0 || after[0].First != next2 {
		t.Fatalf("packets after the outage: %v, want packets from %d", after, next2)
	}
	t.Logf("errors reported: %v", errors.Join(errs...))
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func jetStreamOf(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestCorruptRecordReported stores a record with one bit flipped between
// two good ones: the reader reports it as a *CorruptRecordError naming its
// place in the stream and goes on, and a replay skips it, counting it,
// reporting it, and delivering the good records' packets only.
func TestCorruptRecordReported(t *testing.T) {
	_, nc := jetStreamServer(t)
	ctx := context.Background()
	js := jetStreamOf(t, nc)
	if err := ensureStream(ctx, js, "T", StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	s, _ := mold.ParseSession("S")
	a, next := packets(t, s, 1, 10)
	b, next2 := packets(t, s, next, 10)
	c, _ := packets(t, s, next2, 10)
	bad := record(t, 0, s, b)
	bad[HeaderLen+30] ^= 0x10
	var seqs []uint64
	for _, rec := range [][]byte{record(t, 0, s, a), bad, record(t, 0, s, c)} {
		ack, err := js.Publish(ctx, Subject("T", 0), rec)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	r, err := OpenReader(ctx, ReaderConfig{Feed: "T", Channel: 0, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		rec, seq, err := r.Next()
		if err == io.EOF {
			break
		}
		var ce *CorruptRecordError
		switch {
		case errors.As(err, &ce):
			if ce.StreamSeq != seqs[1] || seq != seqs[1] || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("corrupt record reported at %d (%v), stored at %d", ce.StreamSeq, err, seqs[1])
			}
			kinds = append(kinds, "corrupt")
		case err != nil:
			t.Fatal(err)
		default:
			kinds = append(kinds, fmt.Sprint(rec.First))
		}
	}
	r.Close()
	if want := fmt.Sprintf("[1 corrupt %d]", next2); fmt.Sprint(kinds) != want {
		t.Fatalf("read %v, want %s", kinds, want)
	}
	var reported []error
	got := replayAllWith(t, ReplayConfig{Feed: "T", Conn: nc, OnError: func(err error) { reported = append(reported, err) }}, 0, true)
	if len(got) != len(a)+len(c) || len(reported) != 1 || !strings.Contains(reported[0].Error(), fmt.Sprintf("message %d", seqs[1])) {
		t.Fatalf("replay: %d packets, reported %v; want %d packets and the corrupt record at message %d", len(got), reported, len(a)+len(c), seqs[1])
	}
}
