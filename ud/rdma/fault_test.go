// Fault tests: a queue pair forced into the error state and a link flap
// mid-stream. Each checks that the transport rebuilds by itself, that the
// consumer sees nothing but a gap (every datagram received or counted lost,
// in order, none twice), and states its time to recovery. They need the
// Soft-RoCE VM of test/softroce. The flap restores the link even when it
// fails. Device removal is the reproducer in removal_test.go, run by the
// VM's init in a fresh process.

//go:build linux && cgo && rdma

package rdma_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud/rdma"
)

// faultStream sends numbered datagrams from s to r and accounts for them
// exactly on the receiving side: every sequence number up to the last one
// received is either received, in order and once, or lost in a gap.
type faultStream struct {
	t    *testing.T
	r    *rdma.Receiver
	s    *rdma.Sender
	next uint64 // next sequence number to send

	received, lost uint64
	last           int64 // last sequence number received, -1 for none
	refused        uint64
	hold           bool      // the consumer keeps what arrives lent: no drain
	firstAfter     time.Time // when the first datagram after mark arrived
	mark           int64     // sequence number last at mark()
}

func newStream(t *testing.T, r *rdma.Receiver, s *rdma.Sender) *faultStream {
	return &faultStream{t: t, r: r, s: s, last: -1, mark: -1}
}

// streamLen is above the senders' inline limit (DefaultMaxInline), so that
// the datagrams go through the registered slot memory on both sides.
const streamLen = 700

// send sends n datagrams paced at 8 per millisecond. A Send the transport
// refuses (its endpoint is being rebuilt) loses its datagrams: they count
// as sent and show up as a gap.
func (st *faultStream) send(n int) {
	batch := make([][]byte, 0, 8)
	for i := 0; i < n; {
		batch = batch[:0]
		for len(batch) < cap(batch) && i < n {
			batch = append(batch, payload(st.next, streamLen))
			st.next++
			i++
		}
		if err := st.s.Send(batch); err != nil {
			if !errors.Is(err, rdma.ErrPortNotActive) && !errors.As(err, new(*rdma.OpError)) {
				st.t.Fatalf("Send: %v", err)
			}
			st.refused += uint64(len(batch))
		}
		time.Sleep(time.Millisecond)
		st.drain()
		// Flow control: at most a quarter of the ring in flight, for a
		// while (an outage would hold it forever), so that a slow
		// consumer on the VM's two CPUs loses nothing outside the fault.
		for wait := 0; !st.hold && int64(st.next)-st.last > 64 && wait < 50; wait++ {
			st.r.Wait(time.Millisecond)
			st.drain()
		}
	}
}

// drain takes what has arrived and releases it, unless the consumer holds
// its slots.
func (st *faultStream) drain() {
	st.r.Fill() // Direct mode: the consumer receives (a no-op with a receive loop)
	if st.hold {
		return
	}
	n := 0
	for sl := st.r.Peek(n); sl != nil; sl = st.r.Peek(n) {
		if seq := int64(binary.BigEndian.Uint64(sl.Data())); seq <= st.last {
			var next []uint64
			for i := 1; i < 6; i++ {
				if o := st.r.Peek(n + i); o != nil {
					next = append(next, binary.BigEndian.Uint64(o.Data()))
				}
			}
			st.t.Logf("stale slot: seq %d received %v ago; the slots after it hold %v; %+v %+v", seq,
				time.Since(time.Unix(0, sl.RecvNs)), next, st.r.Stats(), st.r.Health())
		}
		st.take(sl.Data())
		n++
	}
	st.r.Release(n)
}

