package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
)

// All tests send multicast on the loopback interface only (Interface
// 127.0.0.1, TTL 0), to administratively scoped groups 239.77.x.y, each on a
// UDP port the kernel reported free, so concurrent test binaries do not hear
// each other.

var groupSeq atomic.Uint32

// newGroup returns a fresh group in 239.77.0.0/16.
func newGroup() netip.Addr {
	n := groupSeq.Add(1)
	return netip.AddrFrom4([4]byte{239, 77, byte(n >> 8), byte(n)})
}

// freePort returns a UDP port that was free on 127.0.0.1 a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func testConfig(group netip.Addr, port int, mode Mode) Config {
	c := Config{
		Group:     group,
		Port:      port,
		Interface: netip.AddrFrom4([4]byte{127, 0, 0, 1}),
		TTL:       0,
		Mode:      mode,
		CPU:       -1,
	}
	if mode == Direct {
		c.Notifier = ud.NewNotifier()
	}
	return c
}

// pump receives on a receiver without a receive loop, as its consumer does
// when it wakes; it does nothing for the others.
func pump(r *Receiver) {
	if r.cfg.Mode.Threaded() {
		return
	}
	if r.watching {
		r.cfg.Notifier.SetReady(r.watch, true)
	}
	r.Fill()
}

func newSender(t testing.TB, cfg Config) *Sender {
	t.Helper()
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newReceiver(t testing.TB, cfg Config) *Receiver {
	t.Helper()
	r, err := NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// modes are every receive mode. Without a receive loop (Direct,
// DirectSpin) nothing fills the ring until the consumer asks: Wait does, and
// tests that watch the ring fill call pump.
var modes = ud.Modes

// datagram returns test datagram seq: its size and every byte are functions
// of seq, and datagrams of at least 4 bytes start with seq, so any loss,
// duplicate, reorder or corruption shows.
func datagram(seq, maxSize int) []byte {
	sizes := []int{0, 1, 3, 4, 17, 64, 200, 512, 1000, 1200, maxSize - 1, maxSize}
	b := make([]byte, sizes[seq%len(sizes)])
	for i := range b {
		b[i] = byte(seq*7 + i)
	}
	if len(b) >= 4 {
		binary.BigEndian.PutUint32(b, uint32(seq))
	}
	return b
}

// receive reads n datagrams from r, copying them out, and fails the test if
// they do not all arrive before the deadline.
func receive(t testing.TB, r *Receiver, n int, timeout time.Duration) [][]byte {
	t.Helper()
	out := make([][]byte, 0, n)
	deadline := time.Now().Add(timeout)
	var lastNs int64
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d datagrams before the deadline; stats %+v", len(out), n, r.Stats())
		}
		if err := r.Wait(100 * time.Millisecond); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		i := 0
		for ; len(out) < n; i++ {
			s := r.Peek(i)
			if s == nil {
				break
			}
			if s.RecvNs == 0 || s.RecvNs < lastNs {
				t.Fatalf("datagram %d: RecvNs %d after %d", len(out), s.RecvNs, lastNs)
			}
			lastNs = s.RecvNs
			out = append(out, append([]byte(nil), s.Data()...))
		}
		r.Release(i)
	}
	return out
}

func sendAll(s *Sender, dgs [][]byte) error {
	// Vary the Send call length around the batch size to exercise batch
	// boundaries.
	for i, step := 0, 1; i < len(dgs); step = step%70 + 13 {
		j := min(i+step, len(dgs))
		if err := s.Send(dgs[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func TestSendReceiveInOrder(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig(newGroup(), freePort(t), mode)
			cfg.MaxDatagram = 4000 // loopback carries more than 1472
			r := newReceiver(t, cfg)
			s := newSender(t, cfg)

			const n = 3000
			var want [][]byte
			var wantBytes uint64
			for i := 0; i < n; i++ {
				want = append(want, datagram(i, cfg.MaxDatagram))
				wantBytes += uint64(len(want[i]))
			}
			sent := make(chan error, 1)
			go func() { sent <- sendAll(s, want) }()
			got := receive(t, r, n, 10*time.Second)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if string(got[i]) != string(want[i]) {
					t.Fatalf("datagram %d: got %d bytes %x…, want %d bytes %x…", i,
						len(got[i]), got[i][:min(8, len(got[i]))], len(want[i]), want[i][:min(8, len(want[i]))])
				}
			}
			rs, ss := r.Stats(), s.Stats()
			if rs.Datagrams != n || rs.Bytes != wantBytes || rs.KernelDrops != 0 || rs.Truncated != 0 || rs.Errors != 0 {
				t.Errorf("receiver stats %+v, want %d datagrams, %d bytes, no drops", rs, n, wantBytes)
			}
			if rs.Syscalls == 0 || rs.Syscalls > n {
				t.Errorf("receiver Syscalls %d", rs.Syscalls)
			}
			if ss.Datagrams != n || ss.Bytes != wantBytes || ss.Errors != 0 || ss.Syscalls < n/uint64(DefaultBatch) {
				t.Errorf("sender stats %+v, want %d datagrams, %d bytes", ss, n, wantBytes)
			}
			if r.Peek(0) != nil {
				t.Errorf("extra datagram received: %x", r.Peek(0).Data())
			}
		})
	}
}

