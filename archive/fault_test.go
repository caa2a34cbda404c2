package archive

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
)

// hoard takes every free buffer of channel ch, so that Record finds none,
// and returns a function that gives them back.
func hoard(t *testing.T, r *Recorder, ch int) func() {
	t.Helper()
	c := r.chans[ch]
	waitFor(t, func() bool { return r.Stats().PendingRecords == 0 })
	c.mu.Lock()
	r.handOver(c)
	c.mu.Unlock()
	waitFor(t, func() bool { return r.Stats().PendingRecords == 0 })
	var held []*outRecord
	for len(held) < r.cfg.Buffers {
		held = append(held, <-c.free)
	}
	return func() {
		for _, o := range held {
			c.free <- o
		}
	}
}

// lossSpans returns the loss records' ranges, by session, in the order
// read.
func lossSpans(recs []Record) []string {
	var out []string
	for _, r := range recs {
		if r.Kind == KindLoss {
			out = append(out, r.Session.String()+":"+itoa(r.First)+"-"+itoa(r.Next-1))
		}
	}
	return out
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestLossRunsAllWritten: while no buffer is free, packets of three runs
// are lost: a jump in a session and a new session break the runs. Once
// buffers are free again, with no further packet, each run is written as
// a loss record of exactly its messages. Then more runs than the queue
// holds: the runs beyond it widen the session's last run, so that the
// loss records still cover every message lost, and a run of a session
// with no run in a full queue is counted in UnwrittenLoss.
func TestLossRunsAllWritten(t *testing.T) {
	_, nc := jetStreamServer(t)
	rec, err := NewRecorder(context.Background(), RecorderConfig{Feed: "T", Channels: 1, Conn: nc, RecordDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	s1, _ := mold.ParseSession("S1")
	s2, _ := mold.ParseSession("S2")
	a, next := packets(t, s1, 1, 10)
	for _, p := range a {
		rec.Record(0, p)
	}
	give := hoard(t, rec, 0)
	run1, n1 := packets(t, s1, next, 5)   // lost
	run2, n2 := packets(t, s1, n1+100, 5) // lost, after a jump
	run3, n3 := packets(t, s2, 1, 5)      // lost, a new session
	for _, p := range append(append(run1, run2...), run3...) {
		rec.Record(0, p)
	}
	st := rec.Stats()
	if want := (n1 - next) + (n2 - n1 - 100) + (n3 - 1); st.LostPackets != 15 || st.LostMessages != want {
		t.Fatalf("stats %+v, want 15 packets and %d messages lost", st, want)
	}
	give()
	waitFor(t, func() bool { return rec.Stats().LossRecords == 3 })

	// More runs than the queue holds, in one session, then one run of a
	// third session.
	s3, _ := mold.ParseSession("S3")
	give = hoard(t, rec, 0)
	seq := n3 + 1000
	var nextLost uint64
	for range maxLossRuns + 3 {
		p, n := packets(t, s2, seq, 1)
		rec.Record(0, p[0])
		nextLost, seq = n, n+10
	}
	stray, _ := packets(t, s3, 1, 1)
	rec.Record(0, stray[0])
	if st := rec.Stats(); st.UnwrittenLoss != 1 {
		t.Fatalf("stats %+v: want the stray session's run counted unwritten", st)
	}
	give()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	got := lossSpans(readAll(t, nc, "T", 0))
	want := []string{"S1:" + itoa(next) + "-" + itoa(n1-1), "S1:" + itoa(n1+100) + "-" + itoa(n2-1), "S2:1-" + itoa(n3-1)}
	// The first maxLossRuns-1 runs exactly, the last one widened over the
	// rest, as one list in order.
	seq = n3 + 1000
	for i := range maxLossRuns {
		_, n := packets(t, s2, seq, 1)
		last := n - 1
		if i == maxLossRuns-1 {
			last = nextLost - 1
		}
		want = append(want, "S2:"+itoa(seq)+"-"+itoa(last))
		seq = n + 10
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("loss records\n got %v\nwant %v", got, want)
	}
}

// TestRecordAllocs pins Record at zero allocations per packet, recording
// and losing (no buffer free).
func TestRecordAllocs(t *testing.T) {
	_, nc := jetStreamServer(t)
	rec, err := NewRecorder(context.Background(), RecorderConfig{Feed: "T", Channels: 1, Conn: nc, RecordDelay: time.Minute, RecordBytes: 1<<20 - 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	s, _ := mold.ParseSession("S")
	pkts, _ := packets(t, s, 1, 400)
	i := 0
	if n := testing.AllocsPerRun(100, func() { rec.Record(0, pkts[i]); i++ }); n != 0 {
		t.Errorf("Record: %v allocations per packet, want 0", n)
	}
	give := hoard(t, rec, 0)
	defer give()
	if n := testing.AllocsPerRun(100, func() { rec.Record(0, pkts[i]); i += 2 }); n != 0 || rec.Stats().LostPackets == 0 {
		t.Errorf("Record with no buffer free: %v allocations per packet (%d lost), want 0", n, rec.Stats().LostPackets)
	}
}

// TestStorageFull records to a server whose JetStream may store 3 MiB:
// once it is full, records are refused as FaultStorageFull, with an error
// naming the stream and what it holds; their messages are counted lost.
// Loss records are tried and refused while it stays full; once the
// stream is purged, the loss records are stored, covering every message
// lost, and recording goes on.
func TestStorageFull(t *testing.T) {
	srv, err := natsconn.StartServer(natsconn.ServerConfig{JetStream: true, StoreDir: t.TempDir(), JetStreamMaxStore: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	var errs []*StoreError
	rec, err := NewRecorder(context.Background(), RecorderConfig{Feed: "T", Channels: 1, Conn: nc, RecordBytes: 96 << 10,
		RecordDelay: 5 * time.Millisecond, OnError: func(err error) {
			var se *StoreError
			if errors.As(err, &se) {
				mu.Lock()
				errs = append(errs, se)
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	s, _ := mold.ParseSession("S")
	seq := uint64(1)
	// About 60 KiB of packets a round: 3 MiB fill in some 50 rounds.
	for round := 0; rec.Stats().LostMessages == 0; round++ {
		if round == 200 {
			t.Fatalf("nothing lost after %d rounds: %+v", round, rec.Stats())
		}
		pkts, n := packets(t, s, seq, 60)
		for _, p := range pkts {
			rec.Record(0, p)
		}
		seq = n
		time.Sleep(10 * time.Millisecond)
	}
	// Some more while full, so that loss records are tried and refused.
	for range 5 {
		pkts, n := packets(t, s, seq, 60)
		for _, p := range pkts {
			rec.Record(0, p)
		}
		seq = n
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, func() bool { return rec.Stats().PendingRecords == 0 })
	full := rec.Stats()
	mu.Lock()
	first := errs[0]
	mu.Unlock()
	t.Logf("full: %+v\nfirst error: %v", full, first)
	if full.Errors == 0 || full.LostMessages == 0 || first.Fault != FaultStorageFull || first.Stream != StreamName("T") ||
		!strings.Contains(first.Error(), "insufficient resources") || !strings.Contains(first.Usage, "the stream holds") {
		t.Fatalf("stats %+v, first error %v: want records refused for full storage, named", full, first)
	}
	js := jetStreamOf(t, nc)
	st, err := js.Stream(context.Background(), StreamName("T"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, end := packets(t, s, seq, 20)
	for _, p := range after {
		rec.Record(0, p)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	final := rec.Stats()
	recs := readAll(t, nc, "T", 0)
	var lost, held uint64
	for _, r := range recs {
		if r.Kind == KindLoss {
			lost += r.Next - r.First
		} else {
			held += r.Next - r.First
		}
	}
	t.Logf("final %+v; after the purge the archive holds %d messages and loss records of %d", final, held, lost)
	if final.UnwrittenLoss != 0 || final.LossRecords == 0 || lost < final.LostMessages || held != end-seq {
		t.Fatalf("after the purge: loss records of %d messages (%d lost), %d messages held (want %d)", lost, final.LostMessages, held, end-seq)
	}
}
