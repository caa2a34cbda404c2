package archive

import (
	"context"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
)

// packetsOf builds packets of session s carrying messages [first, next),
// per messages in each, as packets() fills them.
func packetsOf(t *testing.T, s mold.Session, first, next uint64, per int) [][]byte {
	t.Helper()
	b, err := mold.NewBuilder(1472)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for seq := first; seq < next; {
		b.Start(s, seq)
		msg := make([]byte, 40)
		for j := 0; j < per && seq < next; j++ {
			msg[0], msg[1] = byte(seq), byte(j)
			b.Add(msg)
			seq++
		}
		out = append(out, append([]byte(nil), b.Finish()...))
	}
	return out
}

// replayStats replays channel ch to its end, returning the packets
// delivered and the replay's counters.
func replayStats(t *testing.T, cfg ReplayConfig, ch int) ([][]byte, ReplayStats) {
	t.Helper()
	r, err := NewReplayReceiver(cfg, ch, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out [][]byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		done := r.Done()
		if err := r.Wait(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n := 0
		for s := r.Peek(n); s != nil; s = r.Peek(n) {
			out = append(out, append([]byte(nil), s.Data()...))
			n++
		}
		r.Release(n)
		if done && n == 0 {
			return out, r.ReplayStats()
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay not done within 20s: %d packets, %+v", len(out), r.ReplayStats())
		}
	}
}

// TestReplayHotHot: two recorders, as two hot-hot feed handlers, record
// the same session to one stream in packets of different sizes. Each
// loses a run of messages (no buffer free); B's run is held by A, and A's
// run by B but for a few messages that neither holds. The replay delivers
// every message held, and each at most once but for packets that overlap
// what was delivered; it counts as lost only the messages neither holds.
func TestReplayHotHot(t *testing.T) {
	_, nc := jetStreamServer(t)
	ctx := context.Background()
	newRec := func() *Recorder {
		r, err := NewRecorder(ctx, RecorderConfig{Feed: "T", Channels: 1, Conn: nc, RecordDelay: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := newRec(), newRec()
	s, _ := mold.ParseSession("HH")
	const end = 3001
	// A loses [1000, 1200); B loses [2000, 2300), of which A loses
	// [2100, 2150) too.
	record := func(r *Recorder, per int, lost ...uint64) {
		for seq := uint64(1); seq < end; {
			next := uint64(end)
			for i := 0; i < len(lost); i += 2 {
				if seq < lost[i] {
					next = min(next, lost[i])
				}
			}
			for _, p := range packetsOf(t, s, seq, next, per) {
				r.Record(0, p)
			}
			seq = next
			for i := 0; i < len(lost); i += 2 {
				if seq == lost[i] {
					give := hoard(t, r, 0)
					for _, p := range packetsOf(t, s, lost[i], lost[i+1], per) {
						r.Record(0, p)
					}
					give()
					seq = lost[i+1]
				}
			}
		}
		r.Record(0, mold.AppendEndOfSession(nil, s, end))
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	record(a, 7, 1000, 1200, 2100, 2150)
	record(b, 11, 2000, 2300)
	if sa, sb := a.Stats(), b.Stats(); sa.LossRecords != 2 || sb.LossRecords != 1 {
		t.Fatalf("loss records: A %+v, B %+v; want 2 and 1", sa, sb)
	}
	got, st := replayStats(t, ReplayConfig{Feed: "T", Conn: nc}, 0)
	seen := make(map[uint64]int)
	ends := 0
	for _, p := range got {
		h, err := mold.DecodeHeader(p)
		if err != nil {
			t.Fatal(err)
		}
		if h.IsEndOfSession() {
			ends++
		}
		for i := range uint64(h.Messages()) {
			seen[h.Seq+i]++
		}
	}
	var missing, twice int
	for seq := uint64(1); seq < end; seq++ {
		switch {
		case seen[seq] == 0 && (seq < 2100 || seq >= 2150):
			missing++
		case seen[seq] > 0 && seq >= 2100 && seq < 2150:
			t.Fatalf("message %d delivered; neither recorder held it", seq)
		case seen[seq] > 1:
			twice++
		}
	}
	t.Logf("%d packets delivered, %d messages twice (packets partly delivered already), %+v", len(got), twice, st)
	if missing != 0 || ends != 1 || st.LossRecords != 3 || st.LostMessages != 50 || st.Duplicates == 0 || twice > 2*(end/7) {
		t.Fatalf("missing %d, %d ends of session, %d messages twice, stats %+v; want every message held, one end, 50 lost, duplicates skipped",
			missing, ends, twice, st)
	}
}