func TestTwoReceiversGetEverything(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), Blocking)
	r1 := newReceiver(t, cfg)
	r2 := newReceiver(t, cfg)
	s := newSender(t, cfg)
	const n = 500
	var want [][]byte
	for i := 0; i < n; i++ {
		want = append(want, datagram(i, DefaultMaxDatagram))
	}
	if err := sendAll(s, want); err != nil {
		t.Fatal(err)
	}
	for ri, r := range []*Receiver{r1, r2} {
		got := receive(t, r, n, 5*time.Second)
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("receiver %d datagram %d differs", ri+1, i)
			}
		}
	}
}

// TestReceiverBindsToGroup checks that a receiver on group G does not get
// datagrams sent to group G2 on the same port, although G2 is joined on the
// same interface by another socket of this process.
func TestReceiverBindsToGroup(t *testing.T) {
	port := freePort(t)
	g, g2 := newGroup(), newGroup()
	rG := newReceiver(t, testConfig(g, port, Blocking))
	rG2 := newReceiver(t, testConfig(g2, port, Blocking))

	if la, err := rG.LocalAddr(); err != nil || la != netip.AddrPortFrom(g, uint16(port)) {
		t.Fatalf("LocalAddr = %v, %v; want %v:%d", la, err, g, port)
	}

	sG2 := newSender(t, testConfig(g2, port, Blocking))
	const n = 100
	for i := 0; i < n; i++ {
		if err := sG2.Send([][]byte{[]byte("for G2")}); err != nil {
			t.Fatal(err)
		}
	}
	// rG2 receiving all of them shows they were delivered on this host.
	receive(t, rG2, n, 5*time.Second)

	sG := newSender(t, testConfig(g, port, Blocking))
	if err := sG.Send([][]byte{[]byte("for G")}); err != nil {
		t.Fatal(err)
	}
	// Datagrams are delivered in order per socket, so had any G2 datagram
	// reached rG it would come before this one.
	got := receive(t, rG, 1, 5*time.Second)
	if string(got[0]) != "for G" {
		t.Fatalf("receiver on %v got %q first", g, got[0])
	}
	if st := rG.Stats(); st.Datagrams != 1 {
		t.Fatalf("receiver on %v: %d datagrams, want 1", g, st.Datagrams)
	}
}

