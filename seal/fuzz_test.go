package seal

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// FuzzOpen: Open of any bytes returns a packet that parses, of exactly
// Overhead bytes less, or an *Error with one of the documented causes,
// leaving the bytes unchanged; only a packet sealed under a held key opens.
func FuzzOpen(f *testing.F) {
	k, session := testKey(f, 3)
	s, _ := k.Seal(packet(session, 9, 3, 40))
	f.Add(s)
	f.Add(packet(session, 9, 3, 40))
	f.Add(mold.AppendHeartbeat(nil, session, 4))
	f.Add([]byte{})
	var ks Keys
	ks.Set(session, []*Key{k})
	f.Fuzz(func(t *testing.T, b []byte) {
		before := append([]byte(nil), b...)
		got, err := ks.Open(b)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || !(errors.Is(err, ErrNotSealable) || errors.Is(err, ErrShort) || errors.Is(err, ErrUnknownEpoch) || errors.Is(err, ErrBadTag)) {
				t.Fatalf("Open error %v is not one of the documented causes", err)
			}
			if !bytes.Equal(b, before) {
				t.Fatal("a refused packet was changed")
			}
			return
		}
		if len(got) != len(before)-Overhead {
			t.Fatalf("opened %d bytes of %d", len(got), len(before))
		}
		if _, err := mold.Parse(got); err != nil {
			t.Fatalf("opened packet does not parse: %v", err)
		}
	})
}
