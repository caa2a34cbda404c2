package archive

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// record builds a packets record of the given packets.
func record(t testing.TB, ch int, s mold.Session, pkts [][]byte) []byte {
	t.Helper()
	b := builder{buf: make([]byte, HeaderLen, 1<<20), capBytes: 1 << 20}
	h, err := mold.DecodeHeader(pkts[0])
	if err != nil {
		t.Fatal(err)
	}
	b.reset(ch, s, h.Seq, 1000)
	for i, p := range pkts {
		hp, _ := mold.DecodeHeader(p)
		b.add(p, hp.Messages(), 1000+int64(i))
	}
	return append([]byte(nil), b.finish()...)
}

func TestDecodeRoundTrip(t *testing.T) {
	s, _ := mold.ParseSession("ABC")
	pkts, next := packets(t, s, 7, 40)
	pkts = append(pkts, mold.AppendEndOfSession(nil, s, next))
	r, err := Decode(record(t, 3, s, pkts))
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindPackets || r.Channel != 3 || r.Session != s || r.First != 7 || r.Next != next || r.Packets() != 41 ||
		r.FirstNs != 1000 || r.LastNs != 1040 {
		t.Fatalf("decoded %+v", r)
	}
	i := 0
	if err := r.EachPacket(func(p []byte) error {
		if string(p) != string(pkts[i]) {
			t.Fatalf("packet %d differs", i)
		}
		i++
		return nil
	}); err != nil || i != len(pkts) {
		t.Fatalf("EachPacket: %d packets, %v", i, err)
	}
	b := builder{buf: make([]byte, HeaderLen, 100), capBytes: 100}
	b.loss(2, s, 10, 20, 5)
	l, err := Decode(b.finish())
	if err != nil || l.Kind != KindLoss || l.First != 10 || l.Next != 20 || l.Packets() != 0 {
		t.Fatalf("loss record: %+v, %v", l, err)
	}
}

// TestDecodeRejects: every kind of damage is refused with an error that
// says what and where.
func TestDecodeRejects(t *testing.T) {
	s, _ := mold.ParseSession("ABC")
	other, _ := mold.ParseSession("XYZ")
	pkts, next := packets(t, s, 1, 5)
	good := record(t, 0, s, pkts)
	// refix recomputes the checksum after a change, so that the check
	// behind it is reached.
	refix := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[crcOff:], checksum(b))
		return b
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	otherPkts, _ := packets(t, other, 1, 1)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:20], "a record has at least 58"},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"flipped bit", mod(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "checksum"},
		{"kind", mod(func(b []byte) []byte { b[4] = 9; return refix(b) }), "kind 9"},
		{"reserved", mod(func(b []byte) []byte { b[5] = 1; return refix(b) }), "reserved"},
		{"first zero", mod(func(b []byte) []byte { binary.BigEndian.PutUint64(b[18:], 0); return refix(b) }), "want 1 <= first"},
		{"next before first", mod(func(b []byte) []byte { binary.BigEndian.PutUint64(b[26:], 0); return refix(b) }), "want 1 <= first"},
		{"header's next", mod(func(b []byte) []byte { binary.BigEndian.PutUint64(b[26:], next+1); return refix(b) }), "the packets end at message"},
		{"count", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[34:], 6); return refix(b) }), "packet 6 of 6"},
		{"no packets", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[34:], 0); return refix(b[:HeaderLen]) }), "no packets"},
		{"trailing", mod(func(b []byte) []byte { return refix(append(b, 0)) }), "bytes after the last"},
		{"truncated packet", mod(func(b []byte) []byte { return refix(b[:len(b)-3]) }), "bytes left"},
		{"bad packet", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[HeaderLen+2+mold.SessionLen+8:], 300)
			return refix(b)
		}), "packet 1 of 5: mold:"},
		{"session", record(t, 0, s, append(append([][]byte{}, pkts...), otherPkts...)), "session XYZ"},
		{"gap", record(t, 0, s, [][]byte{pkts[0], pkts[2]}), "packet 2 of 2: sequence"},
		{"end of session inside", record(t, 0, s, [][]byte{pkts[0], mold.AppendEndOfSession(nil, s, 2), pkts[1]}), "an end of session before"},
		{"loss with packets", mod(func(b []byte) []byte { b[4] = KindLoss; return refix(b) }), "a loss record with 5 packets"},
	}
	for _, c := range cases {
		_, err := Decode(c.b)
		if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an ErrCorrupt naming %q", c.name, err, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	s, _ := mold.ParseSession("ABC")
	pkts, next := packets(f, s, 1, 3)
	f.Add(record(f, 1, s, pkts))
	f.Add(record(f, 1, s, append(pkts, mold.AppendEndOfSession(nil, s, next))))
	b := builder{buf: make([]byte, HeaderLen, 100), capBytes: 100}
	b.loss(2, s, 10, 20, 5)
	f.Add(append([]byte(nil), b.finish()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		// A record that decodes holds whole packets covering First..Next.
		seq := r.First
		n := 0
		if err := r.EachPacket(func(p []byte) error {
			h, err := mold.Parse(p)
			if err != nil || h.Seq != seq {
				t.Fatalf("packet %d: %v, sequence %d want %d", n, err, h.Seq, seq)
			}
			seq += uint64(h.Messages())
			n++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != r.Packets() || (r.Kind == KindPackets && seq != r.Next) {
			t.Fatalf("%d packets ending at %d; record says %d, next %d", n, seq, r.Packets(), r.Next)
		}
	})
}