func TestCloseUnblocksReceiver(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r, err := NewReceiver(testConfig(newGroup(), freePort(t), mode))
			if err != nil {
				t.Fatal(err)
			}
			waitErr := make(chan error, 1)
			go func() { waitErr <- r.Wait(time.Minute) }()
			time.Sleep(50 * time.Millisecond) // let the loop block in recvmmsg and the consumer in Wait

			closed := make(chan error, 1)
			start := time.Now()
			go func() { closed <- r.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("Close: %v", err)
				}
				t.Logf("Close returned after %v", time.Since(start))
			case <-time.After(3 * time.Second):
				t.Fatal("Close did not return")
			}
			select {
			case err := <-waitErr:
				if !errors.Is(err, ud.ErrClosed) {
					t.Fatalf("Wait after Close: %v, want ud.ErrClosed", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("Wait did not return after Close")
			}
			// Waking the loop must not deliver anything (a shut-down UDP
			// socket reports empty "datagrams").
			if st := r.Stats(); st.Datagrams != 0 || r.Peek(0) != nil {
				t.Fatalf("datagrams after Close with no traffic: %+v", st)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

// TestCloseWithFullRing closes a receiver whose loop is waiting for the
// consumer to release a slot.
func TestCloseWithFullRing(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig(newGroup(), freePort(t), mode)
			cfg.RingSlots = 4
			r, err := NewReceiver(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := newSender(t, cfg)
			for i := 0; i < 10; i++ {
				if err := s.Send([][]byte{datagram(i+8, 100)}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for r.Stats().RingFull == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("ring never filled: %+v", r.Stats())
				}
				time.Sleep(time.Millisecond)
				pump(r)
			}
			closed := make(chan error, 1)
			go func() { closed <- r.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("Close did not return")
			}
			// What was received stays readable after Close.
			got := receive(t, r, 4, time.Second)
			if string(got[0]) != string(datagram(8, 100)) {
				t.Fatalf("first datagram after Close: %x", got[0])
			}
			if err := r.Wait(time.Second); !errors.Is(err, ud.ErrClosed) {
				t.Fatalf("Wait on drained closed receiver: %v", err)
			}
		})
	}
}

// TestKernelDropsAccounting overflows a deliberately small socket buffer
// while the consumer holds every slot, and checks the accounting property
// the sequence tracker relies on: every datagram sent is either received or
// counted in KernelDrops, exactly, once a datagram sent after the losses has
// arrived.
func TestKernelDropsAccounting(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig(newGroup(), freePort(t), mode)
			cfg.RingSlots = 8
			cfg.RcvBuf = 4096 // SO_RCVBUF; the kernel grants 2×
			r := newReceiver(t, cfg)
			s := newSender(t, cfg)
			if st := r.Stats(); st.RcvBuf != 2*4096 {
				t.Fatalf("RcvBuf = %d, want %d (getsockopt reports twice the request)", st.RcvBuf, 2*4096)
			}

			mk := func(seq int) []byte {
				d := make([]byte, 1000)
				binary.BigEndian.PutUint32(d, uint32(seq))
				return d
			}
			// Fill the ring first, one datagram at a time, so the burst
			// meets a receive loop that is waiting for the consumer.
			deadline := time.Now().Add(5 * time.Second)
			seq := 0
			for r.Stats().RingFull == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("ring never filled: %+v", r.Stats())
				}
				if err := s.Send([][]byte{mk(seq)}); err != nil {
					t.Fatal(err)
				}
				seq++
				time.Sleep(time.Millisecond)
				pump(r)
			}
			// The burst: the consumer holds every slot, and the socket
			// buffer holds a few datagrams at most.
			const burst = 300
			batch := make([][]byte, 0, 30)
			for ; seq < burst; seq++ {
				batch = append(batch, mk(seq))
				if len(batch) == cap(batch) || seq == burst-1 {
					if err := s.Send(batch); err != nil {
						t.Fatal(err)
					}
					batch = batch[:0]
				}
			}

			// Drain everything the kernel kept, then send one more: it is
			// queued after every drop, so its SO_RXQ_OVFL value is final.
			var seqs []uint32
			drain := func(until func() bool) {
				for !until() {
					if time.Now().After(deadline) {
						t.Fatalf("drain: deadline passed; stats %+v", r.Stats())
					}
					if err := r.Wait(100 * time.Millisecond); err != nil {
						t.Fatal(err)
					}
					i := 0
					for ; r.Peek(i) != nil; i++ {
						seqs = append(seqs, binary.BigEndian.Uint32(r.Peek(i).Data()))
					}
					r.Release(i)
				}
			}
			quiet := func() bool { // no datagram for 200 ms
				n := r.Stats().Datagrams
				time.Sleep(200 * time.Millisecond)
				pump(r) // without a receive loop, nothing arrives unless asked
				return r.Stats().Datagrams == n && r.Peek(0) == nil
			}
			drain(quiet)
			final := make([]byte, 1000)
			binary.BigEndian.PutUint32(final, burst)
			if err := s.Send([][]byte{final}); err != nil {
				t.Fatal(err)
			}
			drain(func() bool { return len(seqs) > 0 && seqs[len(seqs)-1] == burst })

			st := r.Stats()
			const sent = burst + 1
			t.Logf("sent %d, received %d, kernel drops %d, ring full %d, RcvBuf %d", sent, st.Datagrams, st.KernelDrops, st.RingFull, st.RcvBuf)
			if st.KernelDrops == 0 {
				t.Fatalf("no kernel drops with a %d-byte buffer and a stalled consumer", cfg.RcvBuf)
			}
			if st.Datagrams+st.KernelDrops != sent {
				t.Fatalf("Datagrams %d + KernelDrops %d = %d, want %d sent", st.Datagrams, st.KernelDrops, st.Datagrams+st.KernelDrops, sent)
			}
			// The sequence numbers agree: received in order, and the
			// holes add up to KernelDrops.
			missing := uint64(0)
			prev := -1
			for _, q := range seqs {
				if int(q) <= prev {
					t.Fatalf("sequence %d after %d", q, prev)
				}
				missing += uint64(int(q) - prev - 1)
				prev = int(q)
			}
			if uint64(len(seqs)) != st.Datagrams || missing != st.KernelDrops {
				t.Fatalf("consumer saw %d datagrams and %d missing; stats say %d and %d", len(seqs), missing, st.Datagrams, st.KernelDrops)
			}
			if proc, err := r.ProcNetDrops(); err != nil || proc != st.KernelDrops {
				t.Fatalf("/proc/net/udp drops = %d, %v; SO_RXQ_OVFL says %d", proc, err, st.KernelDrops)
			}
		})
	}
}

