package seal

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// TestEncryptOpen: an encrypting key leaves the MoldUDP64 framing readable
// (header, block lengths) and no message byte in the clear; Open gives back
// exactly the packet sealed; any byte changed, framing or message, fails
// to open and leaves the packet as it was; an authenticating key of the
// same secret does not open it.
func TestEncryptOpen(t *testing.T) {
	k, session := testEncKey(t, 3)
	var ks Keys
	ks.Set(session, []*Key{k})
	for _, n := range []int{1, 2, 20} {
		p := packet(session, 100, n, 60)
		want := append([]byte(nil), p...)
		sealed, err := k.Seal(p)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := mold.Parse(sealed)
		if err != nil || pk.Messages() != n {
			t.Fatalf("encrypted packet does not parse as %d messages: %v", n, err)
		}
		if !bytes.Equal(sealed[:mold.HeaderLen], want[:mold.HeaderLen]) {
			t.Error("the header changed")
		}
		// Every message of packet() repeats one byte 60 times: a run of
		// 8 equal bytes in the messages means they were left in the clear.
		it := pk.Iter()
		for i := 0; i < n; i++ {
			m, _, _ := it.Next()
			if i == n-1 {
				m = m[:len(m)-Overhead]
			}
			if bytes.Contains(m, bytes.Repeat(m[:1], 8)) {
				t.Fatalf("message %d of %d in the clear: % x", i, n, m[:16])
			}
		}
		for _, at := range []int{5, mold.HeaderLen, mold.HeaderLen + mold.BlockHdrLen + 3, len(sealed) - Overhead - 1, len(sealed) - 20, len(sealed) - 1} {
			bad := append([]byte(nil), sealed...)
			bad[at] ^= 0x40
			before := append([]byte(nil), bad...)
			if _, err := ks.Open(bad); !errors.Is(err, ErrBadTag) && !errors.Is(err, ErrNotSealable) && !errors.Is(err, ErrUnknownEpoch) {
				t.Errorf("byte %d flipped: %v, want a refusal", at, err)
			}
			if !bytes.Equal(bad, before) {
				t.Errorf("byte %d flipped: a refused packet was changed", at)
			}
		}
		opened, err := ks.Open(append([]byte(nil), sealed...))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(opened, want) {
			t.Fatalf("%d messages: opened packet differs from the one sealed", n)
		}
		// The authenticating key of the same epoch and secret opens nothing.
		mac, _ := testKey(t, 3)
		var other Keys
		other.Set(session, []*Key{mac})
		if _, err := other.Open(append([]byte(nil), sealed...)); !errors.Is(err, ErrBadTag) {
			t.Errorf("an authenticating key opened an encrypted packet: %v", err)
		}
	}
}

func TestEncryptOpenAllocs(t *testing.T) {
	k, session := testEncKey(t, 3)
	checkSealOpenAllocs(t, "encrypting Seal and Open of a packet", k, session)
}

// BenchmarkSealEncrypt encrypts and seals a 1,400-byte packet.
func BenchmarkSealEncrypt(b *testing.B) {
	k, session := testEncKey(b, 3)
	benchSeal(b, k, packet(session, 1, 1, 1400-mold.HeaderLen-mold.BlockHdrLen-Overhead))
}

// BenchmarkOpenDecrypt opens and decrypts a 1,400-byte packet (and copies
// the ciphertext back for the next round: 1,400 bytes more moved).
func BenchmarkOpenDecrypt(b *testing.B) {
	k, session := testEncKey(b, 3)
	ks := &Keys{}
	ks.Set(session, []*Key{k})
	p := packet(session, 1, 1, 1400-mold.HeaderLen-mold.BlockHdrLen-Overhead)
	s, _ := k.Seal(p)
	sealed := append([]byte(nil), s...)
	b.SetBytes(int64(len(sealed)))
	b.ReportAllocs()
	for b.Loop() {
		copy(s, sealed)
		if _, err := ks.Open(s[:len(sealed)]); err != nil {
			b.Fatal(err)
		}
	}
}
