package recovery

// The retransmission store (ring) is tested through Channel, its only user:
// OnPacket appends, and Read, Session, Oldest, Next and Len are the store's.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
)

// readAll reads from..from+count-1 and returns copies of the messages,
// checking that fn sees consecutive sequences.
func readAll(t testing.TB, r *Channel, session mold.Session, from uint64, count int) ([][]byte, error) {
	t.Helper()
	var out [][]byte
	want := from
	err := r.Read(session, from, count, func(seq uint64, msg []byte) error {
		if seq != want {
			t.Fatalf("read: got sequence %d, want %d", seq, want)
		}
		want++
		out = append(out, clone(msg))
		return nil
	})
	return out, err
}

func TestStoreConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg   StoreConfig
		field string
	}{
		{StoreConfig{MaxMessages: -1}, "MaxMessages"},
		{StoreConfig{MaxBytes: -5}, "MaxBytes"},
		{StoreConfig{MaxBytes: 1000}, "MaxBytes"},
		{StoreConfig{MaxMessages: 1 << 41}, "MaxMessages"},
		{StoreConfig{MaxBytes: 1 << 41}, "MaxBytes"},
	} {
		_, err := NewChannel(tc.cfg)
		checkConfigError(t, err, "StoreConfig", tc.field)
	}
	s := newTestChannel(t, StoreConfig{})
	if s.store.cfg.MaxMessages != DefaultMaxMessages || s.store.cfg.MaxBytes != DefaultMaxBytes {
		t.Errorf("defaults: got %+v", s.store.cfg)
	}
	if _, ok := s.Session(); ok {
		t.Error("new store has a session")
	}
	if s.Oldest() != 1 || s.Next() != 1 {
		t.Errorf("new store: oldest %d next %d, want 1 1", s.Oldest(), s.Next())
	}
}

func TestStoreRoundTrip(t *testing.T) {
	st := newStream(t, "RT00000001", 50, 1, true)
	s := newTestChannel(t, StoreConfig{})
	var want [][]byte
	for range 500 {
		first, pkt := st.packet(20, func(_ uint64, msg []byte) { want = append(want, clone(msg)) })
		if err := s.OnPacket(st.session, first, pkt); err != nil {
			t.Fatal(err)
		}
	}
	if s.Next() != uint64(len(want))+1 || s.Oldest() != 1 {
		t.Fatalf("oldest %d next %d, want 1 %d", s.Oldest(), s.Next(), len(want)+1)
	}
	n, b := s.Len()
	total := 0
	for _, m := range want {
		total += len(m)
	}
	if n != len(want) || b != total {
		t.Errorf("Len = %d, %d, want %d, %d", n, b, len(want), total)
	}
	got, err := readAll(t, s, st.session, 1, len(want))
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("message %d: got %x, want %x", i+1, got[i], want[i])
		}
	}
	// Arbitrary sub-ranges.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		from := 1 + rng.IntN(len(want))
		count := 1 + rng.IntN(len(want)-from+1)
		got, err := readAll(t, s, st.session, uint64(from), count)
		if err != nil {
			t.Fatalf("read %d+%d: %v", from, count, err)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[from-1+i]) {
				t.Fatalf("message %d differs", from+i)
			}
		}
	}
	if sess, ok := s.Session(); !ok || sess != st.session {
		t.Errorf("Session = %v %v", sess, ok)
	}
}

// fixedMsg returns message seq of length l: the sequence repeated.
func fixedMsg(seq uint64, l int) []byte {
	b := make([]byte, l)
	for i := range b {
		b[i] = byte(seq>>(8*(i%8))) ^ byte(i)
	}
	return b
}