func (st *faultStream) take(d []byte) {
	t := st.t
	if len(d) != streamLen {
		t.Fatalf("datagram of %d bytes, want %d", len(d), streamLen)
	}
	seq := int64(binary.BigEndian.Uint64(d))
	if !bytes.Equal(d, payload(uint64(seq), streamLen)) {
		t.Fatalf("datagram %d: corrupt payload", seq)
	}
	if seq <= st.last {
		t.Fatalf("datagram %d after %d: duplicate or out of order", seq, st.last)
	}
	st.lost += uint64(seq - st.last - 1)
	st.last = seq
	st.received++
	if st.mark >= 0 && seq > st.mark && st.firstAfter.IsZero() {
		st.firstAfter = time.Now()
	}
	sent.Add(1) // the device received it: rxe0's rcvd_pkts counted it
}

// waitLast drains until datagram seq has been taken.
func (st *faultStream) waitLast(seq uint64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for st.last < int64(seq) {
		if time.Now().After(deadline) {
			st.t.Fatalf("datagram %d not received within %v: last %d, received %d, lost %d; receiver %+v %+v",
				seq, timeout, st.last, st.received, st.lost, st.r.Stats(), st.r.Health())
		}
		st.r.Wait(10 * time.Millisecond)
		st.drain()
	}
}

// check asserts the exact accounting once the last datagram sent arrived.
func (st *faultStream) check() {
	st.t.Helper()
	if st.last != int64(st.next)-1 || st.received+st.lost != st.next {
		st.t.Errorf("accounting: sent %d, received %d + lost %d = %d, last %d", st.next, st.received, st.lost,
			st.received+st.lost, st.last)
	}
	st.t.Logf("accounting: sent %d = received %d + lost %d (%d refused by the sender while it rebuilt)",
		st.next, st.received, st.lost, st.refused)
}

// sendUntil keeps sending 8 datagrams at a time while it waits (up to
// timeout) for done, the state named by what.
func (st *faultStream) sendUntil(what string, timeout time.Duration, done func() bool) {
	st.t.Helper()
	waitHealth(st.t, what, timeout, func() bool {
		st.send(8)
		return done()
	})
}

// finish sends 400 more datagrams, waits for the last, and checks the
// accounting of the whole stream.
func (st *faultStream) finish() {
	st.t.Helper()
	st.send(400)
	st.waitLast(st.next-1, 15*time.Second)
	st.check()
}

func waitHealth(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFaultQPError forces the receiver's queue pair into the error state
// mid-stream, in the Blocking, BusyPoll and Direct modes. The posted receives complete with a
// flush error; the receiver tears its endpoint down and opens it again on
// the same slot memory, and the stream goes on. Four slots stay lent to the
// consumer across the rebuild and must still hold their datagrams.
func TestFaultQPError(t *testing.T) {
	a := iface(t)
	for _, mode := range []rdma.Mode{rdma.Blocking, rdma.BusyPoll, rdma.Direct} {
		t.Run(mode.String(), func(t *testing.T) {
			g := group()
			r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 256, Mode: mode, CPU: -1})
			s := newSender(t, rdma.Config{Group: g, Interface: a})
			st := newStream(t, r, s)
			st.send(400)
			st.waitLast(399, 10*time.Second)

			// Four datagrams the consumer keeps across the fault.
			const hold = 4
			st.hold = true
			batch := [][]byte{}
			for i := 0; i < hold; i++ {
				batch = append(batch, payload(st.next, streamLen))
				st.next++
			}
			send(t, s, batch...)
			sent.Add(^uint64(hold - 1)) // counted again by take
			waitHealth(t, "held datagrams", 10*time.Second, func() bool {
				r.Wait(10 * time.Millisecond)
				return r.Peek(hold-1) != nil
			})
			held := make([][]byte, hold)
			for i := range held {
				held[i] = bytes.Clone(r.Peek(i).Data())
			}

			st.mark = st.last + hold
			t0 := time.Now()
			if err := rdma.ForceQPError(r); err != nil {
				t.Fatal(err)
			}
			// Datagrams keep coming during the rebuild; the ring
			// (256 slots less the 4 held) takes them.
			st.send(100)
			waitHealth(t, "receiver rebuilt", 15*time.Second, func() bool {
				r.Fill() // Direct mode rebuilds in Fill
				return r.Health().Rebuilds >= 1
			})
			h := r.Health()
			for i := range held {
				if sl := r.Peek(i); sl == nil || !bytes.Equal(sl.Data(), held[i]) {
					t.Fatalf("held slot %d changed across the rebuild", i)
				}
			}
			st.hold = false
			st.drain()
			st.finish()
			if st.firstAfter.IsZero() {
				t.Fatalf("nothing received after the fault")
			}
			benchLine(t, "TestFaultQPError/%s: time to recovery %v from ibv_modify_qp(IBV_QPS_ERR) to the first datagram after it (rebuild outage %v); sent %d = received %d + lost %d",
				mode, st.firstAfter.Sub(t0).Round(time.Millisecond), h.LastOutage.Round(time.Millisecond), st.next, st.received, st.lost)
			t.Logf("health %+v", h)
			if h.Rebuilds != 1 || h.Events[rdma.EventCompletionError] < 1 || h.Down {
				t.Errorf("health %+v: want one rebuild after a completion error", h)
			}
			if err := r.Err(); err != nil {
				t.Errorf("receiver failed: %v", err)
			}
		})
	}
}

