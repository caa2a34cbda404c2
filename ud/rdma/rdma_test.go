// The verbs tests need a real RDMA device: they run inside the Soft-RoCE VM
// of test/softroce (bash test/softroce/run.sh), which sets the TICKCAST_RDMA_*
// variables below. Elsewhere they skip, or fail when TICKCAST_REQUIRE
// includes "rdma".

//go:build linux && cgo && rdma

package rdma_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
)

// Environment set by the Soft-RoCE VM's guest script.
const (
	envIface  = "TICKCAST_RDMA_IFACE"     // IPv4 address of the netdev with the RDMA device
	envDevice = "TICKCAST_RDMA_DEVICE"    // expected device name, e.g. rxe0
	envMTU    = "TICKCAST_RDMA_MTU"       // expected active MTU in bytes
	envNetdev = "TICKCAST_RDMA_NETDEV"    // the netdev, for the link-down test
	envSent   = "TICKCAST_RDMA_SENT_FILE" // where TestMain writes the datagram count
)

// sent counts the datagrams every test sent, so that the harness can check
// the device's packet counters rose at least as much.
var sent atomic.Uint64

func TestMain(m *testing.M) {
	if spec := os.Getenv(envRemoval); spec != "" {
		os.Exit(removalRepro(spec))
	}
	code := m.Run()
	if f := os.Getenv(envSent); f != "" {
		if err := os.WriteFile(f, []byte(strconv.FormatUint(sent.Load(), 10)+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "writing", f+":", err)
			code = 1
		}
	}
	os.Exit(code)
}

// iface returns the interface address, skipping the test outside the VM.
func iface(t *testing.T) netip.Addr {
	t.Helper()
	s := os.Getenv(envIface)
	testenv.Need(t, "rdma", s != "", envIface+" is not set (the verbs tests run in the Soft-RoCE VM: bash test/softroce/run.sh)")
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", envIface, s, err)
	}
	return a
}

// groups hands every test its own multicast group.
var groupN atomic.Uint32

func group() netip.Addr {
	return netip.AddrFrom4([4]byte{239, 192, 7, byte(groupN.Add(1))})
}

func newSender(t *testing.T, c rdma.Config) *rdma.Sender {
	t.Helper()
	s, err := rdma.NewSender(c)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Sender.Close: %v", err)
		}
	})
	return s
}

func newReceiver(t *testing.T, c rdma.Config) *rdma.Receiver {
	t.Helper()
	r, err := rdma.NewReceiver(c)
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func send(t *testing.T, s *rdma.Sender, dgrams ...[]byte) {
	t.Helper()
	if err := s.Send(dgrams); err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent.Add(uint64(len(dgrams)))
}

// payload returns datagram seq of size n: the sequence number, then a
// pattern that depends on it.
func payload(seq uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seq*7 + uint64(i)*13 + 1)
	}
	if n >= 8 {
		binary.BigEndian.PutUint64(b, seq)
	}
	return b
}

// recvOne waits for the next datagram, copies it out and releases it.
func recvOne(t *testing.T, r ud.Receiver, timeout time.Duration) []byte {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if s := r.Peek(0); s != nil {
			d := bytes.Clone(s.Data())
			r.Release(1)
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("no datagram within %v (stats %+v)", timeout, r.Stats())
		}
		if err := r.Wait(50 * time.Millisecond); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
}

func TestDeviceFound(t *testing.T) {
	a := iface(t)
	d, err := rdma.LookupDevice(a)
	if err != nil {
		t.Fatalf("LookupDevice(%s): %v", a, err)
	}
	t.Logf("%s: %+v", a, d)
	if want := os.Getenv(envDevice); want != "" && d.Name != want {
		t.Errorf("device %q, want %q", d.Name, want)
	}
	if !d.Active || d.Port < 1 || d.ActiveMTU < 256 {
		t.Errorf("device %+v: want an ACTIVE port with an MTU", d)
	}
	// Loopback has no RDMA device: the error says so.
	_, err = rdma.LookupDevice(netip.MustParseAddr("127.0.0.1"))
	if !errors.Is(err, rdma.ErrNoDevice) {
		t.Errorf("LookupDevice(127.0.0.1) = %v, want ErrNoDevice", err)
	}
	_, err = rdma.NewSender(rdma.Config{Group: group(), Interface: netip.MustParseAddr("127.0.0.1")})
	if !errors.Is(err, rdma.ErrNoDevice) {
		t.Errorf("NewSender on 127.0.0.1 = %v, want ErrNoDevice", err)
	} else {
		t.Logf("NewSender on 127.0.0.1: %v", err)
	}
}