func checkBoundaries(t *testing.T, s *Channel, session mold.Session, wantHeld int, msgOf func(uint64) []byte) {
	t.Helper()
	oldest, next := s.Oldest(), s.Next()
	if int(next-oldest) != wantHeld {
		t.Fatalf("oldest %d next %d: %d held, want %d", oldest, next, next-oldest, wantHeld)
	}
	if oldest > 1 {
		err := s.Read(session, oldest-1, 1, func(uint64, []byte) error { t.Fatal("fn called"); return nil })
		var tooOld *TooOldError
		if !errors.As(err, &tooOld) || !errors.Is(err, ErrTooOld) || tooOld.Oldest != oldest ||
			!strings.Contains(err.Error(), fmt.Sprintf("oldest held is %d", oldest)) {
			t.Fatalf("read %d: %v, want too old with oldest %d", oldest-1, err, oldest)
		}
		// A range from before the oldest into the held ones is too old, and
		// fn is not called for the part that is held.
		err = s.Read(session, oldest-1, 3, func(uint64, []byte) error { t.Fatal("fn called"); return nil })
		if !errors.Is(err, ErrTooOld) {
			t.Fatalf("read straddling oldest: %v", err)
		}
	}
	got, err := readAll(t, s, session, oldest, wantHeld)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if want := msgOf(oldest + uint64(i)); !bytes.Equal(m, want) {
			t.Fatalf("message %d differs", oldest+uint64(i))
		}
	}
	err = s.Read(session, next-1, 2, func(uint64, []byte) error { t.Fatal("fn called"); return nil })
	var notYet *NotYetError
	if !errors.As(err, &notYet) || !errors.Is(err, ErrNotYet) || notYet.Next != next {
		t.Fatalf("read %d+2: %v, want not yet with next %d", next-1, err, next)
	}
}

func TestStoreEvictByCount(t *testing.T) {
	// The index ring is allocated at its limit: it fills, then evicts.
	for _, max := range []int{100, 10_000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			s := newTestChannel(t, StoreConfig{MaxMessages: max})
			st := newStream(t, "EC00000001", 30, 2, false)
			all := map[uint64][]byte{}
			for pkt := 0; st.seq < uint64(5*max); pkt++ {
				first, p := st.packet(7, func(seq uint64, msg []byte) { all[seq] = clone(msg) })
				if err := s.OnPacket(st.session, first, p); err != nil {
					t.Fatal(err)
				}
				near := func(x int) bool { return int(st.seq) >= x && int(st.seq) < x+14 }
				if max > 1000 && pkt%101 != 0 && !near(max) && !near(4096) && !near(8192) {
					continue
				}
				held := min(int(st.seq), max)
				checkBoundaries(t, s, st.session, held, func(seq uint64) []byte { return all[seq] })
				n, b := s.Len()
				sum := 0
				for seq := s.Oldest(); seq < s.Next(); seq++ {
					sum += len(all[seq])
				}
				if n != held || b != sum {
					t.Fatalf("Len = %d, %d, want %d, %d", n, b, held, sum)
				}
			}
			if s.Oldest() != s.Next()-uint64(max) {
				t.Errorf("oldest %d, want %d", s.Oldest(), s.Next()-uint64(max))
			}
		})
	}
}

func TestStoreEvictByBytes(t *testing.T) {
	for _, tc := range []struct {
		maxBytes, msgLen int
	}{
		{mold.MaxMessageLen, 100}, // 655 per lap, 35-byte tail wasted
		{1 << 20, 1000},
		{1<<20 + 7, 333},
	} {
		t.Run(fmt.Sprintf("%d/%d", tc.maxBytes, tc.msgLen), func(t *testing.T) {
			s := newTestChannel(t, StoreConfig{MaxBytes: tc.maxBytes})
			session := mustSession(t, "EB00000001")
			perLap := tc.maxBytes / tc.msgLen
			msgOf := func(seq uint64) []byte { return fixedMsg(seq, tc.msgLen) }
			next := uint64(1)
			for next <= uint64(5*perLap) {
				msgs := [][]byte{msgOf(next), msgOf(next + 1), msgOf(next + 2)}
				if err := s.OnPacket(session, next, rawPacket(t, session, next, msgs...)); err != nil {
					t.Fatal(err)
				}
				next += 3
				if next%97 < 3 || next > uint64(perLap) && next < uint64(perLap)+9 {
					// Until the ring is full nothing is evicted; after,
					// exactly one lap of messages is held.
					checkBoundaries(t, s, session, min(int(next-1), perLap), msgOf)
				}
			}
			checkBoundaries(t, s, session, perLap, msgOf)
			n, b := s.Len()
			if n != perLap || b != perLap*tc.msgLen {
				t.Errorf("Len = %d, %d, want %d, %d", n, b, perLap, perLap*tc.msgLen)
			}
		})
	}
}

