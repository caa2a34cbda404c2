package natslive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
)

// wait bounds every wait in these tests.
const wait = 10 * time.Second

const subject = "tickcast.test.live.0"

// startNATS starts an embedded server on a free loopback port and returns a
// connection for the receiver and one for publishing.
func startNATS(t *testing.T) (recv, pub *nats.Conn) {
	t.Helper()
	srv, err := natsconn.StartServer(natsconn.ServerConfig{Host: "127.0.0.1", Port: 0})
	if err != nil {
		t.Fatalf("StartServer: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	conn := func(name string) *nats.Conn {
		nc, err := natsconn.Connect(natsconn.ConnConfig{URL: srv.ClientURL(), Name: name}, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	return conn("receiver"), conn("publisher")
}

func newReceiver(t *testing.T, nc *nats.Conn, cfg Config) *Receiver {
	t.Helper()
	r, err := NewReceiver(nc, subject, cfg)
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// datagram returns datagram i: n bytes, the first 4 (when they fit) holding
// i, the rest a pattern derived from i.
func datagram(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*7 + k)
	}
	if n >= 4 {
		binary.BigEndian.PutUint32(b, uint32(i))
	}
	return b
}

// size is datagram i's length: 0 to 8999, varied.
func size(i int) int { return (i * 977) % 9000 }

func publish(t *testing.T, nc *nats.Conn, from, to int, size func(int) int) {
	t.Helper()
	if err := publishErr(nc, from, to, size); err != nil {
		t.Fatal(err)
	}
}

// publishErr publishes datagrams from..to-1 and flushes them to the server.
func publishErr(nc *nats.Conn, from, to int, size func(int) int) error {
	for i := from; i < to; i++ {
		if err := nc.Publish(subject, datagram(i, size(i))); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
	}
	if err := nc.FlushTimeout(wait); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// consume takes datagrams from, from+1, ... to-1 in order, checking each.
func consume(t *testing.T, r *Receiver, from, to int, size func(int) int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for i := from; i < to; {
		s := r.Peek(0)
		if s == nil {
			if time.Now().After(deadline) {
				t.Fatalf("datagram %d did not arrive within %v; stats %+v", i, wait, r.Stats())
			}
			if err := r.Wait(100 * time.Millisecond); err != nil {
				t.Fatalf("Wait before datagram %d: %v", i, err)
			}
			continue
		}
		if want := datagram(i, size(i)); string(s.Data()) != string(want) {
			t.Fatalf("datagram %d: got %d bytes %x..., want %d bytes %x...", i, s.N, head(s.Data()), len(want), head(want))
		}
		if s.RecvNs == 0 {
			t.Fatalf("datagram %d: RecvNs not stamped", i)
		}
		r.Release(1)
		i++
	}
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

// TestInOrder: datagrams of varying sizes, zero-length ones included,
// arrive complete and in order.
func TestInOrder(t *testing.T) {
	rc, pc := startNATS(t)
	r := newReceiver(t, rc, Config{})
	const n = 5000
	var bytes uint64
	for i := 0; i < n; i++ {
		bytes += uint64(size(i))
	}
	errc := make(chan error, 1)
	go func() { errc <- publishErr(pc, 0, n, size) }()
	consume(t, r, 0, n, size)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.Datagrams != n || st.Bytes != bytes || st.KernelDrops != 0 || st.Truncated != 0 {
		t.Fatalf("stats %+v, want %d datagrams of %d bytes, no drops", st, n, bytes)
	}
	if r.Peek(0) != nil {
		t.Fatalf("an extra datagram arrived")
	}
	if r.MaxDatagram() != DefaultMaxDatagram {
		t.Fatalf("MaxDatagram %d, want %d", r.MaxDatagram(), DefaultMaxDatagram)
	}
}

// TestRingFullBackPressure: with the consumer stalled the ring fills, the
// callback waits and NATS queues the rest; once the consumer moves, every
// datagram arrives in order and nothing is dropped.
func TestRingFullBackPressure(t *testing.T) {
	rc, pc := startNATS(t)
	r := newReceiver(t, rc, Config{RingSlots: 16, MaxDatagram: 2000})
	const n = 3000
	sz := func(i int) int { return 4 + i%1996 }
	publish(t, pc, 0, n, sz)
	deadline := time.Now().Add(wait)
	for r.Stats().RingFull == 0 || r.Stats().Datagrams < 16 {
		if time.Now().After(deadline) {
			t.Fatalf("ring did not fill: %+v", r.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if st := r.Stats(); st.Datagrams != 16 || st.RingFull != 1 {
		t.Fatalf("stalled consumer: stats %+v, want exactly 16 datagrams and one ring-full episode", st)
	}
	consume(t, r, 0, n, sz)
	st := r.Stats()
	if st.Datagrams != n || st.KernelDrops != 0 || st.RingFull < 1 {
		t.Fatalf("stats %+v, want %d datagrams, no drops, ring full at least once", st, n)
	}
	t.Logf("%d datagrams through a 16-slot ring, %d ring-full episodes", st.Datagrams, st.RingFull)
}

// TestSlowConsumerDropsReported: with small pending limits and a stalled
// consumer NATS drops messages; they are reported as KernelDrops, and what
// arrived plus what was dropped is what was published.
func TestSlowConsumerDropsReported(t *testing.T) {
	rc, pc := startNATS(t)
	r := newReceiver(t, rc, Config{RingSlots: 4, MaxDatagram: 100, PendingMsgs: 10})
	const n = 200
	sz := func(int) int { return 50 }
	publish(t, pc, 0, n, sz)
	// The stalled consumer holds 4 slots, the callback one message and
	// the pending queue 10: the rest must be dropped.
	deadline := time.Now().Add(wait)
	for r.Stats().KernelDrops == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no slow-consumer drops reported: %+v", r.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := 0
	deadline = time.Now().Add(wait)
	for {
		st := r.Stats()
		if st.Datagrams+st.KernelDrops == n && r.Peek(0) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("datagrams %d + drops %d != %d published", st.Datagrams, st.KernelDrops, n)
		}
		for r.Peek(0) != nil {
			r.Release(1)
			got++
		}
		r.Wait(10 * time.Millisecond)
	}
	st := r.Stats()
	if uint64(got) != st.Datagrams {
		t.Fatalf("consumed %d, stats say %d", got, st.Datagrams)
	}
	r.Close()
	if after := r.Stats(); after.KernelDrops != st.KernelDrops {
		t.Fatalf("KernelDrops %d after Close, %d before", after.KernelDrops, st.KernelDrops)
	}
	t.Logf("%d published: %d delivered, %d dropped by NATS as a slow consumer", n, st.Datagrams, st.KernelDrops)
}

// TestTruncated: a payload longer than MaxDatagram is dropped and counted;
// one of exactly MaxDatagram bytes fits.
func TestTruncated(t *testing.T) {
	rc, pc := startNATS(t)
	r := newReceiver(t, rc, Config{MaxDatagram: 100})
	sizes := []int{50, 101, 100, 1000, 0}
	publish(t, pc, 0, len(sizes), func(i int) int { return sizes[i] })
	consume(t, r, 0, 1, func(i int) int { return sizes[i] })
	consume(t, r, 2, 3, func(i int) int { return sizes[i] })
	consume(t, r, 4, 5, func(i int) int { return sizes[i] })
	if st := r.Stats(); st.Truncated != 2 || st.Datagrams != 3 || st.Bytes != 150 {
		t.Fatalf("stats %+v, want 3 datagrams of 150 bytes, 2 truncated", st)
	}
}

// TestCloseUnblocksWait: Close wakes a consumer blocked in Wait, and
// datagrams received before Close can still be drained.
func TestCloseUnblocksWait(t *testing.T) {
	rc, pc := startNATS(t)
	r := newReceiver(t, rc, Config{})
	done := make(chan error, 1)
	go func() { done <- r.Wait(time.Hour) }()
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ud.ErrClosed) {
			t.Fatalf("Wait after Close: %v, want ud.ErrClosed", err)
		}
		t.Logf("Wait returned %v after Close", time.Since(start))
	case <-time.After(wait):
		t.Fatalf("Wait still blocked %v after Close", wait)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Drain after Close.
	r2, err := NewReceiver(rc, subject, Config{})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, pc, 0, 3, size)
	deadline := time.Now().Add(wait)
	for r2.Stats().Datagrams < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("3 datagrams did not arrive: %+v", r2.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r2.Close()
	publish(t, pc, 3, 6, size) // after Close: not received
	consume(t, r2, 0, 3, size)
	if err := r2.Wait(time.Hour); !errors.Is(err, ud.ErrClosed) {
		t.Fatalf("Wait on a drained, closed receiver: %v, want ud.ErrClosed", err)
	}
	if st := r2.Stats(); st.Datagrams != 3 {
		t.Fatalf("stats %+v after Close, want 3 datagrams", st)
	}
}

// TestCloseReleasesBlockedCallback: Close returns promptly while the
// callback waits for a free slot, and the connection stays usable.
func TestCloseReleasesBlockedCallback(t *testing.T) {
	rc, pc := startNATS(t)
	r := newReceiver(t, rc, Config{RingSlots: 1})
	publish(t, pc, 0, 5, size)
	deadline := time.Now().Add(wait)
	for r.Stats().RingFull == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ring did not fill: %+v", r.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v", d)
	}
	r2 := newReceiver(t, rc, Config{})
	publish(t, pc, 0, 10, size)
	consume(t, r2, 0, 10, size)
}

// TestCloseAfterConnectionClosed: closing the receiver after its NATS
// connection is not an error.
func TestCloseAfterConnectionClosed(t *testing.T) {
	rc, _ := startNATS(t)
	r := newReceiver(t, rc, Config{})
	rc.Close()
	if err := r.Close(); err != nil {
		t.Fatalf("Close after the connection closed: %v", err)
	}
	if err := r.Wait(time.Hour); !errors.Is(err, ud.ErrClosed) {
		t.Fatalf("Wait: %v, want ud.ErrClosed", err)
	}
}

// TestNotifier: a consumer blocked on a shared notifier is woken by a
// datagram.
func TestNotifier(t *testing.T) {
	rc, pc := startNATS(t)
	n := ud.NewNotifier()
	r := newReceiver(t, rc, Config{Notifier: n})
	errc := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		errc <- publishErr(pc, 0, 1, size)
	}()
	deadline := time.Now().Add(wait)
	for r.Peek(0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("no datagram")
		}
		n.Wait(time.Second, nil, func() int {
			if r.Peek(0) != nil {
				return 1
			}
			return 0
		})
	}
	consume(t, r, 0, 1, size)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestConfigErrors: invalid settings are refused with the field named.
func TestConfigErrors(t *testing.T) {
	rc, _ := startNATS(t)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{RingSlots: 1000}, "Config.RingSlots 1000"},
		{Config{RingSlots: -4}, "Config.RingSlots -4"},
		{Config{MaxDatagram: 70000}, "Config.MaxDatagram 70000"},
		{Config{MaxDatagram: -1}, "Config.MaxDatagram -1"},
		{Config{PendingMsgs: -2}, "Config.PendingMsgs -2"},
		{Config{PendingBytes: -5}, "Config.PendingBytes -5"},
		{Config{FlushTimeout: -time.Second}, "Config.FlushTimeout -1s"},
		{Config{DemandEvery: -2}, "Config.DemandEvery -2ns"},
		{Config{DemandSubject: "tickcast.x.demand.*"}, "Config.DemandSubject"},
	} {
		_, err := NewReceiver(rc, subject, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", c.cfg, err, c.want)
		}
	}
	if _, err := NewReceiver(nil, subject, Config{}); err == nil || !strings.Contains(err.Error(), "nil NATS connection") {
		t.Errorf("nil connection: %v", err)
	}
	if _, err := NewReceiver(rc, "", Config{}); err == nil || !strings.Contains(err.Error(), "empty subject") {
		t.Errorf("empty subject: %v", err)
	}
	if _, err := NewReceiver(rc, "bad subject", Config{}); err == nil || !strings.Contains(err.Error(), `"bad subject"`) {
		t.Errorf("invalid subject: %v", err)
	}
	// Unlimited pending queue.
	r := newReceiver(t, rc, Config{PendingMsgs: -1, PendingBytes: -1})
	if m, b, err := r.sub.PendingLimits(); err != nil || m >= 0 || b >= 0 {
		t.Errorf("pending limits %d, %d (%v), want unlimited", m, b, err)
	}
}

