package mold

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
)

type vector struct {
	Name     string `json:"name"`
	Hex      string `json:"hex"`
	Expected struct {
		Valid            bool     `json:"valid"`
		Session          *string  `json:"session"`
		Sequence         *uint64  `json:"sequence"`
		Count            *int     `json:"count"`
		Kind             string   `json:"kind"`
		MessageLengths   []int    `json:"message_lengths"`
		MessagesASCII    []string `json:"messages_ascii"`
		ReencodesIdentic bool     `json:"reencodes_identically"`
		Messages         []struct {
			Len     int    `json:"len"`
			DataHex string `json:"data_hex"`
		} `json:"messages"`
	} `json:"expected"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile("../testdata/mold/moldudp64_test_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 12 {
		t.Fatalf("%d vectors, the file has 12", len(vs))
	}
	return vs
}

// negative vectors and the sentinel each must produce.
var wantErr = map[string]error{
	"th2_neg_incomplete_header": ErrShortHeader,
	"th2_neg_count2_no_payload": ErrMissingBlock,
	"th2_neg_msg_len_exceeds":   ErrBlockPastEnd,
	"th2_neg_trailing_garbage":  ErrTrailingBytes,
}

// TestVectors runs every vector of the external test file.
func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(v.Name, "gomold_msgblock") {
				// Blocks without a header: give them one and parse.
				checkBlocks(t, v, b)
				return
			}
			if strings.HasPrefix(v.Name, "gomold_header") {
				h, err := DecodeHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				checkHeader(t, v, h)
				if !bytes.Equal(h.Append(nil), b) {
					t.Fatal("header does not re-encode identically")
				}
				return
			}
			if v.Name == "th2_request" {
				// A re-request has the header's shape but is not a
				// downstream packet: its count is what it asks for.
				r, err := ParseRequest(b)
				if err != nil {
					t.Fatal(err)
				}
				checkHeader(t, v, Header(r))
				if !bytes.Equal(r.Append(nil), b) {
					t.Fatal("request does not re-encode identically")
				}
				return
			}
			p, err := Parse(b)
			if !v.Expected.Valid {
				if err == nil {
					t.Fatal("malformed packet accepted")
				}
				if !errors.Is(err, wantErr[v.Name]) {
					t.Fatalf("error %q, want %v", err, wantErr[v.Name])
				}
				t.Logf("rejected: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkHeader(t, v, p.Header)
			switch v.Expected.Kind {
			case "heartbeat":
				if !p.IsHeartbeat() || !bytes.Equal(AppendHeartbeat(nil, p.Session, p.Seq), b) {
					t.Fatal("heartbeat")
				}
			case "end-of-session":
				if !p.IsEndOfSession() || p.Messages() != 0 || !bytes.Equal(AppendEndOfSession(nil, p.Session, p.Seq), b) {
					t.Fatal("end of session")
				}
			}
			var got []string
			it := p.Iter()
			for msg, seq, ok := it.Next(); ok; msg, seq, ok = it.Next() {
				if want := p.Seq + uint64(len(got)); seq != want {
					t.Fatalf("seq %d, want %d", seq, want)
				}
				got = append(got, string(msg))
			}
			if v.Expected.MessagesASCII != nil && strings.Join(got, "|") != strings.Join(v.Expected.MessagesASCII, "|") {
				t.Fatalf("messages %q, want %q", got, v.Expected.MessagesASCII)
			}
			if v.Expected.ReencodesIdentic && p.Messages() > 0 {
				bl, _ := NewBuilder(1500)
				bl.Start(p.Session, p.Seq)
				for _, m := range got {
					if !bl.Add([]byte(m)) {
						t.Fatal("does not fit")
					}
				}
				if !bytes.Equal(bl.Finish(), b) {
					t.Fatalf("re-encoded %x\nwant       %x", bl.Finish(), b)
				}
			}
		})
	}
}

func checkHeader(t *testing.T, v vector, h Header) {
	t.Helper()
	if v.Expected.Session != nil && h.Session.String() != *v.Expected.Session {
		t.Fatalf("session %q, want %q", h.Session, *v.Expected.Session)
	}
	if v.Expected.Sequence != nil && h.Seq != *v.Expected.Sequence {
		t.Fatalf("seq %d, want %d", h.Seq, *v.Expected.Sequence)
	}
	if v.Expected.Count != nil && int(h.Count) != *v.Expected.Count {
		t.Fatalf("count %d, want %d", h.Count, *v.Expected.Count)
	}
}

func checkBlocks(t *testing.T, v vector, blocks []byte) {
	t.Helper()
	// Count the blocks that fit, then claim one more than fit for the
	// truncated vector.
	n, off := 0, 0
	for off+2 <= len(blocks) {
		l := int(binary.BigEndian.Uint16(blocks[off:]))
		if off+2+l > len(blocks) {
			n++ // the truncated block
			break
		}
		off += 2 + l
		n++
	}
	s, _ := ParseSession("blocks")
	pkt := Header{Session: s, Seq: 1, Count: uint16(n)}.Append(nil)
	pkt = append(pkt, blocks...)
	p, err := Parse(pkt)
	if !v.Expected.Valid {
		if !errors.Is(err, ErrBlockPastEnd) {
			t.Fatalf("truncated blocks: %v", err)
		}
		var pe *PacketError
		if !errors.As(err, &pe) || pe.Msg != 4 || pe.Offset != HeaderLen+222 {
			t.Fatalf("error should name message 4 at offset %d: %v", HeaderLen+222, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var lens []int
	it := p.Iter()
	for msg, _, ok := it.Next(); ok; msg, _, ok = it.Next() {
		lens = append(lens, len(msg))
		if len(v.Expected.Messages) > 0 && hex.EncodeToString(msg) != v.Expected.Messages[len(lens)-1].DataHex {
			t.Fatalf("message %d data %x", len(lens), msg)
		}
	}
	want := v.Expected.MessageLengths
	for _, m := range v.Expected.Messages {
		want = append(want, m.Len)
	}
	if len(lens) != len(want) {
		t.Fatalf("lengths %v, want %v", lens, want)
	}
	for i := range lens {
		if lens[i] != want[i] {
			t.Fatalf("lengths %v, want %v", lens, want)
		}
	}
}

// TestCapturedStream splits the real capture of three packets written back to
// back, whose last message is truncated.
func TestCapturedStream(t *testing.T) {
	b, err := os.ReadFile("../testdata/mold/moldudp-unwrap_mold.sample.dat")
	if err != nil {
		t.Fatal(err)
	}
	type pk struct {
		seq   uint64
		count int
	}
	var got []pk
	for len(b) > 0 {
		n, err := PacketLen(b)
		if err != nil {
			if len(got) != 2 || !errors.Is(err, ErrBlockPastEnd) {
				t.Fatalf("after %d packets: %v", len(got), err)
			}
			var pe *PacketError
			errors.As(err, &pe)
			if pe.Seq != 29 || pe.Count != 13 || pe.Msg != 13 || !strings.Contains(pe.Detail, "length 25, 20 bytes remain") {
				t.Fatalf("error does not name the truncated message: %v", err)
			}
			// The whole remainder as one datagram is rejected by Parse too.
			if _, err := Parse(b); !errors.Is(err, ErrBlockPastEnd) {
				t.Fatalf("Parse of truncated packet: %v", err)
			}
			break
		}
		p, err := Parse(b[:n])
		if err != nil {
			t.Fatal(err)
		}
		if p.Session != (Session{}) {
			t.Fatalf("session %q, the capture's is 10 zero bytes", p.Session)
		}
		got = append(got, pk{p.Seq, p.Messages()})
		b = b[n:]
	}
	want := []pk{{1, 15}, {16, 13}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("packets %v, want %v then a truncated one at 29", got, want)
	}
}

func TestParseErrorsNameTheFault(t *testing.T) {
	s, _ := ParseSession("ABC")
	hb := AppendHeartbeat(nil, s, 5)
	cases := []struct {
		name string
		pkt  []byte
		want error
		text string
	}{
		{"short header", hb[:19], ErrShortHeader, "19 bytes, need 20"},
		{"heartbeat with payload", append(append([]byte{}, hb...), 1, 2), ErrControlPayload, "2 bytes after the header"},
		{"count, no payload", Header{Session: s, Seq: 1, Count: 3}.Append(nil), ErrMissingBlock, "message 1 of 3"},
		{"half block header", append(Header{Session: s, Seq: 1, Count: 1}.Append(nil), 0), ErrMissingBlock, "1 bytes remain"},
		{"length past end", append(Header{Session: s, Seq: 1, Count: 1}.Append(nil), 0, 5, 1, 2), ErrBlockPastEnd, "length 5, 2 bytes remain"},
		{"trailing", append(Header{Session: s, Seq: 1, Count: 1}.Append(nil), 0, 1, 9, 9), ErrTrailingBytes, "1 bytes after message 1"},
	}
	for _, c := range cases {
		_, err := Parse(c.pkt)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v; want %v containing %q", c.name, err, c.want, c.text)
		}
	}
}

func TestBuilderFillsToMax(t *testing.T) {
	s, _ := ParseSession("S1")
	for _, max := range []int{24, 100, 1024, 1472, 8972} {
		b, err := NewBuilder(max)
		if err != nil {
			t.Fatal(err)
		}
		b.Start(s, 77)
		msg := []byte("0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij012345") // 66 bytes
		n := 0
		for {
			m := msg[:n%len(msg)]
			if !b.Add(m) {
				if b.Len()+2+len(m) <= max {
					t.Fatalf("max %d: a %d-byte message was refused with %d bytes used", max, len(m), b.Len())
				}
				break
			}
			n++
		}
		pkt := b.Finish()
		if len(pkt) > max {
			t.Fatalf("packet %d bytes > max %d", len(pkt), max)
		}
		p, err := Parse(pkt)
		if err != nil {
			t.Fatal(err)
		}
		if p.Seq != 77 || p.Messages() != n || b.NextSeq() != 77+uint64(n) {
			t.Fatalf("seq %d count %d, added %d", p.Seq, p.Messages(), n)
		}
		it := p.Iter()
		for i := 0; i < n; i++ {
			m, seq, ok := it.Next()
			if !ok || seq != 77+uint64(i) || !bytes.Equal(m, msg[:i%len(msg)]) {
				t.Fatalf("message %d: %q %d %v", i, m, seq, ok)
			}
		}
	}
	if _, err := NewBuilder(21); err == nil {
		t.Fatal("max 21 accepted")
	}
	if _, err := NewBuilder(70000); err == nil {
		t.Fatal("max 70000 accepted")
	}
}

func TestBuilderReserveUnreserve(t *testing.T) {
	s, _ := ParseSession("S1")
	b, _ := NewBuilder(200)
	b.Start(s, 1)
	copy(b.Reserve(3), "abc")
	copy(b.Reserve(2), "xy")
	b.Unreserve()
	copy(b.Reserve(4), "defg")
	p, err := Parse(b.Finish())
	if err != nil {
		t.Fatal(err)
	}
	it := p.Iter()
	m1, _, _ := it.Next()
	m2, _, _ := it.Next()
	if string(m1) != "abc" || string(m2) != "defg" || it.Remaining() != 0 {
		t.Fatalf("%q %q", m1, m2)
	}
	if b.Reserve(1000) != nil {
		t.Fatal("oversized reserve")
	}
}

func TestRequest(t *testing.T) {
	s, _ := ParseSession("SESS1")
	r := Request{Session: s, Seq: 100, Count: 50}
	b := r.Append(nil)
	got, err := ParseRequest(b)
	if err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	for _, c := range []struct {
		b    []byte
		want error
	}{
		{b[:19], ErrRequestLen},
		{append(append([]byte{}, b...), 0), ErrRequestLen},
		{Request{Session: s, Seq: 0, Count: 1}.Append(nil), ErrRequestSeq},
		{Request{Session: s, Seq: 1, Count: 0}.Append(nil), ErrRequestCount},
		{Request{Session: s, Seq: 1, Count: 0xFFFF}.Append(nil), ErrRequestCount},
	} {
		if _, err := ParseRequest(c.b); !errors.Is(err, c.want) {
			t.Errorf("%x: %v, want %v", c.b, err, c.want)
		}
	}
}

func TestSession(t *testing.T) {
	s, err := ParseSession("AB12")
	if err != nil || string(s[:]) != "AB12      " || s.String() != "AB12" {
		t.Fatalf("%q %v", s, err)
	}
	for _, bad := range []string{"", "ELEVENCHARS", "a b"} {
		if _, err := ParseSession(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := (Session{}).String(); got != `"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"` {
		t.Fatalf("zero session shown as %s", got)
	}
}

func TestZeroAllocs(t *testing.T) {
	s, _ := ParseSession("S1")
	b, _ := NewBuilder(1472)
	msg := make([]byte, 68)
	const perRound = 100
	testenv.NoAllocs(t, "build+parse+iterate of a packet", 50, perRound, func() {
		for range perRound {
			b.Start(s, 1)
			for b.Add(msg) {
			}
			p, err := Parse(b.Finish())
			if err != nil {
				panic(err)
			}
			it := p.Iter()
			for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
			}
		}
	})
}

func BenchmarkBuild(b *testing.B) {
	s, _ := ParseSession("S1")
	bl, _ := NewBuilder(1472)
	msg := make([]byte, 68)
	b.ReportAllocs()
	msgs := 0
	for b.Loop() {
		bl.Start(s, 1)
		for bl.Add(msg) {
			msgs++
		}
		bl.Finish()
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkParseIter(b *testing.B) {
	s, _ := ParseSession("S1")
	bl, _ := NewBuilder(1472)
	bl.Start(s, 1)
	for bl.Add(make([]byte, 68)) {
	}
	pkt := bl.Finish()
	b.ReportAllocs()
	msgs := 0
	for b.Loop() {
		p, _ := Parse(pkt)
		it := p.Iter()
		for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
			msgs++
		}
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}