func TestStoreWrapManyCycles(t *testing.T) {
	// Random lengths 0..3000 (one in ten zero) in a byte ring: many laps,
	// every tail wasted differently. Every held message is read back and
	// compared with the original after every packet (the 64 KiB ring), or
	// every few packets (the 1 MiB ring).
	for _, tc := range []struct {
		maxBytes, maxMessages, laps, every int
	}{
		{mold.MaxMessageLen, 100, 200, 1},
		{1<<20 + 13, 5000, 12, 37},
	} {
		t.Run(fmt.Sprint(tc.maxBytes), func(t *testing.T) {
			s := newTestChannel(t, StoreConfig{MaxBytes: tc.maxBytes, MaxMessages: tc.maxMessages})
			session := mustSession(t, "WR00000001")
			rng := rand.New(rand.NewPCG(5, 6))
			all := map[uint64][]byte{}
			next := uint64(1)
			var written int
			for pkt := 0; written < tc.laps*tc.maxBytes; pkt++ {
				k := 1 + rng.IntN(5)
				msgs := make([][]byte, k)
				for i := range msgs {
					l := rng.IntN(3001)
					if rng.IntN(10) == 0 {
						l = 0
					}
					msgs[i] = fixedMsg(next+uint64(i), l)
					all[next+uint64(i)] = msgs[i]
					written += l
				}
				if err := s.OnPacket(session, next, rawPacket(t, session, next, msgs...)); err != nil {
					t.Fatal(err)
				}
				next += uint64(k)
				oldest := s.Oldest()
				if s.Next() != next {
					t.Fatalf("next %d, want %d", s.Next(), next)
				}
				for seq := range all {
					if seq < oldest-1 {
						delete(all, seq)
					}
				}
				if pkt%tc.every != 0 {
					continue
				}
				held := int(next - oldest)
				if held < 1 || held > tc.maxMessages {
					t.Fatalf("%d held", held)
				}
				got, err := readAll(t, s, session, oldest, held)
				if err != nil {
					t.Fatal(err)
				}
				sum := 0
				for i, m := range got {
					want := all[oldest+uint64(i)]
					if !bytes.Equal(m, want) {
						t.Fatalf("after %d bytes: message %d: %d bytes read back differ from the %d written", written, oldest+uint64(i), len(m), len(want))
					}
					sum += len(m)
				}
				if _, b := s.Len(); b != sum || b > tc.maxBytes {
					t.Fatalf("Len bytes %d, held sum %d, max %d", b, sum, tc.maxBytes)
				}
				// Eviction keeps as much as fits: the message before the
				// oldest (the last one evicted) did not fit with the ones
				// after it in one lap of the ring, counting at most two
				// wasted tails.
				if prev, ok := all[oldest-1]; ok && held < tc.maxMessages && sum+len(prev) <= tc.maxBytes-2*3001 {
					t.Fatalf("evicted %d although %d+%d bytes fit", oldest-1, sum, len(prev))
				}
			}
			if len(s.store.buf) != tc.maxBytes {
				t.Errorf("byte ring of %d bytes, want %d", len(s.store.buf), tc.maxBytes)
			}
		})
	}
}

func TestStoreZeroLength(t *testing.T) {
	s := newTestChannel(t, StoreConfig{MaxMessages: 1000})
	session := mustSession(t, "ZL00000001")
	next := uint64(1)
	for range 500 {
		msgs := make([][]byte, 9)
		for i := range msgs {
			msgs[i] = []byte{}
		}
		if err := s.OnPacket(session, next, rawPacket(t, session, next, msgs...)); err != nil {
			t.Fatal(err)
		}
		next += 9
	}
	n, b := s.Len()
	if n != 1000 || b != 0 {
		t.Fatalf("Len = %d, %d, want 1000, 0", n, b)
	}
	calls := 0
	err := s.Read(session, s.Oldest(), 1000, func(_ uint64, msg []byte) error {
		calls++
		if len(msg) != 0 {
			t.Fatalf("message of %d bytes", len(msg))
		}
		return nil
	})
	if err != nil || calls != 1000 {
		t.Fatalf("read: %v, %d calls", err, calls)
	}
}

