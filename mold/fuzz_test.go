package mold

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"testing"
)

func addVectorSeeds(f *testing.F) {
	raw, err := os.ReadFile("../testdata/mold/moldudp64_test_vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	// Every hex string in the file is a seed; no need to parse the JSON.
	for _, field := range bytes.Split(raw, []byte(`"hex": "`))[1:] {
		end := bytes.IndexByte(field, '"')
		if b, err := hex.DecodeString(string(field[:end])); err == nil {
			f.Add(b)
		}
	}
	capture, err := os.ReadFile("../testdata/mold/moldudp-unwrap_mold.sample.dat")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(capture)
}

// FuzzParse: Parse never panics; an accepted packet iterates exactly over its
// bytes and rebuilds identically; a rejected one says which sentinel.
func FuzzParse(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			for _, s := range []error{ErrShortHeader, ErrMissingBlock, ErrBlockPastEnd, ErrTrailingBytes, ErrControlPayload} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %v wraps no sentinel", err)
		}
		if len(b) > 65507 {
			return // larger than any datagram: the builder refuses such sizes
		}
		bl, err := NewBuilder(max(len(b), HeaderLen+BlockHdrLen))
		if err != nil {
			t.Fatal(err)
		}
		bl.Start(p.Session, p.Seq)
		it := p.Iter()
		for m, _, ok := it.Next(); ok; m, _, ok = it.Next() {
			if !bl.Add(m) {
				t.Fatal("message of an accepted packet does not fit its own size")
			}
		}
		out := bl.Finish()
		if p.Count == EndOfSession {
			out = AppendEndOfSession(out[:0], p.Session, p.Seq)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("rebuilt %x\n      from %x", out, b)
		}
		n, err := PacketLen(append(append([]byte{}, b...), 0xAA))
		if err != nil || n != len(b) {
			t.Fatalf("PacketLen with a byte after = %d, %v; want %d", n, err, len(b))
		}
	})
}

// FuzzParseRequest: ParseRequest never panics and what it accepts re-encodes.
func FuzzParseRequest(f *testing.F) {
	addVectorSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			return
		}
		if !bytes.Equal(r.Append(nil), b) || r.Seq == 0 || r.Count == 0 || r.Count == EndOfSession {
			t.Fatalf("accepted %+v from %x", r, b)
		}
	})
}
