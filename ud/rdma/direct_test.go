// Receivers without a receive loop (Direct, DirectSpin): one goroutine
// serves several. The tests need a real RDMA device (the Soft-RoCE VM of
// test/softroce).

//go:build linux && cgo && rdma

package rdma_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
)

// TestDirectOneGoroutine opens four receivers on four groups, each with a
// sender, with no receive loop: in Direct mode the test's goroutine sleeps
// in one Notifier's epoll_wait over the four completion channels and
// receives with Fill; in DirectSpin it polls the four completion queues in
// turn. Every datagram of every group arrives in order and intact, no
// receive loop exists (no goroutine in the package's receive code but the
// consumer), and in Direct mode the consumer slept in epoll_wait between
// datagrams (Notifier waits that returned with a receiver marked ready).
func TestDirectOneGoroutine(t *testing.T) {
	a := iface(t)
	for _, mode := range []rdma.Mode{rdma.Direct, rdma.DirectSpin} {
		t.Run(mode.String(), func(t *testing.T) {
			const lines, perLine = 4, 300
			n := ud.NewNotifier()
			defer n.Close()
			var rs []*rdma.Receiver
			var ss []*rdma.Sender
			for i := 0; i < lines; i++ {
				g := group()
				r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 64, Mode: mode, Notifier: n})
				rs = append(rs, r)
				ss = append(ss, newSender(t, rdma.Config{Group: g, Interface: a}))
			}
			if loops := receiveLoops(); loops != 0 {
				t.Fatalf("%d receive loops running in %s mode, want none", loops, mode)
			}
			next := make([]uint64, lines)
			got := make([]uint64, lines)
			done := make(chan struct{})
			var wakes int
			poll := func() int {
				k := 0
				for i, r := range rs {
					r.Fill()
					m := 0
					for sl := r.Peek(m); sl != nil; sl = r.Peek(m) {
						d := sl.Data()
						seq := binary.BigEndian.Uint64(d)
						if seq != got[i] || !bytes.Equal(d, payload(seq, 200)) {
							t.Errorf("line %d: datagram %d (%d bytes) where %d was due, or corrupt", i, seq, len(d), got[i])
						}
						got[i] = seq + 1
						m++
					}
					r.Release(m)
					k += m
				}
				return k
			}
			consumed := make(chan struct{})
			go func() {
				defer close(consumed)
				for {
					total := uint64(0)
					for _, g := range got {
						total += g
					}
					if total == lines*perLine {
						return
					}
					if mode == rdma.DirectSpin {
						if poll() == 0 {
							runtime.Gosched()
						}
						select {
						case <-done:
							return
						default:
						}
						continue
					}
					if !n.Wait(100*time.Millisecond, done, poll) {
						return
					}
					wakes++
				}
			}()
			for k := 0; k < perLine; k++ {
				for i, s := range ss {
					send(t, s, payload(next[i], 200))
					next[i]++
				}
				if k%8 == 7 {
					time.Sleep(time.Millisecond)
				}
			}
			select {
			case <-consumed:
			case <-time.After(20 * time.Second):
				close(done)
				<-consumed
				t.Fatalf("received %v of %d per line within 20s", got, perLine)
			}
			for i, r := range rs {
				st := r.Stats()
				if got[i] != perLine || st.Datagrams != perLine {
					t.Errorf("line %d: %d datagrams taken, receiver counted %d, want %d", i, got[i], st.Datagrams, perLine)
				}
			}
			t.Logf("%s: %d lines x %d datagrams on one goroutine; %d Notifier waits", mode, lines, perLine, wakes)
			if mode == rdma.Direct && wakes == 0 {
				t.Errorf("the consumer never waited in the Notifier")
			}
		})
	}
}

// receiveLoops counts the goroutines running a Receiver's receive loop.
func receiveLoops() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "ud/rdma.(*Receiver).run(")
}

// TestDirectWaitReceives: a Direct receiver without a Notifier receives in
// Wait (it fills, and sleeps on its own completion channel in between).
func TestDirectWaitReceives(t *testing.T) {
	a, g := iface(t), group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 16, Mode: rdma.Direct})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	go func() {
		time.Sleep(50 * time.Millisecond) // Wait is asleep by then
		if err := s.Send([][]byte{payload(7, 64)}); err != nil {
			t.Errorf("Send: %v", err)
			return
		}
		sent.Add(1)
	}()
	t0 := time.Now()
	for r.Peek(0) == nil {
		if err := r.Wait(time.Second); err != nil {
			t.Fatal(err)
		}
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("nothing received within 10s: %+v", r.Stats())
		}
	}
	if d := r.Peek(0).Data(); !bytes.Equal(d, payload(7, 64)) {
		t.Fatalf("got %x", d)
	}
	r.Release(1)
}