// TestJoin checks what the join event gave: the rdma_cm qkey, the multicast
// QPN, and a send-only join for the sender.
func TestJoin(t *testing.T) {
	a, g := iface(t), group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 16})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	if s.QKey() != 0x01234567 || r.QKey() != s.QKey() {
		t.Errorf("qkey sender %#x receiver %#x, want 0x01234567", s.QKey(), r.QKey())
	}
	if s.RemoteQPN() != rdma.MulticastQPN {
		t.Errorf("remote QPN %#x, want %#x", s.RemoteQPN(), rdma.MulticastQPN)
	}
	t.Logf("send-only join: %v, max inline %d", s.SendOnly(), s.MaxInline())
	send(t, s, []byte("join"))
	if d := recvOne(t, r, 5*time.Second); string(d) != "join" {
		t.Errorf("got %q", d)
	}
}

func TestMTU(t *testing.T) {
	a, g := iface(t), group()
	d, err := rdma.LookupDevice(a)
	if err != nil {
		t.Fatal(err)
	}
	mtu := d.ActiveMTU
	if s := os.Getenv(envMTU); s != "" {
		want, _ := strconv.Atoi(s)
		if mtu != want {
			t.Fatalf("active MTU %d, want %d", mtu, want)
		}
	}
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 16})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	if s.MaxDatagram() != mtu || r.MaxDatagram() != mtu {
		t.Errorf("MaxDatagram sender %d receiver %d, want the active MTU %d", s.MaxDatagram(), r.MaxDatagram(), mtu)
	}
	// Exactly the MTU goes through whole.
	full := payload(1, mtu)
	send(t, s, full)
	if got := recvOne(t, r, 5*time.Second); !bytes.Equal(got, full) {
		t.Fatalf("MTU-sized datagram: got %d bytes, want %d equal bytes", len(got), len(full))
	}
	// One byte more is refused before anything is posted, and the
	// datagrams before it are sent.
	before := s.Stats().Datagrams
	err = s.Send([][]byte{payload(2, 10), payload(3, mtu+1)})
	if !errors.Is(err, rdma.ErrTooLarge) {
		t.Fatalf("Send of %d bytes = %v, want ErrTooLarge", mtu+1, err)
	}
	t.Logf("oversized: %v", err)
	sent.Add(1)
	if got := s.Stats().Datagrams - before; got != 1 {
		t.Errorf("%d datagrams sent before the oversized one, want 1", got)
	}
	if got := recvOne(t, r, 5*time.Second); !bytes.Equal(got, payload(2, 10)) {
		t.Errorf("datagram before the oversized one: got %x", got)
	}
	// A configured MaxDatagram above the MTU is refused at open.
	_, err = rdma.NewSender(rdma.Config{Group: g, Interface: a, MaxDatagram: mtu + 1})
	if !errors.Is(err, rdma.ErrTooLarge) {
		t.Errorf("NewSender with MaxDatagram %d = %v, want ErrTooLarge", mtu+1, err)
	}
	// A smaller one caps the sender.
	small := newSender(t, rdma.Config{Group: g, Interface: a, MaxDatagram: 512})
	if small.MaxDatagram() != 512 || !errors.Is(small.Send([][]byte{make([]byte, 513)}), rdma.ErrTooLarge) {
		t.Errorf("MaxDatagram 512 not enforced")
	}
}

// TestGRHStripped checks that a slot holds the datagram alone: the 40-byte
// GRH the device writes in front of every UD receive is not part of it.
func TestGRHStripped(t *testing.T) {
	a, g := iface(t), group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 16})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	for _, n := range []int{1, 39, 40, 41, 100, s.MaxDatagram()} {
		want := payload(uint64(n), n)
		send(t, s, want)
		sl := waitSlot(t, r)
		if sl.N != n || !bytes.Equal(sl.Data(), want) {
			t.Errorf("%d-byte datagram: slot holds %d bytes %x..., want %x...", n, sl.N, head(sl.Data()), head(want))
		}
		if cap(sl.Buf) != r.MaxDatagram() && cap(sl.Buf) < n {
			t.Errorf("slot capacity %d", cap(sl.Buf))
		}
		r.Release(1)
	}
}

func head(b []byte) []byte { return b[:min(len(b), 16)] }

