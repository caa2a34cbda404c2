package seal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
)

func testKey(t testing.TB, epoch uint32) (*Key, mold.Session) {
	t.Helper()
	return testKeyOf(t, epoch, DeriveKey, NewKey)
}

// testEncKey is testKey's encrypting key, of the same secret and session.
func testEncKey(t testing.TB, epoch uint32) (*Key, mold.Session) {
	t.Helper()
	return testKeyOf(t, epoch, DeriveEncryptingKey, NewEncryptingKey)
}

func testKeyOf(t testing.TB, epoch uint32, derive func([]byte, mold.Session, int, uint32) ([]byte, error), newKey func(uint32, []byte) (*Key, error)) (*Key, mold.Session) {
	t.Helper()
	session, _ := mold.ParseSession("0A2K9Z0001")
	kb, err := derive(bytes.Repeat([]byte{7}, SecretLen), session, 0, epoch)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newKey(epoch, kb)
	if err != nil {
		t.Fatal(err)
	}
	return k, session
}

// packet builds a packet of n messages of size bytes at seq, with room for
// a seal.
func packet(session mold.Session, seq uint64, n, size int) []byte {
	b, _ := mold.NewBuilder(65000)
	b.Start(session, seq)
	for i := 0; i < n; i++ {
		m := bytes.Repeat([]byte{byte(seq) + byte(i)}, size)
		b.Add(m)
	}
	p := b.Finish()
	return append(make([]byte, 0, len(p)+Overhead), p...)
}

