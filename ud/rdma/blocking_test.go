// Blocking receivers wait in the Go runtime's poller. The test needs a real
// RDMA device (the Soft-RoCE VM of test/softroce).

//go:build linux && cgo && rdma

package rdma_test

import (
	"bufio"
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud/rdma"
)

// envWaitChild makes TestBlockingWaitHoldsNoThread measure in this process:
// its parent sets it on the copy of the test binary it starts.
const envWaitChild = "TICKCAST_RDMA_WAIT_CHILD"

// waiters is how many Blocking receivers TestBlockingWaitHoldsNoThread
// leaves waiting at once.
const waiters = 8

// TestBlockingWaitHoldsNoThread opens waiters Blocking receivers with
// nothing to receive and checks that their receive loops wait as parked
// goroutines, not as OS threads asleep in C.
//
// It measures in a fresh copy of the test binary. A Go process never ends
// its idle threads, so in this long-lived test process a receive loop that
// sat in a C wait could run on a thread an earlier test left idle, and the
// thread count would not move; a fresh process starts with a handful of
// threads. There, after one receiver has warmed up the poller, it opens the
// others and checks two things:
//
//   - every receive loop is parked in waitEvent in "IO wait" (the goroutine
//     dump says so; a loop in a C wait shows "syscall" instead);
//   - the Threads line of /proc/self/status grew by fewer than waiters/2
//     while they all wait (a thread per waiting receiver grows it by at
//     least waiters).
//
// Then one datagram reaches every receiver (the loops were live, woken by
// the completion event) and Close returns promptly for each (closing the
// poller's fd wakes a parked loop).
func TestBlockingWaitHoldsNoThread(t *testing.T) {
	a := iface(t)
	if os.Getenv(envWaitChild) != "" {
		measureWaiters(t, a)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^TestBlockingWaitHoldsNoThread$", "-test.v", "-test.count=1", "-test.timeout=120s")
	for _, kv := range os.Environ() {
		// The child must not overwrite the parent's datagram count.
		if !strings.HasPrefix(kv, envSent+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envWaitChild+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("%s -test.run=^TestBlockingWaitHoldsNoThread$ with %s=1: %v", exe, envWaitChild, err)
	}
	m := regexp.MustCompile(`(?m)^\s*blocking_test\.go:\d+: waiters (\d+) sent (\d+) threads `).FindSubmatch(out)
	if m == nil || !bytes.Contains(out, []byte("--- PASS: TestBlockingWaitHoldsNoThread")) {
		t.Fatalf("the child passed without reporting its measurement")
	}
	n, _ := strconv.ParseUint(string(m[2]), 10, 64)
	sent.Add(n)
}

// measureWaiters is the child's half of TestBlockingWaitHoldsNoThread.
func measureWaiters(t *testing.T, a netip.Addr) {
	// Groups apart from the parent's (group()).
	g := netip.AddrFrom4([4]byte{239, 192, 8, 1})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	warm := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 16, Mode: rdma.Blocking})
	send(t, s, payload(0, 32))
	recvOne(t, warm, 5*time.Second)
	parked(t, 1)
	before, created0 := threads(t), pprof.Lookup("threadcreate").Count()

	rs := []*rdma.Receiver{warm}
	for i := 0; i < waiters; i++ {
		r, err := rdma.NewReceiver(rdma.Config{Group: g, Interface: a, RingSlots: 16, Mode: rdma.Blocking})
		if err != nil {
			t.Fatalf("NewReceiver %d: %v", i, err)
		}
		defer r.Close()
		rs = append(rs, r)
	}
	parked(t, len(rs))
	// Let the runtime settle: a loop that held a thread would hold it
	// now.
	time.Sleep(300 * time.Millisecond)
	parked(t, len(rs))
	during, created1 := threads(t), pprof.Lookup("threadcreate").Count()

	send(t, s, payload(1, 32))
	for i, r := range rs {
		if d := recvOne(t, r, 5*time.Second); !bytes.Equal(d, payload(1, 32)) {
			t.Errorf("receiver %d: got %x", i, d)
		}
	}
	t.Logf("waiters %d sent %d threads before %d, with %d more Blocking receivers waiting %d (+%d); threads created %d -> %d",
		waiters, sent.Load(), before, waiters, during, during-before, created0, created1)
	if grew := during - before; grew >= waiters/2 {
		t.Errorf("the thread count grew by %d (%d -> %d) while %d Blocking receivers waited: a thread per waiter",
			grew, before, during, waiters)
	}

	done := make(chan struct{})
	start := time.Now()
	go func() {
		for _, r := range rs {
			r.Close()
		}
		close(done)
	}()
	select {
	case <-done:
		t.Logf("closed %d waiting receivers in %v", len(rs), time.Since(start).Round(time.Microsecond))
	case <-time.After(10 * time.Second):
		t.Fatalf("closing %d waiting receivers took more than 10s: Close did not wake a parked loop", len(rs))
	}
}

// parked waits until n goroutines are parked in the poller inside the
// receive loop's waitEvent, and fails if that does not happen within 10s.
func parked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, states := inWaitEvent()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d receive loops parked in waitEvent (IO wait), want %d; loops in waitEvent by state: %v", got, n, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inWaitEvent counts the goroutines in endpoint.waitEvent that are parked
// in the poller ("IO wait"), and how many are in waitEvent in each state.
func inWaitEvent() (int, map[string]int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	states := map[string]int{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "ud/rdma.(*endpoint).waitEvent(") {
			continue
		}
		// "goroutine 7 [IO wait]:" or "goroutine 7 [IO wait, 2 minutes]:"
		st := "?"
		if i, j := strings.IndexByte(g, '['), strings.IndexAny(g, ",]"); i >= 0 && j > i {
			st = g[i+1 : j]
		}
		states[st]++
	}
	return states["IO wait"], states
}

// threads returns the Threads line of /proc/self/status.
func threads(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatalf("thread count: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("/proc/self/status: Threads %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("/proc/self/status has no Threads line (%v)", sc.Err())
	return 0
}
