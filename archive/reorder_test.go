package archive

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
)

// TestReorder stores a channel's records out of order, as a client
// retrying at a new JetStream leader does, through a real JetStream, and
// reads them through the replay's reorder: each session's records come
// back in sequence order; a hole no record fills is given up at the end,
// and the records after it still come, in order.
func TestReorder(t *testing.T) {
	_, nc := jetStreamServer(t)
	rec, err := NewRecorder(context.Background(), RecorderConfig{Feed: "O", Channels: 1, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	rec.Close() // the stream is made; the records below are stored by hand
	sa, _ := mold.ParseSession("00SEAAAAAA")
	sb, _ := mold.ParseSession("00SEBBBBBB")
	pkts, _ := packets(t, sa, 1, 60)
	// Records of 10 packets each: 0..5 of session A.
	var recs [][]byte
	var firsts []uint64
	for i := 0; i < 60; i += 10 {
		var b builder
		b.buf, b.capBytes = make([]byte, HeaderLen, 1<<20), 1<<20
		h, _ := mold.DecodeHeader(pkts[i])
		b.reset(0, sa, h.Seq, 1)
		for _, p := range pkts[i : i+10] {
			ph, _ := mold.DecodeHeader(p)
			b.add(p, ph.Messages(), 1)
		}
		recs = append(recs, append([]byte(nil), b.finish()...))
		firsts = append(firsts, h.Seq)
	}
	bp, _ := packets(t, sb, 1, 10)
	var b builder
	b.buf, b.capBytes = make([]byte, HeaderLen, 1<<20), 1<<20
	b.reset(0, sb, 1, 1)
	for _, p := range bp {
		ph, _ := mold.DecodeHeader(p)
		b.add(p, ph.Messages(), 1)
	}
	sessionB := append([]byte(nil), b.finish()...)
	// Stored: A0, A2, A3, A1 (late), B0, A5 (A4 never stored).
	for _, r := range [][]byte{recs[0], recs[2], recs[3], recs[1], sessionB, recs[5]} {
		if _, err := nc.Request(Subject("O", 0), r, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	rd, err := OpenReader(context.Background(), ReaderConfig{Feed: "O", Channel: 0, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	o := newReorder(rd)
	defer o.Close()
	type got struct {
		s     mold.Session
		first uint64
	}
	want := []got{{sa, firsts[0]}, {sa, firsts[1]}, {sa, firsts[2]}, {sa, firsts[3]}, {sb, 1}, {sa, firsts[5]}}
	for i, w := range want {
		r, _, err := o.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if r.Session != w.s || r.First != w.first {
			t.Fatalf("record %d: session %s from %d, want %s from %d", i, r.Session, r.First, w.s, w.first)
		}
		if err := r.EachPacket(func([]byte) error { return nil }); err != nil || r.Packets() != 10 {
			t.Fatalf("record %d: %d packets, %v", i, r.Packets(), err)
		}
	}
	if _, _, err := o.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
}