func TestSealOpen(t *testing.T) {
	k, session := testKey(t, 3)
	var ks Keys
	ks.Set(session, []*Key{k})
	for _, n := range []int{1, 2, 20} {
		p := packet(session, 100, n, 60)
		want := append([]byte(nil), p...)
		sealed, err := k.Seal(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != len(want)+Overhead {
			t.Fatalf("sealed %d bytes, want %d", len(sealed), len(want)+Overhead)
		}
		// Third-party decoders read the sealed packet: the seal is in the last block.
		pk, err := mold.Parse(sealed)
		if err != nil || pk.Messages() != n {
			t.Fatalf("sealed packet does not parse as %d messages: %v", n, err)
		}
		got, err := ks.Open(sealed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("opened packet differs from the one sealed")
		}
	}
}

// TestOpenRejects: every kind of bad packet is refused with its reason, and
// left as it was.
func TestOpenRejects(t *testing.T) {
	k, session := testKey(t, 3)
	other, _ := testKey(t, 4)
	var ks Keys
	ks.Set(session, []*Key{k})
	seal := func(seq uint64) []byte {
		s, err := k.Seal(packet(session, seq, 3, 50))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := map[string]struct {
		p    func() []byte
		want error
	}{
		"flipped message bit": {func() []byte { p := seal(5); p[mold.HeaderLen+5] ^= 1; return p }, ErrBadTag},
		"flipped tag bit":     {func() []byte { p := seal(5); p[len(p)-1] ^= 0x80; return p }, ErrBadTag},
		"flipped nonce bit":   {func() []byte { p := seal(5); p[len(p)-TagLen-1] ^= 1; return p }, ErrBadTag},
		"replayed under another sequence": {func() []byte {
			p := seal(5)
			binary.BigEndian.PutUint64(p[10:], 9)
			return p
		}, ErrBadTag},
		"another session": {func() []byte {
			p := seal(5)
			p[9] = '2'
			return p
		}, ErrUnknownEpoch},
		"epoch not held": {func() []byte {
			s, _ := other.Seal(packet(session, 5, 3, 50))
			return s
		}, ErrUnknownEpoch},
		"epoch relabelled": {func() []byte {
			s, _ := other.Seal(packet(session, 5, 3, 50))
			binary.BigEndian.PutUint32(s[len(s)-Overhead:], 3)
			return s
		}, ErrBadTag},
		"truncated tag": {func() []byte {
			p := seal(5)
			p = p[:len(p)-4]
			// keep the framing exact: the last block loses 4 bytes too
			off, _, _ := lastBlock(append(p[:len(p):len(p)], 0, 0, 0, 0))
			binary.BigEndian.PutUint16(p[off:], binary.BigEndian.Uint16(p[off:])-4)
			return p
		}, errTruncated},
		"unsealed":           {func() []byte { return packet(session, 5, 3, 10) }, ErrShort},
		"heartbeat":          {func() []byte { return mold.AppendHeartbeat(nil, session, 5) }, ErrNotSealable},
		"bytes after blocks": {func() []byte { return append(seal(5), 0) }, ErrNotSealable},
		"not a packet":       {func() []byte { return []byte("hello") }, ErrNotSealable},
	}
	for name, c := range cases {
		p := c.p()
		before := append([]byte(nil), p...)
		_, err := ks.Open(p)
		if c.want == errTruncated {
			// The trailer moved: the epoch read is another one, or the tag fails.
			if !errors.Is(err, ErrUnknownEpoch) && !errors.Is(err, ErrBadTag) {
				t.Errorf("%s: Open error %v, want an unknown epoch or a bad tag", name, err)
			}
		} else if !errors.Is(err, c.want) {
			t.Errorf("%s: Open error %v, want %v", name, err, c.want)
		}
		if !bytes.Equal(p, before) {
			t.Errorf("%s: a refused packet was changed", name)
		}
	}
}

var errTruncated = errors.New("truncated")

func TestSealNeedsRoom(t *testing.T) {
	k, session := testKey(t, 1)
	p := packet(session, 1, 2, 10)
	if _, err := k.Seal(p[:len(p):len(p)]); err == nil {
		t.Fatal("Seal without room for the seal succeeded")
	}
	if _, err := k.Seal(mold.AppendHeartbeat(make([]byte, 0, 64), session, 3)); !errors.Is(err, ErrNotSealable) {
		t.Fatalf("Seal of a heartbeat: %v, want ErrNotSealable", err)
	}
}

func TestDeriveKeyDiffers(t *testing.T) {
	secret := bytes.Repeat([]byte{1}, SecretLen)
	s1, _ := mold.ParseSession("0A2K9Z0001")
	s2, _ := mold.ParseSession("0A2K9Z0002")
	seen := map[string]string{}
	for _, c := range []struct {
		name    string
		session mold.Session
		ch      int
		epoch   uint32
	}{{"base", s1, 0, 0}, {"session", s2, 0, 0}, {"channel", s1, 1, 0}, {"epoch", s1, 0, 1}} {
		k, err := DeriveKey(secret, c.session, c.ch, c.epoch)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[string(k)]; ok {
			t.Fatalf("%s and %s derive the same key", c.name, prev)
		}
		seen[string(k)] = c.name
	}
	if _, err := DeriveKey([]byte("short"), s1, 0, 0); err == nil {
		t.Fatal("a short secret was accepted")
	}
}

func TestSealOpenAllocs(t *testing.T) {
	k, session := testKey(t, 3)
	checkSealOpenAllocs(t, "Seal and Open of a packet", k, session)
}

func checkSealOpenAllocs(t *testing.T, what string, k *Key, session mold.Session) {
	t.Helper()
	var ks Keys
	ks.Set(session, []*Key{k})
	p := packet(session, 1, 20, 68)
	n := len(p)
	testenv.NoAllocs(t, what, 100, 1, func() {
		s, err := k.Seal(p[:n])
		if err != nil {
			panic(err)
		}
		if _, err := ks.Open(s); err != nil {
			panic(err)
		}
	})
}

func benchPacket(b *testing.B) (*Key, *Keys, []byte) {
	k, session := testKey(b, 3)
	ks := &Keys{}
	ks.Set(session, []*Key{k})
	p := packet(session, 1, 1, 1400-mold.HeaderLen-mold.BlockHdrLen-Overhead)
	return k, ks, p
}

// BenchmarkSeal seals a 1,400-byte packet (its size with the seal).
func BenchmarkSeal(b *testing.B) {
	k, _, p := benchPacket(b)
	benchSeal(b, k, p)
}

func benchSeal(b *testing.B, k *Key, p []byte) {
	n := len(p)
	b.SetBytes(int64(n + Overhead))
	b.ReportAllocs()
	for b.Loop() {
		// Seal lengthens the last block; put it back for the next round.
		s, _ := k.Seal(p[:n])
		off, _, _ := lastBlock(s)
		binary.BigEndian.PutUint16(s[off:], binary.BigEndian.Uint16(s[off:])-Overhead)
	}
}

// BenchmarkOpen opens a sealed 1,400-byte packet.
func BenchmarkOpen(b *testing.B) {
	k, ks, p := benchPacket(b)
	s, _ := k.Seal(p)
	sealed := append([]byte(nil), s...)
	off, _, _ := lastBlock(sealed)
	b.SetBytes(int64(len(sealed)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ks.Open(s); err != nil {
			b.Fatal(err)
		}
		binary.BigEndian.PutUint16(s[off:], binary.BigEndian.Uint16(sealed[off:]))
	}
}

// TestScheduleRotates: packets sealed across a rotation open with the keys
// a reply gives at either side of it, and a key of a later epoch is not
// given early.
func TestScheduleRotates(t *testing.T) {
	session, _ := mold.ParseSession("0A2K9Z0001")
	s, err := NewSchedule(session, 2, NewSecret(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t0 := int64(1_800_000_000_000_000_000) // an epoch boundary for a 2 s rotation
	r, _ := ReplyFor(s, t0-1)
	b, _ := json.Marshal(r)
	sess, keys, rot, err := ParseReply(b, 2)
	if err != nil || sess != session || rot != 2*time.Second || len(keys) != 3 {
		t.Fatalf("ParseReply: %v, %v, %v, %d keys", err, sess, rot, len(keys))
	}
	var ks Keys
	ks.Set(sess, keys)
	for _, at := range []int64{t0 - 1, t0, t0 + int64(2*time.Second) - 1} {
		p, err := s.Seal(packet(session, 7, 2, 20), at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ks.Open(p); err != nil {
			t.Fatalf("sealed at %d: %v", at-t0, err)
		}
	}
	p, _ := s.Seal(packet(session, 7, 2, 20), t0+int64(2*time.Second))
	if _, err := ks.Open(p); !errors.Is(err, ErrUnknownEpoch) {
		t.Fatalf("a packet two epochs on opened with the keys given before: %v", err)
	}
	if _, _, _, err := ParseReply(b, 1); err == nil {
		t.Fatal("a reply for channel 2 was taken for channel 1")
	}
	if _, err := NewSchedule(session, 0, NewSecret(), time.Millisecond); err == nil {
		t.Fatal("a 1 ms rotation was accepted")
	}
}
