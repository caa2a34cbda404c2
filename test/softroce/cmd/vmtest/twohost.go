package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The two-host run's defaults. With one virtual CPU per guest the feed
// handler, unpaced, reached about 76,000 msg/s here on an idle host and
// 51,000 with another VM running beside (B kept up without loss both
// times); 20,000 msg/s leaves room for a slower or busier host, and a
// million messages take about 50 s to publish and 75 to 80 s from boot to
// power-off, a quarter of the limit (see run.sh for the measurements).
const (
	defaultTwoHostsCount   = 1000000
	defaultTwoHostsRate    = 20000
	defaultTwoHostsTimeout = 5 * time.Minute
)

// The two guests' addresses on their e1000 NICs, in a private (RFC 1918)
// /24: the socket network joins the two NICs and reaches nothing else.
const (
	twoHostsAddrA = "10.77.0.1"
	twoHostsAddrB = "10.77.0.2"
)

// vm is one guest of the two-host run.
type vm struct {
	name    string // "a" or "b"
	console string // its console (ttyS0)
	results string // its report (ttyS1)
	cmd     *exec.Cmd
	logf    *os.File
	err     error         // how qemu ended
	ran     time.Duration // how long it ran
	done    chan struct{} // closed when qemu ended
}

// runTwoHosts boots two VMs joined by a qemu socket network on 127.0.0.1,
// the feed handler in A and two subscribers in B (guest-twohost.sh), and
// checks what both report.
func (r *runner) runTwoHosts() error {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return errors.New("qemu-system-x86_64 not found (Debian package qemu-system-x86)")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		return errors.New("timeout (coreutils) not found: each VM runs under it")
	}
	guestTimeout := r.twoTimeout - 30*time.Second
	tr := r.twoHostsE2E()
	fmt.Printf("\n=== two hosts: A %s (feedhandler --transport rdma --count %d --rate %s --max-delay %v, embedded NATS on %s:4222) and B %s (sub1 and sub2 --transport rdma --verify, sub2 --inject-loss %v, recovery over NATS from A); e1000 NICs joined by qemu -netdev socket on 127.0.0.1, -smp %d each\n",
		twoHostsAddrA, r.twoCount, strconv.FormatFloat(r.twoRate, 'f', -1, 64), r.e2eMaxDelay, twoHostsAddrA, twoHostsAddrB, r.e2eLoss, r.twoSMP)
	fmt.Printf("vmtest: booting %s twice under qemu (TCG), limit %v\n", readTrim(filepath.Join(r.work, "kernel.txt")), r.twoTimeout)

	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), r.twoTimeout+15*time.Second)
	defer cancel()
	// A listens on a port that was free a moment ago; should another
	// process take it first, qemu ends at once and A starts again on
	// another.
	var a *vm
	var port int
	for attempt := 1; ; attempt++ {
		if port, err = freePort(); err != nil {
			return fmt.Errorf("no free TCP port on 127.0.0.1 for the socket network: %v", err)
		}
		if a, err = r.startVM(ctx, qemu, "a", "listen=127.0.0.1:"+strconv.Itoa(port), "52:54:00:77:00:01", guestTimeout); err != nil {
			return err
		}
		// B connects to A's listening socket: wait until qemu listens,
		// without connecting (qemu takes the first connection as its
		// peer).
		err = waitListen(port, a, 20*time.Second)
		if err == nil {
			break
		}
		a.cmd.Cancel()
		<-a.done
		a.logf.Close()
		tail(a.console)
		if attempt == 3 {
			return fmt.Errorf("VM A: %v", err)
		}
		fmt.Printf("vmtest: VM A: %v; again on another port\n", err)
	}
	fmt.Printf("vmtest: VM A listens on 127.0.0.1:%d; starting VM B\n", port)
	b, err := r.startVM(ctx, qemu, "b", "connect=127.0.0.1:"+strconv.Itoa(port), "52:54:00:77:00:02", guestTimeout)
	if err != nil {
		cancel()
		<-a.done
		a.logf.Close()
		return err
	}
	<-a.done
	<-b.done
	a.logf.Close()
	b.logf.Close()
	wall := time.Since(t0)
	fmt.Printf("vmtest: VM A ran %v, VM B %v; both %v of their %v limit (%.0f%%; consoles: %s, %s)\n",
		a.ran.Round(100*time.Millisecond), b.ran.Round(100*time.Millisecond), wall.Round(100*time.Millisecond), r.twoTimeout,
		100*wall.Seconds()/r.twoTimeout.Seconds(), a.console, b.console)

	var problems []string
	for _, v := range []*vm{a, b} {
		if v.err != nil {
			tail(v.console)
			if v.ran >= r.twoTimeout {
				problems = append(problems, fmt.Sprintf("VM %s did not finish within %v", strings.ToUpper(v.name), r.twoTimeout))
			} else {
				problems = append(problems, fmt.Sprintf("VM %s: qemu: %v", strings.ToUpper(v.name), v.err))
			}
		}
	}
	ga, err := tr.readReport(a.results)
	if err != nil {
		return fmt.Errorf("VM A: %v", err)
	}
	gb, err := tr.readReport(b.results)
	if err != nil {
		return fmt.Errorf("VM B: %v", err)
	}
	problems = append(problems, tr.checkTwoHosts(ga, gb, wall)...)
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}