// TestFaultSenderQPError forces the sender's queue pair into the error
// state mid-stream while the receiver keeps its own: the sends complete
// with a flush error, the sender tears its endpoint down and rebuilds it on
// the same slot memory at the next Send, and the receiver gets every
// datagram after that intact, in order, the interruption counted exactly.
func TestFaultSenderQPError(t *testing.T) {
	a, g := iface(t), group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 256})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	st := newStream(t, r, s)
	st.send(400)
	st.waitLast(399, 10*time.Second)
	st.mark = st.last
	t0 := time.Now()
	if err := rdma.ForceSenderQPError(s); err != nil {
		t.Fatal(err)
	}
	st.sendUntil("sender rebuilt", 15*time.Second, func() bool {
		return s.Health().Rebuilds >= 1 && !s.Health().Down
	})
	st.finish()
	h := s.Health()
	if st.firstAfter.IsZero() {
		t.Fatalf("nothing received after the fault")
	}
	benchLine(t, "TestFaultSenderQPError: time to recovery %v from ibv_modify_qp(IBV_QPS_ERR) on the sender to the first datagram after it (rebuild outage %v); sent %d = received %d + lost %d (%d refused by the sender)",
		st.firstAfter.Sub(t0).Round(time.Millisecond), h.LastOutage.Round(time.Millisecond), st.next, st.received, st.lost, st.refused)
	if h.Rebuilds != 1 || h.Events[rdma.EventCompletionError] < 1 {
		t.Errorf("sender health %+v: want one rebuild after a completion error", h)
	}
	if rh := r.Health(); rh.Rebuilds != 0 {
		t.Errorf("receiver health %+v: it was not at fault, want no rebuild", rh)
	}
}

// flappableLink returns the function that sets the link under the device
// of interface a up or down, and makes sure the link is up again, and the
// port ACTIVE, when the test ends, even when it fails.
func flappableLink(t *testing.T, a netip.Addr) func(state string) error {
	t.Helper()
	_, link := netdevLink(t)
	t.Cleanup(func() {
		if err := link("up"); err != nil {
			t.Errorf("restoring the link: %v", err)
		}
		waitHealth(t, "port active again", 10*time.Second, func() bool {
			d, err := rdma.LookupDevice(a)
			return err == nil && d.Active
		})
	})
	return link
}