func TestStoreErrors(t *testing.T) {
	s := newTestChannel(t, StoreConfig{})
	a := mustSession(t, "AAAAAAAAA1")
	b := mustSession(t, "BBBBBBBBB2")
	msg := []byte("hello")
	noCall := func(uint64, []byte) error { t.Fatal("fn called"); return nil }

	if err := s.Read(a, 1, 1, noCall); err != ErrUnknownSession {
		t.Errorf("read of empty store: %v, want ErrUnknownSession", err)
	}
	// A new session must start at 1.
	err := s.OnPacket(a, 5, rawPacket(t, a, 5, msg))
	var se *SequenceError
	if !errors.As(err, &se) || se.Expected != 1 || se.Got != 5 || !strings.Contains(err.Error(), "AAAAAAAAA1") {
		t.Fatalf("append at 5 to empty store: %v", err)
	}
	if _, ok := s.Session(); ok {
		t.Fatal("rejected append set the session")
	}
	if err := s.OnPacket(a, 1, rawPacket(t, a, 1, msg, msg, msg)); err != nil {
		t.Fatal(err)
	}
	// Gap and duplicate are rejected and change nothing.
	for _, first := range []uint64{5, 3, 1} {
		err := s.OnPacket(a, first, rawPacket(t, a, first, msg))
		if !errors.As(err, &se) || se.Expected != 4 || se.Got != first ||
			!strings.Contains(err.Error(), fmt.Sprintf("sequence %d, expected 4", first)) {
			t.Errorf("append at %d: %v", first, err)
		}
	}
	if s.Next() != 4 {
		t.Fatalf("next %d after rejected appends", s.Next())
	}
	// Header disagreeing with the arguments, malformed packet.
	if err := s.OnPacket(a, 4, rawPacket(t, a, 5, msg)); err == nil || !strings.Contains(err.Error(), "header") {
		t.Errorf("mismatched header: %v", err)
	}
	if err := s.OnPacket(b, 1, rawPacket(t, a, 1, msg)); err == nil {
		t.Error("mismatched session accepted")
	}
	bad := rawPacket(t, a, 4, msg)
	if err := s.OnPacket(a, 4, bad[:len(bad)-1]); !errors.Is(err, mold.ErrBlockPastEnd) {
		t.Errorf("truncated packet: %v", err)
	}
	// Heartbeat continuing the stream is fine and stores nothing.
	if err := s.OnPacket(a, 4, mold.AppendHeartbeat(nil, a, 4)); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
	// Reads: unknown session, bad arguments, not yet.
	if err := s.Read(b, 1, 1, noCall); err != ErrUnknownSession {
		t.Errorf("read of other session: %v", err)
	}
	for _, r := range [][2]int{{0, 1}, {1, 0}, {1, -1}} {
		if err := s.Read(a, uint64(r[0]), r[1], noCall); err == nil || !strings.Contains(err.Error(), "sequence") {
			t.Errorf("read %v: %v", r, err)
		}
	}
	for _, r := range [][2]uint64{{4, 1}, {3, 2}, {100, 1}, {^uint64(0), 5}, {2, 1 << 62}} {
		err := s.Read(a, r[0], int(r[1]), noCall)
		var ny *NotYetError
		if !errors.As(err, &ny) || ny.Next != 4 || !strings.Contains(err.Error(), "next is 4") {
			t.Errorf("read %v: %v, want not yet", r, err)
		}
	}
	// fn's error is returned as is and stops the read.
	stop := errors.New("stop")
	calls := 0
	if err := s.Read(a, 1, 3, func(uint64, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("fn error: %v after %d calls", err, calls)
	}
	// A new session resets the store.
	if err := s.OnPacket(b, 1, rawPacket(t, b, 1, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if sess, _ := s.Session(); sess != b || s.Oldest() != 1 || s.Next() != 2 {
		t.Errorf("after new session: %v oldest %d next %d", sess, s.Oldest(), s.Next())
	}
	if n, nb := s.Len(); n != 1 || nb != 1 {
		t.Errorf("after new session: Len %d %d", n, nb)
	}
	if err := s.Read(a, 1, 1, noCall); err != ErrUnknownSession {
		t.Errorf("read of the old session: %v", err)
	}
	got, err := readAll(t, s, b, 1, 1)
	if err != nil || string(got[0]) != "x" {
		t.Errorf("read of new session: %q %v", got, err)
	}
	// A new session starting with a heartbeat at 1.
	c := mustSession(t, "CCCCCCCCC3")
	if err := s.OnPacket(c, 1, mold.AppendHeartbeat(nil, c, 1)); err != nil {
		t.Fatal(err)
	}
	if sess, _ := s.Session(); sess != c || s.Oldest() != 1 || s.Next() != 1 {
		t.Errorf("after heartbeat of new session: %v oldest %d next %d", sess, s.Oldest(), s.Next())
	}
}

// TestStoreConcurrentReaders runs readers against a channel whose store is
// being appended to (run with -race). Message content is a function of the sequence, so a
// reader checks every message it gets.
func TestStoreConcurrentReaders(t *testing.T) {
	const instruments = 40
	s := newTestChannel(t, StoreConfig{MaxMessages: 2000, MaxBytes: 100_000})
	st := newStream(t, "CR00000001", instruments, 9, false)
	expect := func(syn *feed.Synthetic, seq uint64, m *feed.Msg, buf []byte) []byte {
		syn.Expect(0, seq, m)
		m.RecvNs = 0
		m.SendNs = 0
		n, err := m.Encode(buf)
		if err != nil {
			panic(err)
		}
		return buf[:n]
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads, tooOld, msgs atomic.Int64
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			syn, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 9, Instruments: instruments, Channels: 1})
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			var m feed.Msg
			var buf [feed.MaxLen]byte
			for !done.Load() {
				oldest, next := s.Oldest(), s.Next()
				if next == oldest {
					continue
				}
				from := oldest + uint64(rng.IntN(int(next-oldest)))
				count := 1 + rng.IntN(int(next-from))
				err := s.Read(st.session, from, count, func(seq uint64, msg []byte) error {
					want := expect(syn, seq, &m, buf[:])
					// Timestamps were stamped by the stream; compare the rest.
					if len(msg) != len(want) || !bytes.Equal(msg[:20], want[:20]) || !bytes.Equal(msg[36:], want[36:]) {
						return fmt.Errorf("message %d: got %x want %x", seq, msg, want)
					}
					msgs.Add(1)
					return nil
				})
				switch {
				case err == nil:
					reads.Add(1)
				case errors.Is(err, ErrTooOld):
					tooOld.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	for st.seq < 200_000 {
		first, pkt := st.packet(20, nil)
		if err := s.OnPacket(st.session, first, pkt); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d reads (%d messages), %d too old", reads.Load(), msgs.Load(), tooOld.Load())
	if reads.Load() == 0 {
		t.Error("no successful read")
	}
}

func BenchmarkRead(b *testing.B) {
	s := newTestChannel(b, StoreConfig{MaxMessages: 1 << 16, MaxBytes: 4 << 20})
	st := newStream(b, "BR00000001", 1000, 13, false)
	for st.seq < 100_000 {
		first, pkt := st.packet(20, nil)
		if err := s.OnPacket(st.session, first, pkt); err != nil {
			b.Fatal(err)
		}
	}
	oldest, next := s.Oldest(), s.Next()
	var out [100 * (feed.MaxLen + 2)]byte
	var off int
	fn := func(_ uint64, msg []byte) error {
		off += copy(out[off:], msg)
		return nil
	}
	span := int(next - oldest - 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		off = 0
		if err := s.Read(st.session, oldest+uint64((i*7919)%span), 100, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// checkConfigError fails unless err is a *config.Error naming structName's
// field.
func checkConfigError(t *testing.T, err error, structName, field string) {
	t.Helper()
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Pkg != "recovery" || ce.Struct != structName || ce.Field != field {
		t.Errorf("got %v, want a *config.Error naming %s.%s", err, structName, field)
	}
}