// TestTruncated sends datagrams longer than the receiver's slots, some in the
// middle of a batch, and checks they are dropped, counted, and leave no hole.
func TestTruncated(t *testing.T) {
	port, g := freePort(t), newGroup()
	rcfg := testConfig(g, port, Blocking)
	rcfg.MaxDatagram = 512
	rcfg.RingSlots = 8
	r := newReceiver(t, rcfg)
	s := newSender(t, testConfig(g, port, Blocking))

	mk := func(n int, fill byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = fill
		}
		return b
	}
	// Fill the ring so the loop waits; the next datagrams then queue in the
	// kernel and come back in one recvmmsg when the ring is released.
	for i := 0; i < 8; i++ {
		if err := s.Send([][]byte{mk(10, 'f')}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().RingFull == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ring never filled: %+v", r.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	batch := [][]byte{mk(100, 'a'), mk(513, 'X'), mk(512, 'b'), mk(1400, 'Y'), mk(1, 'c')}
	if err := s.Send(batch); err != nil {
		t.Fatal(err)
	}
	got := receive(t, r, 11, 5*time.Second)
	want := [][]byte{batch[0], batch[2], batch[4]}
	for i, w := range want {
		if string(got[8+i]) != string(w) {
			t.Fatalf("datagram %d after the fillers: %d bytes of %q, want %d bytes of %q", i, len(got[8+i]), got[8+i][:1], len(w), w[:1])
		}
	}
	st := r.Stats()
	if st.Truncated != 2 || st.Datagrams != 11 {
		t.Fatalf("Truncated %d Datagrams %d, want 2 and 11", st.Truncated, st.Datagrams)
	}
	if r.Peek(0) != nil {
		t.Fatal("a truncated datagram was delivered")
	}
}

func TestSendRejectsTooLarge(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), Blocking)
	r := newReceiver(t, cfg)
	s := newSender(t, cfg)
	if s.MaxDatagram() != DefaultMaxDatagram || r.MaxDatagram() != DefaultMaxDatagram {
		t.Fatalf("MaxDatagram %d/%d, want %d", s.MaxDatagram(), r.MaxDatagram(), DefaultMaxDatagram)
	}
	err := s.Send([][]byte{{1}, {2}, make([]byte, DefaultMaxDatagram+1), {4}})
	var op *OpError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &op) || op.Group != cfg.Group || op.Port != cfg.Port {
		t.Fatalf("Send: %v, want an *OpError for %v:%d wrapping ErrTooLarge", err, cfg.Group, cfg.Port)
	}
	got := receive(t, r, 2, 5*time.Second)
	if got[0][0] != 1 || got[1][0] != 2 {
		t.Fatalf("got %v, want the two datagrams before the oversize one", got)
	}
	if st := s.Stats(); st.Datagrams != 2 || st.Errors != 1 {
		t.Fatalf("sender stats %+v, want 2 datagrams and 1 error", st)
	}
}

