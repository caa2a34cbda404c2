// Event tests: a queue pair forced into the error state and a link flap,
// each observed, counted and logged by the receiver and sender. They need
// the Soft-RoCE VM of test/softroce; the flap brings the link up again even
// when it fails. Device removal is the reproducer in removal_test.go.

//go:build linux && cgo && rdma

package rdma_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud/rdma"
)

// stream sends n datagrams numbered from *next and returns how many of
// them r received in order within a few seconds.
func stream(t *testing.T, r *rdma.Receiver, s *rdma.Sender, next *uint64, n int) int {
	t.Helper()
	first := *next
	for i := 0; i < n; i++ {
		if err := s.Send([][]byte{payload(*next, 32)}); err != nil {
			t.Logf("Send %d: %v", *next, err)
		}
		*next++
		time.Sleep(200 * time.Microsecond)
	}
	got, want := 0, first
	deadline := time.Now().Add(3 * time.Second)
	for want < *next && time.Now().Before(deadline) {
		sl := r.Peek(0)
		if sl == nil {
			r.Wait(10 * time.Millisecond)
			continue
		}
		if seq := binary.BigEndian.Uint64(sl.Data()); seq >= want {
			want = seq + 1
			got++
		}
		r.Release(1)
	}
	sent.Add(uint64(got)) // received: rxe0's rcvd_pkts counted them
	return got
}

// waitEvent waits up to 10 s until ok holds and returns how long it took.
func waitEvent(t *testing.T, what string, ok func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !ok() {
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t0)
}

// TestEventsLinkFlap takes the netdev under the device down and up: the
// port events (IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE) reach both the
// receiver and the sender, which count and log them. A queue pair may
// survive a flap, so the events, not data flowing again, are what the test
// holds; whether the stream resumed on the old queue pairs is logged.
func TestEventsLinkFlap(t *testing.T) {
	a := iface(t)
	_, setLink := netdevLink(t)
	link := func(state string) error {
		err := setLink(state)
		if err != nil {
			t.Error(err)
		}
		return err
	}
	t.Cleanup(func() {
		link("up")
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if d, err := rdma.LookupDevice(a); err == nil && d.Active {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("port not ACTIVE again within 10s")
	})
	g := group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 64})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	var next uint64
	if n := stream(t, r, s, &next, 20); n != 20 {
		t.Fatalf("before the flap: %d of 20 received", n)
	}
	tot := rdma.Totals()
	if link("down") != nil {
		t.FailNow()
	}
	down := waitEvent(t, "port_down at both ends", func() bool {
		return r.Health().Events[rdma.EventPortDown] >= 1 && s.Health().Events[rdma.EventPortDown] >= 1
	})
	if link("up") != nil {
		t.FailNow()
	}
	up := waitEvent(t, "port_active at both ends", func() bool {
		return r.Health().Events[rdma.EventPortActive] >= 1 && s.Health().Events[rdma.EventPortActive] >= 1
	})
	t.Logf("port_down observed %v after ip link set down, port_active %v after ip link set up",
		down.Round(time.Millisecond), up.Round(time.Millisecond))
	rh, sh := r.Health(), s.Health()
	for name, h := range map[string]rdma.Health{"receiver": rh, "sender": sh} {
		// rxe raises PORT_ACTIVE for each netdev event that finds the
		// link up (NETDEV_UP, NETDEV_CHANGE): one flap may bring two.
		if h.Events[rdma.EventPortDown] < 1 || h.Events[rdma.EventPortActive] < 1 {
			t.Errorf("%s events %+v: want port_down and port_active", name, h.Events)
		}
		t.Logf("%s events: %+v", name, h.Events)
	}
	now := rdma.Totals()
	if d := now.Events[rdma.EventPortDown] - tot.Events[rdma.EventPortDown]; d != rh.Events[rdma.EventPortDown]+sh.Events[rdma.EventPortDown] {
		t.Errorf("process total of port_down rose by %d, not the receiver's and sender's sum", d)
	}
	n := stream(t, r, s, &next, 20)
	t.Logf("after the flap, on the same queue pairs: %d of 20 received; receiver Err %v", n, r.Err())
}
