package seqgap

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// trimOut records what a tracker releases.
type trimOut struct{ got []string }

func (o *trimOut) Release(seq uint64, msg []byte, _ int, _ int64) {
	o.got = append(o.got, fmt.Sprintf("%d:%s", seq, msg))
}
func (o *trimOut) Event(*Event) {}

// TestTrim: Config.Trim applies to every message, released at once or held
// behind a gap, so that padded messages neither take the oversize path nor
// reach the handler with their padding.
func TestTrim(t *testing.T) {
	sess, _ := mold.ParseSession("S1")
	packet := func(seq uint64, n int) mold.Packet {
		b, _ := mold.NewBuilder(1400)
		b.Start(sess, seq)
		for i := 0; i < n; i++ {
			b.Add([]byte(fmt.Sprintf("m%d", seq+uint64(i))))
		}
		b.PadTo(1400) // the last message padded with zeros past the slot size
		p, err := mold.Parse(append([]byte(nil), b.Finish()...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tr, err := New(Config{Window: 16, SlotSize: 64, Trim: func(m []byte) []byte {
		if i := bytes.IndexByte(m, 0); i >= 0 {
			return m[:i]
		}
		return m
	}})
	if err != nil {
		t.Fatal(err)
	}
	var out trimOut
	tr.Packet(0, packet(1, 2), 1, 1, &out) // 1, 2
	tr.Packet(0, packet(5, 2), 2, 2, &out) // 5, 6 held behind the gap 3..4
	tr.Packet(1, packet(3, 2), 3, 3, &out) // fills it
	want := "[1:m1 2:m2 3:m3 4:m4 5:m5 6:m6]"
	if fmt.Sprint(out.got) != want {
		t.Fatalf("released %v, want %s", out.got, want)
	}
	if st := tr.Stats(); st.Reordered != 2 || st.OversizeReordered != 0 {
		t.Fatalf("stats %+v: want 2 held in their slots, none oversize", st)
	}
}