func TestSendAfterClose(t *testing.T) {
	s, err := NewSender(testConfig(newGroup(), freePort(t), Blocking))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send([][]byte{{1}}); !errors.Is(err, ud.ErrClosed) {
		t.Fatalf("Send after Close: %v, want ud.ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDefaultRcvBufIsLarge(t *testing.T) {
	r := newReceiver(t, testConfig(newGroup(), freePort(t), Blocking))
	rmemMax, err := readProcInt("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Fatal(err)
	}
	// As large as allowed: at least rmem_max (doubled by the kernel), and
	// the full DefaultRcvBuf where SO_RCVBUFFORCE is permitted.
	if got := r.Stats().RcvBuf; got < 2*rmemMax {
		t.Fatalf("RcvBuf = %d, want at least 2×rmem_max = %d", got, 2*rmemMax)
	}
	t.Logf("RcvBuf granted %d (rmem_max %d)", r.Stats().RcvBuf, rmemMax)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	good := testConfig(netip.MustParseAddr("239.1.2.3"), 5000, Blocking)
	for _, tc := range []struct {
		field  string
		modify func(*Config)
	}{
		{"Group", func(c *Config) { c.Group = netip.Addr{} }},
		{"Group", func(c *Config) { c.Group = netip.MustParseAddr("10.1.2.3") }},
		{"Group", func(c *Config) { c.Group = netip.MustParseAddr("ff02::1") }},
		{"Group", func(c *Config) { c.Group = netip.MustParseAddr("::ffff:239.1.2.3") }},
		{"Port", func(c *Config) { c.Port = 0 }},
		{"Port", func(c *Config) { c.Port = 65536 }},
		{"Interface", func(c *Config) { c.Interface = netip.MustParseAddr("::1") }},
		{"Interface", func(c *Config) { c.Interface = netip.MustParseAddr("239.0.0.1") }},
		{"Interface", func(c *Config) { c.Interface = netip.MustParseAddr("0.0.0.0") }},
		{"TTL", func(c *Config) { c.TTL = -1 }},
		{"TTL", func(c *Config) { c.TTL = 256 }},
		{"RcvBuf", func(c *Config) { c.RcvBuf = -1 }},
		{"Batch", func(c *Config) { c.Batch = -1 }},
		{"Batch", func(c *Config) { c.Batch = MaxBatch + 1 }},
		{"RingSlots", func(c *Config) { c.RingSlots = 100 }},
		{"RingSlots", func(c *Config) { c.RingSlots = -8 }},
		{"MaxDatagram", func(c *Config) { c.MaxDatagram = -1 }},
		{"MaxDatagram", func(c *Config) { c.MaxDatagram = MaxDatagramLimit + 1 }},
		{"Mode", func(c *Config) { c.Mode = 7 }},
		{"CPU", func(c *Config) { c.CPU = -2 }},
		{"CPU", func(c *Config) { c.CPU = 1 << 20 }},
	} {
		c := good
		tc.modify(&c)
		for name, open := range map[string]func(Config) error{
			"NewSender":   func(c Config) error { _, err := NewSender(c); return err },
			"NewReceiver": func(c Config) error { _, err := NewReceiver(c); return err },
		} {
			err := open(c)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), "Config."+tc.field) {
				t.Errorf("%s with bad %s: %v, want a *ConfigError naming %s", name, tc.field, err, tc.field)
			}
		}
	}

	c := good.withDefaults()
	err := c.validate()
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if c.Batch != DefaultBatch || c.RingSlots != DefaultRingSlots || c.MaxDatagram != DefaultMaxDatagram ||
		c.Interface != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if err := (Config{Group: good.Group, Port: 5000}).withDefaults().validate(); err != nil {
		t.Fatalf("zero Interface should default to 127.0.0.1: %v", err)
	}
}

// TestZeroAllocsPerDatagram pins the send and receive paths at zero
// allocations on real sockets: one round sends batches of 32 and the consumer
// receives and releases all of them. testenv.NoAllocs counts allocations of
// every goroutine, so the receive loop is included, and counts every one.
func TestZeroAllocsPerDatagram(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig(newGroup(), freePort(t), mode)
			r := newReceiver(t, cfg)
			s := newSender(t, cfg)
			batch := make([][]byte, DefaultBatch)
			for i := range batch {
				batch[i] = make([]byte, 1200)
			}
			checkExchangeAllocs(t, s, r, batch, "send and receive of a datagram")
			if st := r.Stats(); st.KernelDrops != 0 {
				t.Fatalf("drops during the test: %+v", st)
			}
		})
	}
}

func TestSendZeroAllocs(t *testing.T) {
	s := newSender(t, testConfig(newGroup(), freePort(t), Blocking))
	batch := make([][]byte, 100) // more than one sendmmsg batch
	for i := range batch {
		batch[i] = make([]byte, 1200)
	}
	testenv.NoAllocs(t, "Send of a datagram", 200, len(batch), func() {
		if err := s.Send(batch); err != nil {
			panic(err)
		}
	})
}