// twoHostsE2E is the runner as the end-to-end checks (checkE2EFeedHandler,
// checkE2ESubscribers) see the two-host run: its count and rate, and the
// two VMs' limit.
func (r *runner) twoHostsE2E() *runner {
	t := *r
	t.e2eCount, t.e2eRate, t.timeout = r.twoCount, r.twoRate, r.twoTimeout
	return &t
}

// startVM starts guest name (a or b) under timeout(1) with one e1000 NIC on
// the socket network netdev and the two-host run's kernel command line.
func (r *runner) startVM(ctx context.Context, qemu, name, netdev, mac string, guestTimeout time.Duration) (*vm, error) {
	v := &vm{name: name, done: make(chan struct{}),
		console: filepath.Join(r.work, "twohost-"+name+"-console.log"),
		results: filepath.Join(r.work, "twohost-"+name+"-results.log")}
	os.Remove(v.results)
	var err error
	if v.logf, err = os.Create(v.console); err != nil {
		return nil, err
	}
	nic := []string{"-netdev", "socket,id=n0," + netdev, "-device", "e1000,netdev=n0,mac=" + mac}
	cmdline := baseCmdline(guestTimeout) + " " + r.twoHostsCmdline(name)
	args := append([]string{"-k", "10", strconv.Itoa(int(r.twoTimeout.Seconds())), qemu},
		r.qemuArgs(r.twoSMP, nic, v.results, cmdline)...)
	v.cmd = exec.CommandContext(ctx, "timeout", args...)
	v.cmd.Stdin = nil
	if r.verbose {
		v.cmd.Stdout = io.MultiWriter(v.logf, prefixWriter{"[" + name + "] ", os.Stdout})
	} else {
		v.cmd.Stdout = v.logf
	}
	v.cmd.Stderr = v.cmd.Stdout
	// timeout(1) passes SIGTERM on to qemu: when ctx ends (the backstop to
	// timeout's own limit), and should vmtest die.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	v.cmd.Cancel = func() error { return v.cmd.Process.Signal(syscall.SIGTERM) }
	v.cmd.WaitDelay = 15 * time.Second
	t0 := time.Now()
	if err := v.cmd.Start(); err != nil {
		v.logf.Close()
		return nil, fmt.Errorf("VM %s: %v", strings.ToUpper(name), err)
	}
	go func() {
		v.err = v.cmd.Wait()
		v.ran = time.Since(t0)
		close(v.done)
	}()
	return v, nil
}

// twoHostsCmdline is the part of guest name's kernel command line that
// guest-twohost.sh reads: its role and both addresses (tchost=), and the
// run (tc2h=COUNT,RATE,MAX_DELAY,LOSS).
func (r *runner) twoHostsCmdline(name string) string {
	return "tchost=" + name + "," + twoHostsAddrA + "," + twoHostsAddrB +
		" tc2h=" + strconv.FormatUint(r.twoCount, 10) + "," + strconv.FormatFloat(r.twoRate, 'f', -1, 64) +
		"," + r.e2eMaxDelay.String() + "," + strconv.FormatFloat(r.e2eLoss, 'f', -1, 64)
}

