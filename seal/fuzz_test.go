package seal

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// FuzzOpen: Open of any bytes, under an authenticating and an encrypting
// key, returns a packet that parses, of exactly Overhead bytes less, or an
// *Error with one of the documented causes, leaving the bytes unchanged;
// only a packet sealed under a held key opens.
func FuzzOpen(f *testing.F) {
	k, session := testKey(f, 3)
	s, _ := k.Seal(packet(session, 9, 3, 40))
	f.Add(s)
	f.Add(packet(session, 9, 3, 40))
	f.Add(mold.AppendHeartbeat(nil, session, 4))
	f.Add([]byte{})
	ek, _ := testEncKey(f, 4) // an encrypting key of another epoch
	e, _ := ek.Seal(packet(session, 9, 3, 40))
	f.Add(e)
	var ks Keys
	ks.Set(session, []*Key{k, ek})
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

// FuzzParseReply: a key reply parses into keys that seal and open, or is
// refused with an error naming the key reply.
func FuzzParseReply(f *testing.F) {
	session, _ := mold.ParseSession("0A2K9Z0001")
	s, _ := NewSchedule(session, 0, bytes.Repeat([]byte{3}, SecretLen), DefaultRotation)
	r, _ := ReplyFor(s, 1_800_000_000_000_000_000)
	good, _ := json.Marshal(r)
	f.Add(good)
	f.Add([]byte(`{"error":"not entitled"}`))
	f.Add([]byte(`{"session":"X","channel":0,"rotation_ns":1,"keys":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sess, keys, _, err := ParseReply(b, 0)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "seal: key reply") {
				t.Fatalf("error %q does not name the key reply", err)
			}
			return
		}
		var ks Keys
		ks.Set(sess, keys)
		p, _ := keys[0].Seal(packet(sess, 1, 2, 10))
		if _, err := ks.Open(p); err != nil {
			t.Fatalf("a key from a parsed reply does not open what it sealed: %v", err)
		}
	})
}