func TestBusyPollPinning(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), BusyPoll)
	cfg.CPU = 0 // every machine has CPU 0
	r := newReceiver(t, cfg)
	s := newSender(t, cfg)
	if err := s.Send([][]byte{[]byte("pinned")}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, r, 1, 5*time.Second); string(got[0]) != "pinned" {
		t.Fatalf("got %q", got[0])
	}
	r.Close()

	// A CPU the machine does not have: sched_setaffinity fails and
	// NewReceiver reports it.
	cfg.CPU = cpuSetSize - 1
	_, err := NewReceiver(cfg)
	var op *OpError
	if !errors.As(err, &op) || !strings.Contains(op.Op, "sched_setaffinity") {
		t.Fatalf("NewReceiver pinned to CPU %d: %v, want a sched_setaffinity *OpError", cfg.CPU, err)
	}
}

// TestDirectNotifierWait: Direct receivers of several groups share one
// Notifier; the consumer sleeps in its epoll_wait and wakes for a datagram on
// any of them, receiving it itself (Fill), and Signal wakes it too.
func TestDirectNotifierWait(t *testing.T) {
	n := ud.NewNotifier()
	defer n.Close()
	var rs []*Receiver
	var ss []*Sender
	for i := 0; i < 3; i++ {
		cfg := testConfig(newGroup(), freePort(t), Direct)
		cfg.Notifier = n
		rs = append(rs, newReceiver(t, cfg))
		ss = append(ss, newSender(t, cfg))
	}
	poll := func() int {
		got := 0
		for _, r := range rs {
			got += r.Fill()
		}
		return got
	}
	done := make(chan struct{})
	for round := 0; round < 30; round++ {
		k := round % len(rs)
		// Nothing queued: the wait sleeps until the datagram sent below
		// arrives.
		go func() {
			time.Sleep(2 * time.Millisecond)
			if err := ss[k].Send([][]byte{datagram(round, 100)}); err != nil {
				t.Error(err)
			}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for rs[k].Peek(0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: datagram to receiver %d never arrived: %+v", round, k, rs[k].Stats())
			}
			if !n.Wait(time.Second, done, poll) {
				t.Fatal("Wait reported done")
			}
			poll()
		}
		if got := rs[k].Peek(0).Data(); string(got) != string(datagram(round, 100)) {
			t.Fatalf("round %d: got %x", round, got)
		}
		rs[k].Release(1)
		for i, r := range rs {
			if i != k && r.Peek(0) != nil {
				t.Fatalf("round %d: receiver %d got a datagram sent to %d", round, i, k)
			}
		}
	}
	// Signal wakes a consumer asleep in epoll_wait long before its timeout.
	woke := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		n.Wait(time.Minute, done, func() int { return 0 })
		woke <- time.Since(start)
	}()
	time.Sleep(20 * time.Millisecond)
	for i := 0; i < 100; i++ { // Signal only wakes a consumer that announced it waits
		n.Signal()
		select {
		case d := <-woke:
			t.Logf("Signal woke the epoll wait after %v", d)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("Signal did not wake the consumer's epoll_wait")
}

// TestDirectNeedsNotifier: a Direct receiver without a Notifier has nothing
// to wait on, and says so.
func TestDirectNeedsNotifier(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), Direct)
	cfg.Notifier = nil
	_, err := NewReceiver(cfg)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Mode" || !strings.Contains(err.Error(), "Notifier") {
		t.Fatalf("NewReceiver(Direct, no Notifier) = %v, want a ConfigError on Mode naming the Notifier", err)
	}
}

// checkExchangeAllocs sends batch and receives it, 8 times per run, and
// fails unless that allocates nothing per datagram (testenv.NoAllocs),
// or a round fails.
func checkExchangeAllocs(t *testing.T, s *Sender, r *Receiver, batch [][]byte, what string) {
	t.Helper()
	var failed error
	exchange := func() {
		if err := s.Send(batch); err != nil && failed == nil {
			failed = err
		}
		deadline := time.Now().Add(5 * time.Second)
		for got := 0; got < len(batch); {
			if err := r.Wait(100 * time.Millisecond); err != nil && failed == nil {
				failed = err
			}
			n := 0
			for r.Peek(n) != nil {
				n++
			}
			r.Release(n)
			got += n
			if time.Now().After(deadline) {
				if failed == nil {
					failed = fmt.Errorf("round timed out: %+v", r.Stats())
				}
				return
			}
		}
	}
	exchange() // warm up
	const batches = 8
	testenv.NoAllocs(t, what, 25, batches*len(batch), func() {
		for range batches {
			exchange()
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
}