// TestNoAllocs: the copy into a slot and the consumer's Peek and Release
// allocate nothing.
func TestNoAllocs(t *testing.T) {
	rc, _ := startNATS(t)
	// No demand announcer: its requests would count as allocations.
	r := newReceiver(t, rc, Config{RingSlots: 64, MaxDatagram: 1472, DemandEvery: -1})
	r.sub.Unsubscribe() // deliver is driven by the test alone
	msg := datagram(1, 1400)
	const perRound = 100
	testenv.NoAllocs(t, "delivery of a datagram", 100, perRound, func() {
		for range perRound {
			r.deliver(msg)
			s := r.Peek(0)
			if s == nil || s.N != len(msg) {
				panic("datagram not delivered")
			}
			r.Release(1)
		}
	})
	if err := r.Wait(0); err != nil {
		t.Fatalf("Wait(0): %v", err)
	}
}

// BenchmarkDeliver measures the callback's copy and the consumer's Peek and
// Release for a 1400-byte datagram, without NATS.
func BenchmarkDeliver(b *testing.B) {
	ring, err := ud.NewRing(4096, 1472)
	if err != nil {
		b.Fatal(err)
	}
	r := &Receiver{Lender: ud.NewLender(ring), cfg: Config{MaxDatagram: 1472}, ring: ring}
	msg := datagram(1, 1400)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		r.deliver(msg)
		r.Peek(0)
		r.Release(1)
	}
}
