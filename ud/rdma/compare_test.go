// RDMA against UDP in the same VM: ping-pong round trips and fan-out
// throughput of the rdma transport (rxe0) and the udp transport (the same
// veth0 address), measured one after the other by the same code, reported
// as ratios rdma ÷ udp. The test asserts delivery only (every ping answered;
// every datagram received once and intact, or its loss counted exactly),
// never speed: under qemu's TCG, with rxe computing its CRCs in
// software, the absolute numbers say nothing about real hardware.

//go:build linux && cgo && rdma

package rdma_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/udp"
)

// transport opens one transport's senders and receivers on group g.
type transport struct {
	name        string
	newSender   func(t *testing.T, g netip.Addr) ud.Sender
	newReceiver func(t *testing.T, g netip.Addr, slots int) ud.Receiver
}

// count adds n datagrams sent to the tests' total, which the harness checks
// against rxe0's packet counters: only those sent over RDMA.
func (tr transport) count(n uint64) {
	if tr.name == "rdma" {
		sent.Add(n)
	}
}

// comparePort is the UDP port of the udp transport's groups.
const comparePort = 31337

func compareTransports(t *testing.T) []transport {
	a := iface(t)
	rdmaT := transport{
		name: "rdma",
		newSender: func(t *testing.T, g netip.Addr) ud.Sender {
			return newSender(t, rdma.Config{Group: g, Interface: a})
		},
		newReceiver: func(t *testing.T, g netip.Addr, slots int) ud.Receiver {
			return newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: slots, Mode: rdma.Blocking})
		},
	}
	udpT := transport{
		name: "udp",
		newSender: func(t *testing.T, g netip.Addr) ud.Sender {
			t.Helper()
			s, err := udp.NewSender(udp.Config{Group: g, Port: comparePort, Interface: a})
			if err != nil {
				t.Fatalf("udp.NewSender: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		newReceiver: func(t *testing.T, g netip.Addr, slots int) ud.Receiver {
			t.Helper()
			r, err := udp.NewReceiver(udp.Config{Group: g, Port: comparePort, Interface: a, RingSlots: slots, Mode: udp.Blocking, CPU: -1})
			if err != nil {
				t.Fatalf("udp.NewReceiver: %v", err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		},
	}
	return []transport{rdmaT, udpT}
}

// nextSlot waits up to timeout for the oldest unreleased slot.
func nextSlot(r ud.Receiver, timeout time.Duration) *ud.Slot {
	deadline := time.Now().Add(timeout)
	for {
		if s := r.Peek(0); s != nil {
			return s
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		if err := r.Wait(min(left, 100*time.Millisecond)); err != nil {
			return r.Peek(0)
		}
	}
}

const (
	pingPongs      = 2000            // round trips per transport
	pingPongBudget = 8 * time.Second // per transport, at most
	pingSize       = 64
	fanSize        = 256
	fanSendFor     = 1500 * time.Millisecond // unpaced sending per run, at most
	fanMaxSend     = 200_000                 // datagrams per run, at most
	fanSlots       = 1024
)

// pingPong measures round trips with one datagram in flight: the test's
// goroutine sends on group 1, an echo goroutine receives it and sends it
// back on group 2. It returns the round-trip times, sorted.
func pingPong(t *testing.T, tr transport) []time.Duration {
	g1, g2 := group(), group()
	echoIn, echoOut := tr.newReceiver(t, g1, 64), tr.newSender(t, g2)
	back, out := tr.newReceiver(t, g2, 64), tr.newSender(t, g1)
	done := make(chan error, 1)
	go func() {
		one := make([][]byte, 1)
		for {
			s := nextSlot(echoIn, time.Second)
			if s == nil {
				if echoIn.Wait(0) == ud.ErrClosed {
					done <- nil
					return
				}
				continue
			}
			one[0] = s.Data()
			err := echoOut.Send(one)
			echoIn.Release(1)
			if err == nil {
				tr.count(1)
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	defer func() {
		echoIn.Close()
		if err := <-done; err != nil {
			t.Errorf("%s echo: %v", tr.name, err)
		}
	}()
	ping := make([]byte, pingSize)
	one := [][]byte{ping}
	// Until the first echo comes back, the joins may not be complete:
	// resend every 100 ms. Stale answers are skipped by sequence number.
	exchange := func(seq uint64, timeout, resend time.Duration) (time.Duration, bool) {
		binary.BigEndian.PutUint64(ping, seq)
		t0 := time.Now()
		deadline := t0.Add(timeout)
		for time.Now().Before(deadline) {
			if err := out.Send(one); err != nil {
				t.Fatalf("%s ping %d: %v", tr.name, seq, err)
			}
			tr.count(1)
			next := time.Now().Add(resend)
			for time.Now().Before(next) {
				s := nextSlot(back, time.Until(next))
				if s == nil {
					break
				}
				got := binary.BigEndian.Uint64(s.Data())
				back.Release(1)
				if got == seq {
					return time.Since(t0), true
				}
			}
		}
		return 0, false
	}
	if _, ok := exchange(1<<63, 5*time.Second, 100*time.Millisecond); !ok {
		t.Fatalf("%s: no echo within 5 s", tr.name)
	}
	rtts := make([]time.Duration, 0, pingPongs)
	start := time.Now()
	for i := uint64(0); i < pingPongs && time.Since(start) < pingPongBudget; i++ {
		rtt, ok := exchange(i, time.Second, time.Second)
		if !ok {
			t.Fatalf("%s: ping %d not answered within 1 s (one in flight: nothing may be lost)", tr.name, i)
		}
		rtts = append(rtts, rtt)
	}
	slices.Sort(rtts)
	return rtts
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// fanRun is one fan-out run: a transport and how many receivers.
type fanRun struct {
	tr transport
	n  int
}

// fanResult is one receiver's share of a fan-out run.
type fanResult struct {
	received    uint64
	reordered   uint64 // datagrams that came after a higher sequence number
	first, last time.Time
	err         error
	stats       ud.RecvStats
}

func (f fanResult) rate() float64 {
	if el := f.last.Sub(f.first).Seconds(); el > 0 && f.received > 1 {
		return float64(f.received-1) / el
	}
	return 0
}

// fanOut has one sender send as fast as it can to n receivers for
// fanSendFor (or fanMaxSend datagrams), each receiver checking every
// datagram's sequence number and contents. It returns what was sent and
// each receiver's result. Every datagram a receiver gets must be one that
// was sent, intact, and come once, so what it did not receive is exactly
// sent - received. Order is counted, not required: multicast looped back
// by the kernel (udp) is queued on the backlog of the CPU the sender ran
// on, and a sender that moves between CPUs can overtake itself.
func fanOut(t *testing.T, tr transport, n int) (uint64, []fanResult) {
	g := group()
	rs := make([]ud.Receiver, n)
	for i := range rs {
		rs[i] = tr.newReceiver(t, g, fanSlots)
	}
	s := tr.newSender(t, g)
	// Barrier: a marker datagram until every receiver has one, so that
	// every join is complete before the run.
	marker := make([]byte, fanSize)
	binary.BigEndian.PutUint64(marker, 1<<63)
	deadline := time.Now().Add(5 * time.Second)
	for ready := 0; ready < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d receivers joined within 5 s", tr.name, ready, n)
		}
		if err := s.Send([][]byte{marker}); err != nil {
			t.Fatalf("%s: %v", tr.name, err)
		}
		tr.count(1)
		time.Sleep(20 * time.Millisecond)
		ready = 0
		for _, r := range rs {
			if r.Peek(0) != nil {
				ready++
			}
		}
	}
	for _, r := range rs {
		for r.Peek(0) != nil {
			r.Release(1)
		}
	}

	res := make([]fanResult, n)
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func(f *fanResult, r ud.Receiver) {
			defer wg.Done()
			seen := make([]bool, fanMaxSend+32)
			top := uint64(0) // one past the highest seq so far
			for {
				sl := nextSlot(r, 500*time.Millisecond)
				if sl == nil {
					return // idle: the run is over
				}
				d := sl.Data()
				seq := binary.BigEndian.Uint64(d)
				if seq&(1<<63) != 0 { // a late marker
					r.Release(1)
					continue
				}
				switch {
				case f.err != nil:
				case seq >= uint64(len(seen)) || len(d) != fanSize || d[fanSize-1] != byte(seq):
					f.err = fmt.Errorf("datagram seq %d (%d bytes, last byte %d): not one that was sent", seq, len(d), d[fanSize-1])
				case seen[seq]:
					f.err = fmt.Errorf("datagram seq %d received twice", seq)
				default:
					seen[seq] = true
				}
				if seq < top {
					f.reordered++
				}
				top = max(top, seq+1)
				now := time.Now()
				if f.received == 0 {
					f.first = now
				}
				f.last = now
				f.received++
				r.Release(1)
			}
		}(&res[i], r)
	}
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = make([]byte, fanSize)
	}
	var seq uint64
	start := time.Now()
	for seq < fanMaxSend && time.Since(start) < fanSendFor {
		for i, b := range batch {
			binary.BigEndian.PutUint64(b, seq+uint64(i))
			b[fanSize-1] = byte(seq + uint64(i))
		}
		if err := s.Send(batch); err != nil {
			t.Fatalf("%s send: %v", tr.name, err)
		}
		seq += uint64(len(batch))
	}
	tr.count(seq)
	wg.Wait()
	for i, r := range rs {
		if d, ok := r.(ud.DropSyncer); ok {
			if err := d.SyncDrops(); err != nil {
				t.Errorf("%s SyncDrops: %v", tr.name, err)
			}
		}
		res[i].stats = r.Stats()
	}
	return seq, res
}

// TestCompareRDMAUDP measures both transports in the same VM run and prints
// the results and the rdma ÷ udp ratios as @bench lines.
func TestCompareRDMAUDP(t *testing.T) {
	trs := compareTransports(t)
	benchLine(t, "rdma vs udp: qemu TCG software emulation, rxe computes its CRCs in software: absolute numbers are meaningless here; only the ratios, and only roughly")
	p50, p99 := map[string]time.Duration{}, map[string]time.Duration{}
	for _, tr := range trs {
		rtts := pingPong(t, tr)
		p50[tr.name], p99[tr.name] = percentile(rtts, 0.50), percentile(rtts, 0.99)
		benchLine(t, "pingpong %-4s %d round trips: p50 %v p99 %v", tr.name, len(rtts), p50[tr.name].Round(time.Microsecond), p99[tr.name].Round(time.Microsecond))
		if len(rtts) < pingPongs {
			benchLine(t, "pingpong %-4s cut short by its %v budget", tr.name, pingPongBudget)
		}
	}
	// Two rounds, the second in reverse order, so that neither transport
	// always runs first (under TCG code runs slower until translated).
	var runs []fanRun
	for _, n := range []int{1, 2} {
		for _, tr := range trs {
			runs = append(runs, fanRun{tr, n})
		}
	}
	for i := len(runs) - 1; i >= 0; i-- {
		runs = append(runs, runs[i])
	}
	rate := map[string]float64{}
	for round, run := range runs {
		tr, n := run.tr, run.n
		total, res := fanOut(t, tr, n)
		var sum float64
		for i, f := range res {
			lost := total - f.received
			benchLine(t, "fanout %-4s %d receiver(s), round %d: receiver %d got %d of %d at %.0f datagrams/s; not received %d (kernel drops %d, ring full %d); out of order %d",
				tr.name, n, round/len(trs)/2+1, i, f.received, total, f.rate(), lost, f.stats.KernelDrops, f.stats.RingFull, f.reordered)
			sum += f.rate()
			if f.err != nil {
				t.Errorf("%s fan-out to %d, receiver %d: %v", tr.name, n, i, f.err)
			}
			if f.received == 0 {
				t.Errorf("%s fan-out to %d, receiver %d received nothing", tr.name, n, i)
			}
			// UDP counts what its socket dropped: the loss must be
			// exactly that. RDMA's loss is counted by the sequence
			// numbers (above): its receiver counts no drops.
			if tr.name == "udp" && f.stats.KernelDrops != lost {
				t.Errorf("udp fan-out to %d, receiver %d: %d not received, kernel drops %d", n, i, lost, f.stats.KernelDrops)
			}
		}
		// The mean over receivers and rounds.
		rate[fmt.Sprint(tr.name, n)] += sum / float64(n) / 2
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	benchLine(t, "ratio rdma/udp: pingpong p50 %s, p99 %s (below 1: rdma faster); fanout datagrams/s per receiver (mean of 2 rounds), 1 receiver %s, 2 receivers %s (above 1: rdma faster)",
		ratio(float64(p50["rdma"]), float64(p50["udp"])), ratio(float64(p99["rdma"]), float64(p99["udp"])),
		ratio(rate["rdma1"], rate["udp1"]), ratio(rate["rdma2"], rate["udp2"]))
}
