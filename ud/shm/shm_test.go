package shm

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
)

// Every test makes its ring files in a directory of its own: under /dev/shm
// where the host has it (the transport's home), else in t.TempDir(). Rings
// are small, so that laps come quickly.

// ringDir returns a fresh directory for ring files, removed after the test.
func ringDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat(DefaultDir); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp(DefaultDir, "tickcast-shm-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func testConfig(dir string, mode ud.Mode) Config {
	c := Config{
		Dir:           dir,
		Name:          "ring",
		Slots:         1024,
		MaxDatagram:   512,
		RingSlots:     256,
		Mode:          mode,
		CPU:           -1,
		CheckInterval: 5 * time.Millisecond,
	}
	if mode == Direct {
		c.Notifier = ud.NewNotifier()
	}
	return c
}

func newSender(t testing.TB, c Config) *Sender {
	t.Helper()
	s, err := NewSender(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newReceiver(t testing.TB, c Config) *Receiver {
	t.Helper()
	r, err := NewReceiver(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// packet returns test packet i of a session: a 10-byte session, its index,
// bytes that are a function of both, and a CRC-32 of all that, so a torn
// or misplaced packet fails check. Its length varies with i.
func packet(buf []byte, session string, i uint64, maxSize int) []byte {
	sizes := [...]int{22, 23, 40, 64, 100, 200, 333, 511, 512}
	n := min(sizes[i%uint64(len(sizes))], maxSize)
	b := buf[:n]
	copy(b, session)
	binary.BigEndian.PutUint64(b[10:], i)
	for k := 18; k < n-4; k++ {
		b[k] = byte(i*131 + uint64(k))
	}
	binary.BigEndian.PutUint32(b[n-4:], crc32.ChecksumIEEE(b[:n-4]))
	return b
}

// checkPacket returns a packet's session and index, or fails the test if
// the packet is not whole.
func checkPacket(t testing.TB, b []byte) (string, uint64) {
	t.Helper()
	if len(b) < 22 {
		t.Fatalf("packet of %d bytes", len(b))
	}
	if got, want := binary.BigEndian.Uint32(b[len(b)-4:]), crc32.ChecksumIEEE(b[:len(b)-4]); got != want {
		t.Fatalf("torn packet (index field %d, %d bytes): crc %08x, want %08x", binary.BigEndian.Uint64(b[10:]), len(b), got, want)
	}
	return string(b[:10]), binary.BigEndian.Uint64(b[10:])
}

// consumer drives a receiver as its consumer does in each mode: Wait for
// the threaded modes and Direct without a Notifier, the Notifier's wait
// with Fill as its poll in Direct, Fill in DirectSpin.
func consume(r *Receiver) {
	switch {
	case r.cfg.Mode == Direct && r.cfg.Notifier != nil:
		if r.Fill() == 0 {
			r.cfg.Notifier.Wait(10*time.Millisecond, nil, r.Fill)
		}
	case r.cfg.Mode == DirectSpin:
		r.Fill()
	default:
		_ = r.Wait(10 * time.Millisecond)
	}
}

// take consumes until fn, called with each packet in order, returns false
// or the deadline passes.
func take(t testing.TB, r *Receiver, timeout time.Duration, fn func(p []byte) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("deadline passed; stats %+v, err %v", r.Stats(), r.Err())
		}
		consume(r)
		i := 0
		for ; ; i++ {
			s := r.Peek(i)
			if s == nil {
				break
			}
			if !fn(s.Data()) {
				r.Release(i + 1)
				return
			}
		}
		r.Release(i)
	}
}

type modeCase struct {
	name   string
	mode   ud.Mode
	notify bool
}

var modeCases = []modeCase{
	{"blocking", Blocking, false},
	{"busy-poll", BusyPoll, false},
	{"direct", Direct, true},
	{"direct-wait", Direct, false},
	{"direct-spin", DirectSpin, false},
}

// TestInOrder: every packet arrives whole and in order, in every mode, with
// a writer that keeps within a ring of the reader (so nothing is lapped).
func TestInOrder(t *testing.T) {
	for _, mc := range modeCases {
		t.Run(mc.name, func(t *testing.T) {
			c := testConfig(ringDir(t), mc.mode)
			if !mc.notify {
				c.Notifier = nil
			}
			if mc.mode == Blocking {
				c.SpinPolls = 100
			}
			s := newSender(t, c)
			r := newReceiver(t, c)
			const n = 20000
			var got atomic.Uint64
			sent := make(chan error, 1)
			go func() {
				buf := make([]byte, c.MaxDatagram)
				batch := make([][]byte, 0, 40)
				bufs := make([][]byte, 40)
				for k := range bufs {
					bufs[k] = make([]byte, c.MaxDatagram)
				}
				for i, step := uint64(0), 1; i < n; step = step%37 + 1 {
					for i-got.Load() > uint64(c.Slots/2) {
						time.Sleep(20 * time.Microsecond) // keep within the ring
					}
					batch = batch[:0]
					for k := 0; k < step && i < n; k++ {
						batch = append(batch, packet(bufs[k], "SESSION001", i, len(buf)))
						i++
					}
					if err := s.Send(batch); err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			var bytes uint64
			take(t, r, 20*time.Second, func(p []byte) bool {
				sess, i := checkPacket(t, p)
				if want := got.Load(); i != want || sess != "SESSION001" {
					t.Fatalf("packet %d of session %q, want %d", i, sess, want)
				}
				bytes += uint64(len(p))
				return got.Add(1) < n
			})
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			rs, ss := r.Stats(), s.Stats()
			if rs.Datagrams != n || rs.Bytes != bytes || rs.KernelDrops != 0 || rs.Errors != 0 {
				t.Errorf("receiver stats %+v, want %d packets, %d bytes, none lost", rs, n, bytes)
			}
			if ss.Datagrams != n || ss.Bytes != bytes || ss.Errors != 0 {
				t.Errorf("sender stats %+v", ss)
			}
			if err := r.Err(); err != nil {
				t.Errorf("Err: %v", err)
			}
			t.Logf("receiver %+v; sender futex wakes %d", rs, ss.Syscalls)
		})
	}
}

// TestLapped: a reader that falls behind loses exactly the packets the
// writer overwrote, never sees a torn one, and goes on from the oldest.
// First deterministically (the consumer takes nothing while the writer
// writes ten rings' worth), then with a writer hammering a small ring while
// a slow consumer copies.
func TestLapped(t *testing.T) {
	for _, mode := range []ud.Mode{Blocking, DirectSpin} {
		t.Run(mode.String(), func(t *testing.T) {
			c := testConfig(ringDir(t), mode)
			c.Slots = 64
			c.RingSlots = 16
			s := newSender(t, c)
			r := newReceiver(t, c)
			buf := make([]byte, c.MaxDatagram)
			batch := make([][]byte, 1)
			send := func(i uint64) {
				batch[0] = packet(buf, "LAPSESSION", i, len(buf))
				if err := s.Send(batch); err != nil {
					t.Error(err)
				}
			}
			// Phase 1: ten laps while nobody consumes.
			const phase1 = 640
			for i := uint64(0); i < phase1; i++ {
				send(i)
			}
			var delivered, gaps, next uint64
			see := func(p []byte) {
				_, i := checkPacket(t, p)
				if i < next {
					t.Fatalf("packet %d after %d", i, next-1)
				}
				gaps += i - next
				next = i + 1
				delivered++
			}
			take(t, r, 10*time.Second, func(p []byte) bool { see(p); return next < phase1 })
			if st := r.Stats(); st.KernelDrops == 0 || st.KernelDrops != gaps || st.Datagrams+st.KernelDrops != phase1 {
				t.Fatalf("phase 1: stats %+v, %d delivered, gaps %d: want KernelDrops = gaps > 0 and Datagrams + KernelDrops = %d", st, delivered, gaps, phase1)
			}
			// Phase 2: the writer hammers while the consumer dawdles.
			const total = 200000
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, c.MaxDatagram)
				b := make([][]byte, 1)
				for i := uint64(phase1); i < total; i++ {
					b[0] = packet(buf, "LAPSESSION", i, len(buf))
					if err := s.Send(b); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			k := 0
			take(t, r, 20*time.Second, func(p []byte) bool {
				see(p)
				if k++; k%50 == 0 {
					time.Sleep(10 * time.Microsecond)
				}
				return next < total
			})
			<-done
			st := r.Stats()
			if st.KernelDrops != gaps || st.Datagrams+st.KernelDrops != total || st.Datagrams != delivered {
				t.Fatalf("stats %+v, delivered %d, gaps %d: want KernelDrops = gaps and Datagrams + KernelDrops = %d", st, delivered, gaps, total)
			}
			t.Logf("%d packets: %d delivered whole, %d lost to laps, counted exactly", total, delivered, gaps)
		})
	}
}

// TestWriterRestart: a reader sees a new writer's ring (a new generation,
// a new session) and reads it from its start, after the old one's last
// packet.
func TestWriterRestart(t *testing.T) {
	for _, mode := range []ud.Mode{Blocking, Direct} {
		t.Run(mode.String(), func(t *testing.T) {
			c := testConfig(ringDir(t), mode)
			s1 := newSender(t, c)
			r := newReceiver(t, c)
			gen1 := r.Generation()
			if gen1 != s1.Generation() || gen1 == 0 {
				t.Fatalf("reader generation %d, writer's %d", gen1, s1.Generation())
			}
			buf := make([]byte, c.MaxDatagram)
			for i := uint64(0); i < 10; i++ {
				if err := s1.Send([][]byte{packet(buf, "SESSION-A1", i, len(buf))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s1.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := newSender(t, c)
			if s2.Generation() == gen1 {
				t.Fatalf("the new ring has the old generation %d", gen1)
			}
			for i := uint64(0); i < 5; i++ {
				if err := s2.Send([][]byte{packet(buf, "SESSION-B2", i, len(buf))}); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			take(t, r, 10*time.Second, func(p []byte) bool {
				sess, i := checkPacket(t, p)
				got = append(got, sess+"/"+string(rune('0'+i)))
				return len(got) < 15
			})
			want := "SESSION-A1/0 SESSION-A1/1 SESSION-A1/2 SESSION-A1/3 SESSION-A1/4 SESSION-A1/5 SESSION-A1/6 SESSION-A1/7 SESSION-A1/8 SESSION-A1/9 SESSION-B2/0 SESSION-B2/1 SESSION-B2/2 SESSION-B2/3 SESSION-B2/4"
			if strings.Join(got, " ") != want {
				t.Fatalf("got %v\nwant %s", got, want)
			}
			if r.Restarts() != 1 || r.Generation() != s2.Generation() {
				t.Errorf("Restarts %d, generation %d: want 1, %d", r.Restarts(), r.Generation(), s2.Generation())
			}
			info, err := Inspect(c.Path())
			if err != nil {
				t.Fatal(err)
			}
			if info.Generation != s2.Generation() || info.Session != "SESSION-B2" || info.Position != 5 || info.Closed || info.WriterPID != os.Getpid() {
				t.Errorf("Inspect: %+v", info)
			}
		})
	}
}

// TestReaderBeforeWriter: a reader opened before any ring exists waits
// for it and reads it from its start.
func TestReaderBeforeWriter(t *testing.T) {
	c := testConfig(ringDir(t), Blocking)
	r := newReceiver(t, c)
	if err := r.Err(); !errors.Is(err, ErrNoRing) {
		t.Fatalf("Err before the writer: %v, want ErrNoRing", err)
	}
	s := newSender(t, c)
	buf := make([]byte, c.MaxDatagram)
	for i := uint64(0); i < 3; i++ {
		if err := s.Send([][]byte{packet(buf, "SESSION001", i, len(buf))}); err != nil {
			t.Fatal(err)
		}
	}
	want := uint64(0)
	take(t, r, 10*time.Second, func(p []byte) bool {
		if _, i := checkPacket(t, p); i != want {
			t.Fatalf("packet %d, want %d", i, want)
		}
		want++
		return want < 3
	})
	if err := r.Err(); err != nil || r.Stats().Errors != 0 {
		t.Errorf("Err %v, stats %+v", err, r.Stats())
	}
}

// TestDeleted: a ring file deleted under a reader is reported, the reader
// follows the deleted file while its writer writes, and takes up the next
// ring at the path.
func TestDeleted(t *testing.T) {
	c := testConfig(ringDir(t), Blocking)
	s := newSender(t, c)
	r := newReceiver(t, c)
	buf := make([]byte, c.MaxDatagram)
	if err := os.Remove(c.Path()); err != nil {
		t.Fatal(err)
	}
	i := uint64(0)
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(r.Err(), ErrDeleted) {
		if time.Now().After(deadline) {
			t.Fatalf("Err %v after deleting the ring", r.Err())
		}
		if err := s.Send([][]byte{packet(buf, "SESSION001", i, len(buf))}); err != nil {
			t.Fatal(err)
		}
		i++
		time.Sleep(time.Millisecond)
	}
	t.Logf("Err: %v", r.Err())
	if !strings.Contains(r.Err().Error(), c.Path()) {
		t.Errorf("the error does not name the file")
	}
	want := uint64(0)
	take(t, r, 10*time.Second, func(p []byte) bool {
		if _, k := checkPacket(t, p); k != want {
			t.Fatalf("packet %d, want %d", k, want)
		}
		want++
		return want < i
	})
	s.Close()
	s2 := newSender(t, c)
	if err := s2.Send([][]byte{packet(buf, "SESSION002", 0, len(buf))}); err != nil {
		t.Fatal(err)
	}
	take(t, r, 10*time.Second, func(p []byte) bool {
		if sess, k := checkPacket(t, p); sess != "SESSION002" || k != 0 {
			t.Fatalf("packet %s/%d, want SESSION002/0", sess, k)
		}
		return false
	})
	if r.Err() != nil || r.Stats().Errors != 1 || r.Restarts() != 1 {
		t.Errorf("after the new ring: Err %v, stats %+v, restarts %d", r.Err(), r.Stats(), r.Restarts())
	}
}

// TestTruncated: a ring file truncated under a reader neither crashes it
// (SIGBUS) nor the writer: the reader reports ErrTruncated, whether its
// file check or a copy that faults finds it first, and the writer's Send
// fails with an error.
func TestTruncated(t *testing.T) {
	for _, how := range []string{"check", "fault"} {
		t.Run(how, func(t *testing.T) {
			c := testConfig(ringDir(t), DirectSpin)
			if how == "fault" {
				c.CheckInterval = time.Hour // only the copy can find it
			}
			s := newSender(t, c)
			r := newReceiver(t, c)
			buf := make([]byte, c.MaxDatagram)
			batch := make([][]byte, 100)
			for i := range batch {
				batch[i] = packet(make([]byte, c.MaxDatagram), "SESSION001", uint64(i), len(buf))
			}
			if err := s.Send(batch); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(c.Path(), headerSize); err != nil {
				t.Fatal(err)
			}
			if how == "check" {
				time.Sleep(2 * c.CheckInterval)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !errors.Is(r.Err(), ErrTruncated) {
				if time.Now().After(deadline) {
					t.Fatalf("Err %v", r.Err())
				}
				r.Fill()
				for r.Peek(0) != nil {
					checkPacket(t, r.Peek(0).Data())
					r.Release(1)
				}
				time.Sleep(time.Millisecond)
			}
			t.Logf("reader: %v; stats %+v", r.Err(), r.Stats())
			if r.Stats().Errors != 1 {
				t.Errorf("Errors %d, want 1", r.Stats().Errors)
			}
			if how == "fault" && r.faults.Load() != 1 {
				t.Errorf("faults %d, want 1", r.faults.Load())
			}
			err := s.Send(batch)
			if err == nil || !strings.Contains(err.Error(), c.Path()) {
				t.Fatalf("Send on a truncated ring: %v", err)
			}
			t.Logf("writer: %v", err)
		})
	}
}

// TestTwoWriters: a second writer on one ring is refused, naming the ring
// and the holder's pid.
func TestTwoWriters(t *testing.T) {
	c := testConfig(ringDir(t), Blocking)
	newSender(t, c)
	_, err := NewSender(c)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Path != c.Path() {
		t.Fatalf("second writer: %v, want a *HeldError naming %s and pid %d", err, c.Path(), os.Getpid())
	}
	t.Logf("%v", err)
}

// TestPermissions: what is wrong with the directory or the file is named.
func TestPermissions(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{notDir, filepath.Join(dir, "missing")} {
		c := testConfig(d, Blocking)
		if _, err := NewSender(c); err == nil || !strings.Contains(err.Error(), d) {
			t.Errorf("NewSender in %s: %v", d, err)
		} else {
			t.Logf("writer: %v", err)
		}
		if _, err := NewReceiver(c); err == nil || !strings.Contains(err.Error(), d) {
			t.Errorf("NewReceiver in %s: %v", d, err)
		}
	}
	c := testConfig(dir, Blocking)
	if err := os.WriteFile(c.Path(), []byte("not a ring"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReceiver(c); err == nil || !errors.Is(err, errBadRing) {
		t.Errorf("NewReceiver of a file that is not a ring: %v", err)
	} else {
		t.Logf("reader: %v", err)
	}
	if os.Geteuid() == 0 {
		t.Skip("running as root: file and directory permissions do not bind, so the missing-permission cases cannot be made")
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSender(testConfig(ro, Blocking)); !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "no write permission") {
		t.Errorf("writer in a read-only directory: %v", err)
	}
	c = testConfig(t.TempDir(), Blocking)
	c.FileMode = 0o600
	newSender(t, c)
	if err := os.Chmod(c.Path(), 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReceiver(c); !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "no read and write permission") {
		t.Errorf("waiting reader of a read-only file: %v", err)
	}
	c.Mode = DirectSpin
	r, err := NewReceiver(c)
	if err != nil {
		t.Errorf("spinning reader of a read-only file: %v", err)
	} else {
		r.Close()
	}
}

// TestHooks: the hooks name one ring per channel and refuse line B.
func TestHooks(t *testing.T) {
	c := testConfig(ringDir(t), Blocking)
	c.Feed = "feed1"
	id := ud.LineID{Channel: 3, Line: ud.LineA}
	s, err := Senders(c)(id)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.(*Sender).Path(), filepath.Join(c.Dir, "tickcast-feed1-3"); got != want {
		t.Errorf("ring %s, want %s", got, want)
	}
	r, err := Receivers(c)(id, ud.NewNotifier())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Senders(c)(ud.LineID{Channel: 3, Line: ud.LineB}); !errors.Is(err, ErrLineB) {
		t.Errorf("line B: %v", err)
	}
	c.Feed = "a/b"
	if _, err := Receivers(c)(id, nil); err == nil {
		t.Errorf("Feed with a slash accepted")
	}
}

// TestNoAllocs: no allocation per packet on the writer's side or the
// reader's, in a threaded mode and without a receive loop.
func TestNoAllocs(t *testing.T) {
	for _, mode := range []ud.Mode{Blocking, DirectSpin} {
		t.Run(mode.String(), func(t *testing.T) {
			c := testConfig(ringDir(t), mode)
			s := newSender(t, c)
			r := newReceiver(t, c)
			const per = 32
			batch := make([][]byte, per)
			for i := range batch {
				batch[i] = packet(make([]byte, c.MaxDatagram), "SESSION001", uint64(i), c.MaxDatagram)
			}
			testenv.NoAllocs(t, "Send", 200, per, func() {
				if err := s.Send(batch); err != nil {
					t.Fatal(err)
				}
			})
			// Let the reader catch up (it was lapped) before measuring it.
			sent := s.Stats().Datagrams
			deadline := time.Now().Add(10 * time.Second)
			for st := r.Stats(); st.Datagrams+st.KernelDrops < sent; st = r.Stats() {
				if time.Now().After(deadline) {
					t.Fatalf("reader stuck: %+v of %d", st, sent)
				}
				consume(r)
				for r.Peek(0) != nil {
					r.Release(1)
				}
			}
			testenv.NoAllocs(t, "packet from writer to consumer", 200, per, func() {
				if err := s.Send(batch); err != nil {
					t.Fatal(err)
				}
				for got := 0; got < per; {
					if mode == DirectSpin {
						r.Fill()
					}
					n := 0
					for r.Peek(n) != nil {
						n++
					}
					r.Release(n)
					got += n
					if n == 0 {
						runtime.Gosched() // GOMAXPROCS is 1 here: let the receive loop run
					}
				}
			})
		})
	}
}
