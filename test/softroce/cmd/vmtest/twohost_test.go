package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// twoHostsReports writes the two guests' reports of a two-host run and
// reads them back as the runner does: host A's feed handler and counters,
// host B's subscribers and counters.
func twoHostsReports(t *testing.T, a, b []string) (*guestReport, *guestReport) {
	t.Helper()
	r := twoHostsRunner()
	read := func(name string, lines []string) *guestReport {
		f := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := r.readReport(f)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	return read("a", a), read("b", b)
}

func twoHostsRunner() *runner {
	r := &runner{e2eMaxDelay: time.Millisecond, e2eLoss: 0.001, twoCount: 1000000, twoRate: 20000, twoTimeout: 5 * time.Minute}
	return r.twoHostsE2E()
}

const (
	twoFH   = `{"messages":1000000,"packets":124896,"heartbeats":18,"elapsed_s":50.4,"msgs_per_s":19827,"retransmit_requests":128,"retransmitted":1071}`
	twoSub1 = `{"received":1000000,"missing":0,"verify":true,"verify_ok":true,"packets_a":124918,"exit_reason":"expect"}`
	twoSub2 = `{"received":1000000,"missing":0,"verify":true,"verify_ok":true,"packets_a":124796,"injected_dropped_datagrams":122,"injected_dropped_messages":1015,"recovered":1015,"gaps":122,"requests":122,"exit_reason":"expect"}`
	// sub2 with nothing dropped and nothing recovered.
	twoSub2NoLoss = `{"received":1000000,"missing":0,"verify":true,"verify_ok":true,"packets_a":124918,"exit_reason":"expect"}`
)

func hostA(fh string, sentEnd string) []string {
	return []string{
		"@counters start 0 0", "@netdev start 10 0 0 20 0 0", "@barrier 13.4",
		"@e2etime 13 71 232", "@e2e feedhandler 0", "@summary feedhandler " + fh,
		"@counters end " + sentEnd + " 0", "@netdev end 428 0 0 125526 0 0", "@done",
	}
}

func hostB(sub1, sub2, rcvdEnd string) []string {
	return []string{
		"@counters start 0 0", "@netdev start 10 0 0 20 0 0", "@barrier 14.0",
		"@e2e sub1 0", "@summary sub1 " + sub1,
		"@e2e sub2 0", "@summary sub2 " + sub2,
		"@counters end 0 " + rcvdEnd, "@netdev end 125296 0 0 455 0 0", "@done",
	}
}

// A finished run passes when every message arrived, sub2's loss was
// recovered over NATS, and the counters account for the feed handler's
// datagrams on both hosts.
func TestCheckTwoHosts(t *testing.T) {
	r := twoHostsRunner()
	a, b := twoHostsReports(t, hostA(twoFH, "125118"), hostB(twoSub1, twoSub2, "124918"))
	if p := r.checkTwoHosts(a, b, 80*time.Second); len(p) != 0 {
		t.Fatalf("problems in a good run: %q", p)
	}

	// Datagrams lost between the hosts: B's rxe0 counted fewer than the
	// feed handler sent.
	a, b = twoHostsReports(t, hostA(twoFH, "125118"), hostB(twoSub1, twoSub2, "124000"))
	p := r.checkTwoHosts(a, b, 80*time.Second)
	if !contains(p, "two hosts: host B: rxe0 rcvd_pkts rose by 124000, less than the feed handler's 124914 datagrams (914 lost between the hosts)") {
		t.Fatalf("loss between the hosts is not reported: %q", p)
	}

	// A sent fewer than the feed handler says.
	a, b = twoHostsReports(t, hostA(twoFH, "124000"), hostB(twoSub1, twoSub2, "124000"))
	if p := r.checkTwoHosts(a, b, 80*time.Second); !contains(p, "host A: rxe0 sent_pkts rose by 124000, less than the feed handler's 124914 datagrams") {
		t.Fatalf("a short sent_pkts on A is not reported: %q", p)
	}

	// No recovery over NATS.
	a, b = twoHostsReports(t, hostA(twoFH, "125118"), hostB(twoSub1, twoSub2NoLoss, "124918"))
	if p := r.checkTwoHosts(a, b, 80*time.Second); !contains(p, "sub2 recovered nothing over NATS from host A") {
		t.Fatalf("a run without recovery is not reported: %q", p)
	}
}

// Whatever is missing fails the run: a host's summary, its counters, its
// @done; a host's own @error is reported with the host's name.
func TestCheckTwoHostsMissing(t *testing.T) {
	r := twoHostsRunner()
	a, b := twoHostsReports(t, []string{"@error host b did not say ready on tcp/7000 within 135s (got: )", "@done"},
		[]string{"@counters start 0 0"})
	p := r.checkTwoHosts(a, b, 80*time.Second)
	for _, want := range []string{
		"two hosts: host A: host b did not say ready",
		"two hosts: host B did not finish (no @done in its report)",
		"two hosts: feedhandler did not run",
		"two hosts: sub1 did not run",
		"two hosts: sub2 did not run",
	} {
		if !contains(p, want) {
			t.Errorf("no problem %q in %q", want, p)
		}
	}

	// Everything ran, but B reported no counters at the end.
	a, b = twoHostsReports(t, hostA(twoFH, "125118"), hostB(twoSub1, twoSub2, "124918")[:7])
	p = r.checkTwoHosts(a, b, 80*time.Second)
	if !contains(p, "host B: rxe0 hw_counters not reported at the start and end of the run") {
		t.Fatalf("missing counters are not reported: %q", p)
	}
}

// A feed handler short of the count fails the run, and so does a
// subscriber that got fewer messages.
func TestCheckTwoHostsShort(t *testing.T) {
	r := twoHostsRunner()
	fh := strings.Replace(twoFH, `"messages":1000000`, `"messages":999000`, 1)
	sub1 := strings.Replace(twoSub1, `"received":1000000`, `"received":999000`, 1)
	a, b := twoHostsReports(t, hostA(fh, "125118"), hostB(sub1, twoSub2, "124918"))
	p := r.checkTwoHosts(a, b, 80*time.Second)
	for _, want := range []string{"feedhandler published 999000 messages, want 1000000", "sub1 received 999000 messages, want 1000000"} {
		if !contains(p, want) {
			t.Errorf("no problem %q in %q", want, p)
		}
	}
}

func TestTwoHostsCmdline(t *testing.T) {
	r := twoHostsRunner()
	got := r.twoHostsCmdline("b")
	want := "tchost=b,10.77.0.1,10.77.0.2 tc2h=1000000,20000,1ms,0.001"
	if got != want {
		t.Fatalf("twoHostsCmdline(b) = %q, want %q", got, want)
	}
}

// waitListen sees a listening socket in /proc/net/tcp without connecting
// to it.
func TestWaitListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	v := &vm{done: make(chan struct{})}
	if err := waitListen(l.Addr().(*net.TCPAddr).Port, v, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	close(v.done)
	if err := waitListen(port, v, 2*time.Second); err == nil || !strings.Contains(err.Error(), "qemu ended") {
		t.Fatalf("waitListen on a port nobody listens on, qemu ended: %v", err)
	}
}