func waitSlot(t *testing.T, r ud.Receiver) *ud.Slot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if s := r.Peek(0); s != nil {
			return s
		}
		r.Wait(50 * time.Millisecond)
	}
	t.Fatalf("no datagram within 5s (stats %+v)", r.Stats())
	return nil
}

// TestTwoReceivers checks that multicast reaches two receiver QPs, one in
// each receive mode, with every datagram in order.
func TestTwoReceivers(t *testing.T) {
	a, g := iface(t), group()
	rb := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 512, Mode: rdma.Blocking})
	rp := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 512, Mode: rdma.BusyPoll, CPU: -1})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	const n = 300
	batch := make([][]byte, 0, 10)
	for seq := uint64(0); seq < n; seq++ {
		batch = append(batch, payload(seq, 64+int(seq%200)))
		if len(batch) == cap(batch) {
			send(t, s, batch...)
			batch = batch[:0]
		}
	}
	for name, r := range map[string]*rdma.Receiver{"blocking": rb, "busy-poll": rp} {
		for seq := uint64(0); seq < n; seq++ {
			got := recvOne(t, r, 5*time.Second)
			if want := payload(seq, 64+int(seq%200)); !bytes.Equal(got, want) {
				t.Fatalf("%s receiver: datagram %d: got seq %d len %d", name, seq, binary.BigEndian.Uint64(got), len(got))
			}
		}
		t.Logf("%s receiver: %+v", name, r.Stats())
	}
	if st := s.Stats(); st.Datagrams != n || st.Syscalls >= n {
		t.Errorf("sender stats %+v: want %d datagrams in fewer post lists", st, n)
	}
}

// TestInlineSizes sends datagrams on both sides of the inline limit.
func TestInlineSizes(t *testing.T) {
	a, g := iface(t), group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 64})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	inl := s.MaxInline()
	if inl <= 0 {
		t.Fatalf("max inline %d: the device granted no inline data", inl)
	}
	t.Logf("max inline %d, MTU %d", inl, s.MaxDatagram())
	sizes := []int{1, inl - 1, inl, inl + 1, s.MaxDatagram() - 1, s.MaxDatagram()}
	var all [][]byte
	for i, n := range sizes {
		all = append(all, payload(uint64(i), n))
	}
	// One post list mixing inline and non-inline requests, then each alone.
	send(t, s, all...)
	for _, d := range all {
		send(t, s, d)
	}
	for round := 0; round < 2; round++ {
		for i, want := range all {
			if got := recvOne(t, r, 5*time.Second); !bytes.Equal(got, want) {
				t.Errorf("round %d size %d: got %d bytes", round, sizes[i], len(got))
			}
		}
	}
	// Inline disabled: every request carries a gather entry.
	noInl := newSender(t, rdma.Config{Group: g, Interface: a, MaxInline: -1})
	if noInl.MaxInline() != 0 {
		t.Errorf("MaxInline -1 gave %d", noInl.MaxInline())
	}
	send(t, noInl, all[0], all[2])
	for _, want := range [][]byte{all[0], all[2]} {
		if got := recvOne(t, r, 5*time.Second); !bytes.Equal(got, want) {
			t.Errorf("non-inline: got %d bytes, want %d", len(got), len(want))
		}
	}
}

