package feed

import (
	"bytes"
	"testing"
)

// FuzzDecode: Decode never panics; what it accepts re-encodes to the same
// bytes, apart from the version byte, reserved bytes and bytes past the
// type's size, which a decoder ignores.
func FuzzDecode(f *testing.F) {
	buf := make([]byte, 128)
	for _, m := range sampleMsgs() {
		n, _ := m.Encode(buf)
		f.Add(append([]byte{}, buf[:n]...))
		f.Add(append([]byte{}, buf[:n-1]...))
	}
	f.Add([]byte{})
	f.Add([]byte{'Q', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Msg
		if err := m.Decode(b); err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		out := make([]byte, MaxLen)
		n, err := m.Encode(out)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		if n > len(b) {
			t.Fatalf("decoded %d bytes as a %d-byte %s", len(b), n, m.Type)
		}
		want := append([]byte{}, b[:n]...)
		want[1] = Version
		clearReserved(m.Type, want)
		if !bytes.Equal(out[:n], want) {
			t.Fatalf("re-encode differs:\n in %x\nout %x", want, out[:n])
		}
	})
}

func clearReserved(t Type, b []byte) {
	zero := func(from, to int) {
		for i := from; i < to; i++ {
			b[i] = 0
		}
	}
	switch t {
	case TypeDefinition:
		zero(46, 48)
	case TypeTrade:
		zero(61, 64)
	case TypeStatus:
		zero(41, 44)
	case TypeLevelDelta:
		zero(38, 40)
	}
}
