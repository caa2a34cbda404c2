package seqgap

import (
	"fmt"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// joinOut records what is released and lost.
type joinOut struct {
	released []uint64
	lost     []Range
}

func (o *joinOut) Release(seq uint64, msg []byte, line int, recvNs int64) {
	o.released = append(o.released, seq)
}

func (o *joinOut) Event(ev *Event) {
	if ev.Kind == EventLost {
		o.lost = append(o.lost, ev.Range)
	}
}

func joinPacket(t *testing.T, sess mold.Session, seq uint64, n int) mold.Packet {
	t.Helper()
	b, _ := mold.NewBuilder(65000)
	b.Start(sess, seq)
	for i := 0; i < n; i++ {
		b.Add([]byte(fmt.Sprintf("m%d", seq+uint64(i))))
	}
	p, err := mold.Parse(append([]byte(nil), b.Finish()...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMustWaitDuringLateJoin: while a late join holds live messages for its
// snapshot, a packet that would not fit the window must wait (taking it
// would declare the join's prefix lost); one that fits, a packet of another
// session and any packet once the snapshot is in need not. A consumer that
// heeds it loses nothing.
func TestMustWaitDuringLateJoin(t *testing.T) {
	tr, err := New(Config{Window: 8, Recovery: true})
	if err != nil {
		t.Fatal(err)
	}
	out := &joinOut{}
	sess, _ := mold.ParseSession("AB00000001")
	other, _ := mold.ParseSession("AB00000002")
	// The first packet is at 1000: a late join; 1000..1001 are held.
	tr.Packet(0, joinPacket(t, sess, 1000, 2), 1, 1, out)
	if reqs := tr.Requests(); len(reqs) != 2 || reqs[0] != (Request{Session: sess, Query: true}) || reqs[1] != (Request{Session: sess, Range: Range{1, 999}, Snapshot: true}) {
		t.Fatalf("late join asked for %v, want the session query and one snapshot of 1..999", reqs)
	}
	if tr.MustWait(sess, 1002, 6) { // 1002..1007 fits 1000..1007
		t.Fatal("a packet that fits the window must wait")
	}
	tr.Packet(0, joinPacket(t, sess, 1002, 6), 1, 1, out)
	for _, c := range []struct {
		seq uint64
		n   int
	}{{1008, 1}, {1008, 5}, {1100, 1}} {
		if !tr.MustWait(sess, c.seq, c.n) {
			t.Fatalf("packet %d+%d beyond a full window while holding need not wait", c.seq, c.n)
		}
	}
	if tr.MustWait(other, 1008, 1) || tr.MustWait(sess, 1008, 0) {
		t.Fatal("another session's packet or a heartbeat must wait")
	}
	if len(out.released) != 0 || len(out.lost) != 0 {
		t.Fatalf("released %v, lost %v before the snapshot", out.released, out.lost)
	}
	// The snapshot reflects up to 1003: 1004.. are released, and nothing
	// waits any more.
	tr.Answer(Answer{Outcome: AnswerSnapshot, Session: sess, Range: Range{1, 999}, Next: 1004}, 2, out)
	if tr.MustWait(sess, 1008, 5) {
		t.Fatal("must still wait after the snapshot")
	}
	tr.Packet(0, joinPacket(t, sess, 1008, 5), 1, 3, out)
	want := []uint64{1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012}
	if fmt.Sprint(out.released) != fmt.Sprint(want) || len(out.lost) != 0 {
		t.Fatalf("released %v (want %v), lost %v", out.released, want, out.lost)
	}
}
