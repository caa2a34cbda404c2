// A receiver whose consumer never releases, in the Soft-RoCE VM: what the
// receiver and the device count while its receive queue is empty.

//go:build linux && cgo && rdma

package rdma_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

// benchLine logs a result line and prints it as "@bench LINE" on the test's
// output, where test/softroce's vmtest collects it and prints it after the
// test results.
func benchLine(t *testing.T, format string, args ...any) {
	t.Helper()
	l := fmt.Sprintf(format, args...)
	t.Log(l)
	fmt.Printf("@bench %s\n", l)
}

// hwCounters reads the port's hw_counters as name → value.
func hwCounters(t *testing.T, dev string, port int) map[string]uint64 {
	t.Helper()
	c, err := devices.ReadCounters(dev, port)
	if err != nil {
		t.Fatalf("ReadCounters(%s, %d): %v", dev, port, err)
	}
	if !c.HasHW {
		t.Fatalf("%s port %d has no hw_counters/", dev, port)
	}
	m := map[string]uint64{}
	for _, x := range c.HW {
		m[x.Name] = x.Value
	}
	return m
}

// TestStarvation lends every slot of a 16-slot ring to a consumer that does
// not release, sends 16+40 datagrams, and checks what is counted: the
// receiver got the first 16 in order; Starvation counts one episode, in
// progress, whose time grows; the device received all 56 (rcvd_pkts, exact:
// no other test runs meanwhile) and dropped the 40 that found the receive
// queue empty. rxe counts those drops nowhere, so ReadDeviceDrops must say
// it knows no counter; they show, exactly, as rcvd_pkts +56 against
// rdma_recvs (receive completions) +16, and every other hw_counter but
// sent_pkts and rdma_sends stays put (so that a kernel that starts counting
// them is noticed). A device that counts them (mlx5 out_of_buffer) must
// show at least the 40 (a lower bound: the count is device-wide). After the
// release the episode ends and the next datagram arrives.
func TestStarvation(t *testing.T) {
	a, g := iface(t), group()
	const slots, extra = 16, 40
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: slots})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	dev := r.Device()
	if want := os.Getenv(envDevice); want != "" && dev.Name != want {
		t.Fatalf("receiver on %s, want %s", dev.Name, want)
	}
	lifespan := hwLifespan(dev.Name, dev.Port)
	time.Sleep(lifespan) // rxe caches hw_counters for lifespan
	before := hwCounters(t, dev.Name, dev.Port)
	dropsBefore, err := rdma.ReadDeviceDrops(dev.Name, dev.Port)
	if err != nil {
		t.Fatalf("ReadDeviceDrops: %v", err)
	}
	if st := r.Starvation(); st.Episodes != 0 || st.Time != 0 || st.InProgress {
		t.Fatalf("before any datagram: %+v", st)
	}

	fillRing(t, r, s, slots)
	// Ring occupancy, as the subscriber reads it (ud.RingReporter).
	rr, ok := ud.Receiver(r).(ud.RingReporter)
	if !ok {
		t.Fatal("rdma.Receiver is no ud.RingReporter")
	}
	if rr.RingLen() != slots || rr.RingCap() != slots {
		t.Errorf("ring full: RingLen %d, RingCap %d, want %d, %d", rr.RingLen(), rr.RingCap(), slots, slots)
	}
	for seq := uint64(slots); seq < slots+extra; seq++ {
		send(t, s, payload(seq, 32)) // the receive queue is empty: dropped
	}
	// Wait until the device has seen them all (rcvd_pkts), then some.
	var after map[string]uint64
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(lifespan + 20*time.Millisecond)
		after = hwCounters(t, dev.Name, dev.Port)
		if after["rcvd_pkts"]-before["rcvd_pkts"] >= slots+extra || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	after = hwCounters(t, dev.Name, dev.Port)
	dropsAfter, err := rdma.ReadDeviceDrops(dev.Name, dev.Port)
	if err != nil {
		t.Fatalf("ReadDeviceDrops: %v", err)
	}
	st, rs := r.Starvation(), r.Stats()

	var moved []string
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if after[n] != before[n] {
			moved = append(moved, n+" +"+strconv.FormatUint(after[n]-before[n], 10))
		}
	}
	t.Logf("%d sent, %d received; hw_counters that moved: %s", slots+extra, rs.Datagrams, strings.Join(moved, ", "))
	t.Logf("starvation %+v; ring full %d; device drops %+v -> %+v", st, rs.RingFull, dropsBefore, dropsAfter)
	// The result line for the harness (vmtest prints @bench lines).
	counter := dropsAfter.Counter
	if counter == "" {
		counter = "none"
	}
	benchLine(t, "starvation: %d sent to a %d-slot receiver that never releases: received %d, not received %d; RingFull %d, starved %v (in progress); %s rcvd_pkts +%d, rdma_recvs +%d, device drop counter %s +%d",
		slots+extra, slots, rs.Datagrams, slots+extra-rs.Datagrams, rs.RingFull, st.Time.Round(time.Millisecond), dev.Name,
		after["rcvd_pkts"]-before["rcvd_pkts"], after["rdma_recvs"]-before["rdma_recvs"], counter, dropsAfter.Value-dropsBefore.Value)

	if rs.Datagrams != slots || rs.Errors != 0 {
		t.Errorf("receiver stats %+v: want %d datagrams, no errors", rs, slots)
	}
	for i := 0; i < slots; i++ {
		if got := binary.BigEndian.Uint64(r.Peek(i).Data()); got != uint64(i) {
			t.Errorf("slot %d holds seq %d", i, got)
		}
	}
	if st.Episodes != 1 || !st.InProgress || st.Time <= 0 || rs.RingFull != 1 {
		t.Errorf("starvation %+v, RingFull %d: want one episode in progress", st, rs.RingFull)
	}
	if d := after["rcvd_pkts"] - before["rcvd_pkts"]; d != slots+extra {
		t.Errorf("rcvd_pkts rose by %d, want %d: the device received every datagram", d, slots+extra)
	}
	if d := after["sent_pkts"] - before["sent_pkts"]; d != slots+extra {
		t.Errorf("sent_pkts rose by %d, want %d", d, slots+extra)
	}
	if d := after["rdma_sends"] - before["rdma_sends"]; d != slots+extra {
		t.Errorf("rdma_sends rose by %d, want %d", d, slots+extra)
	}
	if dropsAfter.Known() {
		if d := dropsAfter.Value - dropsBefore.Value; d < extra {
			t.Errorf("%s rose by %d, want at least %d (device-wide)", dropsAfter.Counter, d, extra)
		}
	} else {
		if !strings.HasPrefix(dev.Name, "rxe") {
			t.Errorf("%s has no receive-queue-empty drop counter among %v", dev.Name, names)
		}
		// rxe counts no drop; its rdma_recvs counts receive completions,
		// so with one receiving queue pair on the device the drops are
		// exactly rcvd_pkts - rdma_recvs. Nothing else may move: a kernel
		// that starts counting these drops shows here.
		if d := after["rdma_recvs"] - before["rdma_recvs"]; d != slots {
			t.Errorf("rdma_recvs rose by %d, want %d (the datagrams received)", d, slots)
		}
		for n := range after {
			switch n {
			case "rcvd_pkts", "sent_pkts", "rdma_sends", "rdma_recvs":
			default:
				if after[n] != before[n] {
					t.Errorf("hw_counter %s moved (+%d): does rxe count these drops now? (ReadDeviceDrops knows no counter)", n, after[n]-before[n])
				}
			}
		}
	}

	// Starvation time grows while the ring stays full, and stops when
	// the consumer releases.
	time.Sleep(50 * time.Millisecond)
	if st2 := r.Starvation(); st2.Time <= st.Time {
		t.Errorf("starvation time did not grow with the ring full: %v then %v", st.Time, st2.Time)
	}
	r.Release(slots)
	send(t, s, payload(1000, 32))
	if got := recvOne(t, r, 5*time.Second); binary.BigEndian.Uint64(got) != 1000 {
		t.Errorf("after release: got seq %d, want 1000", binary.BigEndian.Uint64(got))
	}
	if rr.RingLen() != 0 {
		t.Errorf("after release: RingLen %d, want 0", rr.RingLen())
	}
	end := r.Starvation()
	time.Sleep(20 * time.Millisecond)
	if st3 := r.Starvation(); end.InProgress || st3.Time != end.Time || st3.Episodes != 1 {
		t.Errorf("after release: %+v then %+v: want the episode ended, its time fixed", end, st3)
	}
}

// hwLifespan returns how long rxe caches hw_counters (hw_counters/lifespan,
// milliseconds), or 10 ms when the file is missing.
func hwLifespan(dev string, port int) time.Duration {
	b, err := os.ReadFile(filepath.Join(devices.ClassDir, dev, "ports", strconv.Itoa(port), "hw_counters", "lifespan"))
	ms, err2 := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || err2 != nil {
		return 10 * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}