// TestRingWraparound streams many times the ring's capacity through a
// small ring, in both receive modes, and checks nothing is lost or
// reordered: slots are released and posted again all along. The sender
// keeps at most half a ring in flight, so a receive queue that ran empty
// would show up as loss.
func TestRingWraparound(t *testing.T) {
	a := iface(t)
	for _, mode := range []rdma.Mode{rdma.Blocking, rdma.BusyPoll} {
		t.Run(mode.String(), func(t *testing.T) {
			g := group()
			const slots, total = 64, 64 * 40
			r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: slots, Batch: 16, Mode: mode, CPU: -1})
			s := newSender(t, rdma.Config{Group: g, Interface: a, Batch: 16})
			var received atomic.Uint64
			errc := make(chan error, 1)
			go func() {
				var next uint64
				deadline := time.Now().Add(60 * time.Second)
				for next < total {
					n := 0
					for sl := r.Peek(0); sl != nil; sl = r.Peek(n) {
						if got := binary.BigEndian.Uint64(sl.Data()); got != next || sl.N != 16+int(next%64) {
							errc <- fmt.Errorf("datagram %d: got seq %d len %d", next, got, sl.N)
							return
						}
						next++
						n++
					}
					r.Release(n)
					received.Store(next)
					if n == 0 {
						if time.Now().After(deadline) {
							errc <- fmt.Errorf("stalled at %d/%d (stats %+v)", next, total, r.Stats())
							return
						}
						r.Wait(10 * time.Millisecond)
					}
				}
				errc <- nil
			}()
			batch := make([][]byte, 0, 16)
			start := time.Now()
			for seq := uint64(0); seq < total; {
				// Flow control: at most half the ring in flight.
				for seq-received.Load() > slots/2 {
					select {
					case err := <-errc:
						t.Fatalf("receiver: %v", err)
					default:
						time.Sleep(50 * time.Microsecond)
					}
				}
				batch = batch[:0]
				for len(batch) < 16 && seq < total {
					batch = append(batch, payload(seq, 16+int(seq%64)))
					seq++
				}
				send(t, s, batch...)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			st := r.Stats()
			t.Logf("%d datagrams through %d slots in %v: %+v", total, slots, time.Since(start).Round(time.Millisecond), st)
			if st.Datagrams != total || st.Errors != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestRingFull lets the consumer hold every slot: the receiver stops
// (RingFull counted), loses what arrives meanwhile, and resumes once the
// slots are released.
func TestRingFull(t *testing.T) {
	a, g := iface(t), group()
	const slots = 16
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: slots})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	fillRing(t, r, s, slots)
	send(t, s, payload(100, 32), payload(101, 32)) // no receive posted: dropped by the device
	time.Sleep(200 * time.Millisecond)
	if st := r.Stats(); st.RingFull == 0 || st.Datagrams != slots {
		t.Errorf("with the ring full: stats %+v", st)
	}
	r.Release(slots)
	time.Sleep(200 * time.Millisecond) // the loop posts the slots again
	send(t, s, payload(200, 32))
	if got := recvOne(t, r, 5*time.Second); binary.BigEndian.Uint64(got) != 200 {
		t.Errorf("after release: got seq %d, want 200", binary.BigEndian.Uint64(got))
	}
}

// fillRing sends slots datagrams (sequences 0..slots-1) and waits until r,
// whose ring has that many slots, holds them all: every slot lent out.
func fillRing(t *testing.T, r *rdma.Receiver, s *rdma.Sender, slots int) {
	t.Helper()
	for seq := uint64(0); seq < uint64(slots); seq++ {
		send(t, s, payload(seq, 32))
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Peek(slots-1) == nil && time.Now().Before(deadline) {
		r.Wait(10 * time.Millisecond)
	}
	if r.Peek(slots-1) == nil {
		t.Fatalf("ring not filled: %+v", r.Stats())
	}
}

// netdevLink returns the netdev under the device (TICKCAST_RDMA_NETDEV) and
// a function that sets its link up or down with ip(8).
func netdevLink(t *testing.T) (string, func(state string) error) {
	t.Helper()
	dev := os.Getenv(envNetdev)
	testenv.Need(t, "rdma", dev != "", envNetdev+" is not set")
	ip, err := exec.LookPath("ip")
	if err != nil {
		ip = "/usr/sbin/ip" // busybox's ip lacks what the VM's init uses
	}
	return dev, func(state string) error {
		if out, err := exec.Command(ip, "link", "set", dev, state).CombinedOutput(); err != nil {
			return fmt.Errorf("ip link set %s %s: %v %s", dev, state, err, out)
		}
		return nil
	}
}

// TestPortNotActive takes the netdev down: the port leaves ACTIVE and
// opening fails with ErrPortNotActive; it comes back when the link does.
// It runs last: the link flap must not disturb the other tests.
func TestPortNotActive(t *testing.T) {
	a := iface(t)
	dev, setLink := netdevLink(t)
	link := func(state string) {
		if err := setLink(state); err != nil {
			t.Fatal(err)
		}
	}
	waitState := func(active bool) rdma.Device {
		deadline := time.Now().Add(10 * time.Second)
		for {
			d, err := rdma.LookupDevice(a)
			if err == nil && d.Active == active {
				return d
			}
			if time.Now().After(deadline) {
				t.Fatalf("port did not become active=%v: %+v %v", active, d, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	link("down")
	t.Cleanup(func() { link("up"); waitState(true) })
	d := waitState(false)
	_, err := rdma.NewSender(rdma.Config{Group: group(), Interface: a})
	if !errors.Is(err, rdma.ErrPortNotActive) {
		t.Fatalf("NewSender with %s down (%s) = %v, want ErrPortNotActive", dev, d.State, err)
	}
	t.Logf("link down: %v", err)
}
