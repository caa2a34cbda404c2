package seqgap

import (
	"fmt"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// TestStartWhereMet: the first session met starts at its first data
// packet's sequence, released at once with nothing missing; a heartbeat
// met first does not move the start; a later session starts at 1, a gap
// before its first packet as usual.
func TestStartWhereMet(t *testing.T) {
	packet := func(name string, seq uint64, n int) mold.Packet {
		s, _ := mold.ParseSession(name)
		b, _ := mold.NewBuilder(1400)
		b.Start(s, seq)
		for i := 0; i < n; i++ {
			b.Add(fmt.Appendf(nil, "m%d", seq+uint64(i)))
		}
		p, err := mold.Parse(append([]byte(nil), b.Finish()...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, start := range []bool{true, false} {
		tr, err := New(Config{Window: 1024, SlotSize: 64, StartWhereMet: start})
		if err != nil {
			t.Fatal(err)
		}
		var out trimOut
		tr.Packet(0, packet("S1", 500, 2), 1, 1, &out)
		tr.Packet(0, packet("S1", 502, 1), 2, 2, &out)
		if !start {
			if len(out.got) != 0 || tr.Stats().Gaps != 1 {
				t.Fatalf("without StartWhereMet: released %v, stats %+v; want nothing yet, the gap 1..499", out.got, tr.Stats())
			}
			continue
		}
		if fmt.Sprint(out.got) != "[500:m500 501:m501 502:m502]" || tr.Stats().Gaps != 0 {
			t.Fatalf("released %v, stats %+v; want 500..502 at once, no gap", out.got, tr.Stats())
		}
		out.got = nil
		s1, _ := mold.ParseSession("S1")
		eos, _ := mold.Parse(mold.AppendEndOfSession(nil, s1, 503))
		tr.Packet(0, eos, 3, 3, &out)
		tr.Packet(0, packet("S2", 3, 1), 4, 4, &out)
		if len(out.got) != 0 || tr.Stats().Gaps != 1 {
			t.Fatalf("second session from 3: released %v, stats %+v; want the gap 1..2", out.got, tr.Stats())
		}
	}
}