// prefixWriter writes each chunk to w with a prefix (-v: both consoles on
// stdout, told apart).
type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	s := strings.ReplaceAll(string(b), "\r", "")
	s = strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+p.prefix)
	if _, err := io.WriteString(p.w, p.prefix+s+"\n"); err != nil {
		return 0, err
	}
	return len(b), nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListen waits until a socket listens on 127.0.0.1:port, read from
// /proc/net/tcp, or v's qemu has ended, or limit has passed.
func waitListen(port int, v *vm, limit time.Duration) error {
	want := fmt.Sprintf("0100007F:%04X", port)
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			// sl local_address rem_address st ...; st 0A is LISTEN.
			if len(f) > 3 && f[1] == want && f[3] == "0A" {
				return nil
			}
		}
		select {
		case <-v.done:
			return fmt.Errorf("qemu ended (%v) before it listened on 127.0.0.1:%d", v.err, port)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("qemu did not listen on 127.0.0.1:%d within %v", port, limit)
		}
	}
}

// checkTwoHosts prints the two-host run's results and returns its
// problems. a and b are the guests' reports: the feed handler's from A,
// the subscribers' from B, rxe0's counters from both. wall is how long the
// two VMs ran. The run passes when the feed handler published exactly
// -two-hosts-count messages and exited 0, both subscribers exited 0 with
// every message in order, none missing and verification passing, the
// lossy one recovered messages over NATS from A (and A's feed handler
// answered requests), and rxe0's counters account for the traffic (see
// checkTwoHostsCounters).
func (r *runner) checkTwoHosts(a, b *guestReport, wall time.Duration) []string {
	bad := &e2eProblems{prefix: "two hosts: "}
	for _, g := range []struct {
		name string
		rep  *guestReport
	}{{"A", a}, {"B", b}} {
		for _, p := range g.rep.problems {
			bad.add("host %s: %s", g.name, strings.TrimPrefix(p, "guest: "))
		}
		if !g.rep.done {
			bad.add("host %s did not finish (no @done in its report)", g.name)
		}
	}
	rep := newE2EReport()
	rep.procs["feedhandler"] = a.e2e.procs["feedhandler"]
	rep.procs["sub1"], rep.procs["sub2"] = b.e2e.procs["sub1"], b.e2e.procs["sub2"]
	rep.t0, rep.t1, rep.budget = a.e2e.t0, a.e2e.t1, a.e2e.budget
	fh, subs := readE2ESummaries(rep, bad)
	limited := timeLimited(rep, fh)
	if limited {
		reportTimeLimit(rep, fh, subs, bad)
	}
	if fh != nil {
		r.checkE2EFeedHandler(fh, limited, bad)
	}
	maxPacketsA, _ := r.checkE2ESubscribers(subs, r.e2eCount, limited, bad)
	sub2 := subs["sub2"]
	if sub2 != nil && r.e2eLoss > 0 && sub2.Recovered == 0 {
		bad.add("sub2 recovered nothing over NATS from host A with --inject-loss %v", r.e2eLoss)
	}
	if fh != nil && sub2 != nil && sub2.Recovered > 0 && fh.Requests == 0 {
		bad.add("sub2 recovered %d messages but the feed handler on host A answered no request", sub2.Recovered)
	}
	r.printTwoHostsSummary(fh, sub2, wall)
	if limited {
		return bad.list // the counters account for a finished run only
	}
	checkTwoHostsCounters(a, b, fh, maxPacketsA, bad)
	return bad.list
}

// printTwoHostsSummary prints the run in one line: messages, rate, time,
// what sub2 recovered over NATS, and the VMs' time against their limit.
func (r *runner) printTwoHostsSummary(fh *fhSummary, sub2 *subSummary, wall time.Duration) {
	if fh == nil {
		return
	}
	rec := "sub2 printed no summary"
	if sub2 != nil {
		rec = fmt.Sprintf("sub2 dropped %s messages on purpose and recovered %s over NATS from A", group(sub2.InjectedMessages), group(sub2.Recovered))
	}
	use := wall.Seconds() / r.timeout.Seconds()
	fmt.Printf("two hosts: %s messages at %s msg/s (asked %s) in %.1f s; %s (feed handler: %d requests, %d messages retransmitted); the VMs ran %.0f s, %.0f%% of their %v limit (margin %.1fx)\n",
		group(fh.Messages), group(uint64(fh.MsgsPerS+0.5)), group(uint64(r.e2eRate)), fh.ElapsedS, rec,
		fh.Requests, fh.Retransmitted, wall.Seconds(), 100*use, r.timeout, 1/max(use, 1e-9))
	if use > 0.5 {
		fmt.Printf("two hosts: WARNING: less than 2x margin to the VMs' time limit; use a lower -two-hosts-count or a longer -two-hosts-timeout\n")
	}
}