// TestFaultFlapReceiverKeepsQP: across a link flap the receiver keeps its
// queue pair (it counts the port error but does not rebuild: a test hook)
// while the sender rebuilds. On Soft-RoCE such a queue pair survives; every
// datagram after the flap must arrive intact and in order, the
// interruption counted exactly.
func TestFaultFlapReceiverKeepsQP(t *testing.T) {
	a := iface(t)
	link := flappableLink(t, a)
	g := group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 256})
	rdma.KeepOnPortDown(r)
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	st := newStream(t, r, s)
	st.send(400)
	st.waitLast(399, 10*time.Second)
	if err := link("down"); err != nil {
		t.Fatal(err)
	}
	st.sendUntil("port down seen", 10*time.Second, func() bool {
		return r.Health().Events[rdma.EventPortDown] >= 1 && s.Health().Down
	})
	st.send(50)
	if err := link("up"); err != nil {
		t.Fatal(err)
	}
	st.mark = int64(st.next) - 1
	st.sendUntil("sender rebuilt", 20*time.Second, func() bool {
		return s.Health().Rebuilds >= 1 && !s.Health().Down
	})
	st.finish()
	rh := r.Health()
	if rh.Rebuilds != 0 {
		t.Errorf("receiver health %+v: the hook kept its queue pair, want no rebuild", rh)
	}
	benchLine(t, "TestFaultFlapReceiverKeepsQP: sent %d = received %d + lost %d (%d refused by the sender while down), payloads intact on the kept queue pair",
		st.next, st.received, st.lost, st.refused)
}

// TestFaultLinkFlap takes the netdev under rxe0 down and up mid-stream. The
// port events must be observed and counted by both the receiver and the
// sender (a queue pair may survive a flap, so data flowing again proves
// nothing alone), both rebuild by themselves, and the stream goes on with
// the interruption counted exactly. The link is brought up again even when
// the test fails.
func TestFaultLinkFlap(t *testing.T) {
	a := iface(t)
	link := flappableLink(t, a)

	g := group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 256})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	st := newStream(t, r, s)
	st.send(400)
	st.waitLast(399, 10*time.Second)

	if err := link("down"); err != nil {
		t.Fatal(err)
	}
	tDown := time.Now()
	st.sendUntil("port down seen by the receiver", 10*time.Second, func() bool {
		return r.Health().Events[rdma.EventPortDown] >= 1
	})
	t.Logf("port down event after %v", time.Since(tDown).Round(time.Millisecond))
	st.send(100) // refused or lost: the link is down
	if err := link("up"); err != nil {
		t.Fatal(err)
	}
	tUp := time.Now()
	st.mark = int64(st.next) - 1
	st.sendUntil("both ends rebuilt", 20*time.Second, func() bool {
		rh, sh := r.Health(), s.Health()
		return rh.Rebuilds >= 1 && !rh.Down && sh.Rebuilds >= 1 && !sh.Down
	})
	tRebuilt := time.Now()
	st.finish()
	rh, sh := r.Health(), s.Health()
	t.Logf("receiver health %+v", rh)
	t.Logf("sender health %+v", sh)
	for name, h := range map[string]rdma.Health{"receiver": rh, "sender": sh} {
		if h.Events[rdma.EventPortDown] < 1 || h.Events[rdma.EventPortActive] < 1 {
			t.Errorf("%s: port events down %d, active %d: want both observed", name,
				h.Events[rdma.EventPortDown], h.Events[rdma.EventPortActive])
		}
		if h.Rebuilds < 1 {
			t.Errorf("%s: no rebuild", name)
		}
	}
	if st.firstAfter.IsZero() {
		t.Fatalf("nothing received after the flap")
	}
	benchLine(t, "TestFaultLinkFlap: link down for %v; from ip link set up: both ends rebuilt after %v, first datagram after %v (receiver outage %v, sender outage %v); sent %d = received %d + lost %d (%d refused by the sender while down)",
		tUp.Sub(tDown).Round(time.Millisecond), tRebuilt.Sub(tUp).Round(time.Millisecond),
		st.firstAfter.Sub(tUp).Round(time.Millisecond), rh.LastOutage.Round(time.Millisecond), sh.LastOutage.Round(time.Millisecond),
		st.next, st.received, st.lost, st.refused)
	tot := rdma.Totals()
	if tot.Events[rdma.EventPortDown] < 2 || tot.Rebuilds < 2 {
		t.Errorf("process totals %+v: want at least the two ends' port-down events and rebuilds", tot)
	}
}
