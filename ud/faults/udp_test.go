package faults

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// TestRealUDP runs the wrapper over the real UDP multicast receiver on the
// loopback interface (interface 127.0.0.1, TTL 0: nothing leaves the host),
// consumed as the subscriber does: Peek(0)/Release(1), sleeping on a shared
// ud.Notifier when the ring is empty.
func TestRealUDP(t *testing.T) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	notify := ud.NewNotifier()
	cfg := udp.Config{
		Group:     netip.AddrFrom4([4]byte{239, 77, 201, byte(port)}),
		Port:      port,
		Interface: netip.AddrFrom4([4]byte{127, 0, 0, 1}),
		TTL:       0,
		Mode:      udp.Blocking,
		CPU:       -1,
		RingSlots: 256,
		Notifier:  notify,
	}
	inner, err := udp.NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := wrap(inner, Config{Seed: 9, Loss: 0.1, Burst: 0.1, BurstLen: 3, Dup: 0.05, Reorder: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s, err := udp.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const n = 5000
	pk := packets(n)
	go func() {
		for i := 0; i < n; i += 100 {
			if err := s.Send(pk[i:min(i+100, n)]); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond) // stay well inside the socket buffer
		}
	}()

	seen := make([]bool, n)
	shown, distinct := 0, 0
	poll := func() int {
		got := 0
		for sl := w.Peek(0); sl != nil; sl = w.Peek(0) {
			k := id(t, pk, sl)
			if !seen[k] {
				seen[k] = true
				distinct++
			}
			shown++
			got++
			w.Release(1)
		}
		return got
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		poll()
		st, f := w.Stats(), w.Faults()
		if st.Datagrams+st.KernelDrops == n && uint64(distinct)+f.DroppedDatagrams == st.Datagrams {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: transport %+v, shown %d (%d distinct), faults %+v", st, shown, distinct, f)
		}
		notify.Wait(50*time.Millisecond, nil, poll)
	}
	st, f := w.Stats(), w.Faults()
	if st.KernelDrops != 0 {
		t.Logf("the kernel dropped %d datagrams too", st.KernelDrops)
	}
	if uint64(shown) != st.Datagrams-f.DroppedDatagrams+f.Duplicated {
		t.Fatalf("shown %d; transport %+v; faults %+v", shown, st, f)
	}
	if f.DroppedDatagrams < 300 || f.Bursts == 0 || f.Duplicated == 0 || f.Reordered == 0 {
		t.Fatalf("faults %+v", f)
	}
	var lostMsgs uint64
	lost := 0
	for k, ok := range seen {
		if !ok {
			lost++
			h, _ := mold.DecodeHeader(pk[k])
			lostMsgs += uint64(h.Messages())
		}
	}
	if st.KernelDrops == 0 && (uint64(lost) != f.DroppedDatagrams || lostMsgs != f.DroppedMessages) {
		t.Fatalf("lost %d datagrams with %d messages; faults %+v", lost, lostMsgs, f)
	}
}