// checkTwoHostsCounters prints and checks rxe0's counters on both hosts
// over the run. Nothing but the feed handler uses rxe0 on A, nothing but
// the subscribers on B, and the socket network carries A's packets to B
// alone; rxe counts a packet in sent_pkts when it transmits it and in
// rcvd_pkts when it arrives, once however many queue pairs take it. So:
//
//	A's sent >= the feed handler's data packets + heartbeats (its end of
//	            session datagrams come on top and are not counted);
//	B's rcvd >= those too: every one crossed the wire to B;
//	B's rcvd <= A's sent (one count per packet, nothing else sends).
//
// Recovery goes over NATS (TCP on eth0), not rxe0.
func checkTwoHostsCounters(a, b *guestReport, fh *fhSummary, maxPacketsA uint64, bad *e2eProblems) {
	as, oka0 := a.counters["start"]
	ae, oka1 := a.counters["end"]
	bs, okb0 := b.counters["start"]
	be, okb1 := b.counters["end"]
	if !oka0 || !oka1 {
		bad.add("host A: rxe0 hw_counters not reported at the start and end of the run")
	}
	if !okb0 || !okb1 {
		bad.add("host B: rxe0 hw_counters not reported at the start and end of the run")
	}
	if !oka0 || !oka1 || !okb0 || !okb1 || fh == nil {
		return
	}
	printNetdev("A", a)
	printNetdev("B", b)
	aSent, aRcvd := ae[0]-as[0], ae[1]-as[1]
	bSent, bRcvd := be[0]-bs[0], be[1]-bs[1]
	fhSent := int64(fh.Packets + fh.Heartbeats)
	fmt.Printf("two hosts: rxe0 hw_counters over the run: A sent_pkts +%s (rcvd_pkts +%s), B rcvd_pkts +%s (sent_pkts +%s); feed handler: %s data packets + %d heartbeats = %s datagrams; most a subscriber took: %s\n",
		group(uint64(aSent)), group(uint64(aRcvd)), group(uint64(bRcvd)), group(uint64(bSent)),
		group(fh.Packets), fh.Heartbeats, group(uint64(fhSent)), group(maxPacketsA))
	if aSent < fhSent {
		bad.add("host A: rxe0 sent_pkts rose by %d, less than the feed handler's %d datagrams", aSent, fhSent)
	}
	if bRcvd < fhSent {
		bad.add("host B: rxe0 rcvd_pkts rose by %d, less than the feed handler's %d datagrams (%d lost between the hosts)", bRcvd, fhSent, fhSent-bRcvd)
	}
	if bRcvd < int64(maxPacketsA) {
		bad.add("host B: rxe0 rcvd_pkts rose by %d, less than the %d datagrams a subscriber received", bRcvd, maxPacketsA)
	}
	if bRcvd > aSent {
		bad.add("host B: rxe0 rcvd_pkts rose by %d, more than host A's sent_pkts (%d): not one count per packet", bRcvd, aSent)
	}
}

// printNetdev prints host name's eth0 counts over the run (@netdev start
// and end): what the NIC carried and dropped, and the input backlog's
// drops, which say where packets rxe0 never saw were lost.
func printNetdev(name string, g *guestReport) {
	s, e := g.netdev["start"], g.netdev["end"]
	if len(s) != 6 || len(e) != 6 {
		fmt.Printf("two hosts: host %s reported no eth0 counts\n", name)
		return
	}
	d := make([]int64, 6)
	for i := range d {
		d[i] = e[i] - s[i]
	}
	fmt.Printf("two hosts: host %s eth0 over the run: rx packets +%s (dropped by the stack +%d, missed by the NIC +%d), tx packets +%s (dropped +%d); input backlog drops +%d\n",
		name, group(uint64(d[0])), d[1], d[2], group(uint64(d[3])), d[4], d[5])
}
