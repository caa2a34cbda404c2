package archive

import (
	"context"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// TestReplaySealed records sealed packets of two sessions, one channel
// encrypted, with their key records, across key epochs; a replay delivers
// every packet opened, byte for byte the packets before they were sealed,
// in order, and a replay from SESSION:SEQ starts at the packet holding it.
func TestReplaySealed(t *testing.T) {
	_, nc := jetStreamServer(t)
	ctx := context.Background()
	rec, err := NewRecorder(ctx, RecorderConfig{Feed: "T", Channels: 2, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	plain := make([][][]byte, 2)
	for ch := range 2 {
		for i, name := range []string{"AAA", "BBB"} {
			s, _ := mold.ParseSession(name)
			secret := seal.NewSecret()
			sch, err := seal.NewSchedule(s, ch, secret, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if ch == 1 {
				sch.Encrypt()
			}
			if err := rec.RecordKeys(ctx, KeyRecord{Session: name, Channel: ch, Secret: secret, Rotation: time.Second, Encrypt: ch == 1}); err != nil {
				t.Fatal(err)
			}
			pkts, next := packets(t, s, 1, 200+100*i)
			now := time.Now().UnixNano()
			for j, p := range pkts {
				plain[ch] = append(plain[ch], p)
				sealed, err := sch.Seal(append(make([]byte, 0, len(p)+seal.Overhead), p...), now+int64(j)*int64(10*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				rec.Record(ch, sealed)
			}
			eos := mold.AppendEndOfSession(nil, s, next)
			plain[ch] = append(plain[ch], eos)
			rec.Record(ch, eos)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	for ch := range 2 {
		got := replayAll(t, ReplayConfig{Feed: "T", Conn: nc}, ch)
		if len(got) != len(plain[ch]) {
			t.Fatalf("channel %d: replayed %d packets, recorded %d", ch, len(got), len(plain[ch]))
		}
		for i := range got {
			if string(got[i]) != string(plain[ch][i]) {
				t.Fatalf("channel %d packet %d: not the packet before it was sealed", ch, i)
			}
		}
	}
	// From the middle of the second session: its packet holding message
	// 1000 first.
	bbb, _ := mold.ParseSession("BBB")
	got := replayAll(t, ReplayConfig{Feed: "T", Conn: nc, From: Position{Session: bbb, Seq: 1000}}, 0)
	h, err := mold.DecodeHeader(got[0])
	if err != nil || h.Session != bbb || h.Seq > 1000 || h.Seq+uint64(h.Messages()) <= 1000 {
		t.Fatalf("replay from BBB:1000 starts with %+v, %v", h, err)
	}
}

// replayAll replays channel ch to its end and returns the packets,
// failing on any unverified or corrupt record.
func replayAll(t *testing.T, cfg ReplayConfig, ch int) [][]byte {
	t.Helper()
	return replayAllWith(t, cfg, ch, false)
}

// replayAllWith is replayAll, with corrupt records allowed.
func replayAllWith(t *testing.T, cfg ReplayConfig, ch int, corruptOK bool) [][]byte {
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
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay not done within 20s: %d packets, %+v", len(out), r.ReplayStats())
		}
	}
	if st := r.ReplayStats(); st.Unverified != 0 || st.Corrupt != 0 && !corruptOK {
		t.Fatalf("replay stats %+v", st)
	}
	return out
}
