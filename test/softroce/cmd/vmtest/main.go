// Command vmtest runs tickcast's RDMA tests against real verbs on a machine
// without RDMA hardware: it builds the packages' tests with -tags rdma, packs
// them into a small initramfs with Debian's kernel and the rdma_rxe
// (Soft-RoCE) modules (build-initramfs.sh), boots it under qemu with no
// network device, and checks what the guest (guest-init.sh) reports.
//
// After the test binaries the guest runs the real programs end to end: two
// subscribers (--transport rdma --verify) join, then the feed handler
// (--transport rdma) publishes synthetic messages at -e2e-rate for
// -e2e-duration (or, for soak runs, -e2e-count of them),
// and the subscribers recover any loss over the feed handler's embedded NATS
// server on the guest's loopback. The second subscriber drops a share
// (-e2e-loss) of what it receives (--inject-loss), so recovery is exercised
// every run. The commands are built with -tags rdma and copied into the
// guest with their shared libraries.
//
// It fails unless every test that `go test -list` names passed (a skip or a
// missing test is a failure), every test binary exited 0, feedhandler
// --list-devices and subscriber --list-devices (always built with -tags
// rdma) exited 0 and printed rxe0, its port, netdev, NUMA node, counters and
// where --iface leads (listDevicesWant), rxe0's hw_counters
// sent_pkts and rcvd_pkts rose by at least the number of datagrams the tests
// say they sent, and (end to end) all three programs exited 0, both
// subscribers received every message the feed handler published (COUNT, in a
// count-sized run) in order with none missing and verification passing, and the counters account for the feed handler's
// datagrams (see checkE2E).
//
// A test may print result lines as "@bench LINE" on its output (ud/rdma's
// TestStarvation and TestCompareRDMAUDP do: the starvation counts and the
// rdma ÷ udp ratios); they are collected from the go test -json events and
// printed together after the test results.
//
// Then the guest runs ud/rdma's device-removal reproducer (removal_test.go)
// in a fresh process, with a second device (rxe1 on veth1) present: rdma
// link delete while a receiver and a sender hold rxe0, then rdma link add.
// Its lines are printed; it fails the run unless it exited 0 (both ends
// observed RDMA_CM_EVENT_DEVICE_REMOVAL, the removal completed within 5 s
// and the stream resumed by itself after the re-add). rxe0 is there again
// after it.
//
// Last (-faults, on by default), the faults run: the feed handler and one
// verifying subscriber while the link flaps and rxe0 is removed and added
// back (faults.go, checkFaults).
//
// -run REGEXP runs only the matching tests, for development; the check then
// expects only those.
//
// Then two hosts (-two-hosts, on by default; twohost.go, guest-twohost.sh):
// two VMs of the same kernel and initramfs, each with one e1000 NIC, the
// NICs joined by qemu's -netdev socket over TCP on 127.0.0.1 (A listens on
// a port free at run time, B connects; nothing leaves the host), A
// 10.77.0.1 and B 10.77.0.2, rxe0 on eth0 in each, each VM under
// timeout(1). A runs the feed handler (--transport rdma,
// -two-hosts-count messages at -two-hosts-rate, its embedded NATS server on
// A's address); B runs two subscribers (--transport rdma --verify
// --expect, recovery over NATS from A), the second with --inject-loss
// -e2e-loss. B tells A over TCP once both subscribers have joined; A
// publishes only then. It fails unless the feed handler published exactly
// -two-hosts-count messages and exited 0, both subscribers exited 0 with
// every message in order, none missing and verification passing, the lossy
// one recovered messages over NATS from A, A's rxe0 sent_pkts and B's
// rcvd_pkts each rose by at least the feed handler's datagrams, and both
// guests finished their report (see checkTwoHosts).
//
// Usage, from anywhere in the module (test/softroce/run.sh checks the
// host's packages first):
//
//	go run ./test/softroce/cmd/vmtest [-v] [-work DIR] [-timeout 5m]
//		[-e2e=false] [-e2e-duration D | -e2e-count N] [-e2e-rate R]
//		[-e2e-max-delay D] [-e2e-loss P] [-faults=false] [-run REGEXP]
//		[-single=false] [-two-hosts=false] [-two-hosts-count N]
//		[-two-hosts-rate R] [-two-hosts-timeout D] [-two-hosts-smp N]
//		[package ...]
//
// The packages default to ./ud/rdma; -e2e=false leaves out the single VM's
// end-to-end run, -two-hosts=false the two-host run, and -single=false
// the single VM (the two-host run alone).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	var (
		work    = flag.String("work", defaultWork(), "directory for the kernel cache, binaries, initramfs and logs")
		timeout = flag.Duration("timeout", 5*time.Minute, "limit for the whole VM run (boot to power-off)")
		verbose = flag.Bool("v", false, "print every test's output, not only failing tests'")
		mem     = flag.Int("mem", 1024, "guest memory in MiB")
		extra   = flag.String("extra", "", "comma-separated host binaries to add to the guest's /tests as well (e.g. rdma-tagged commands an end-to-end test runs)")
		e2e     = flag.Bool("e2e", true, "run the feed handler and two subscribers end to end after the tests")
		count   = flag.Uint64("e2e-count", 0, "end to end: messages the feed handler publishes to two subscribers, for soak runs (e.g. 1000000; 0: as many as -e2e-duration allows)")
		dur     = flag.Duration("e2e-duration", defaultE2EDuration, "end to end: how long the feed handler publishes when -e2e-count is 0")
		rate    = flag.Float64("e2e-rate", defaultE2ERate, "end to end: the feed handler's --rate, messages per second")
		delay   = flag.Duration("e2e-max-delay", defaultE2EMaxDelay, "end to end: the feed handler's --max-delay (under TCG its default fills packets with one message)")
		probe   = flag.Int("probe", 0, "diagnostics: before the end-to-end run, run the feed handler alone for this many seconds in several configurations (unpaced, paced, spin-paced, without live NATS, with one subscriber) and print its rate and CPU use (0: none)")
		loss    = flag.Float64("e2e-loss", defaultE2ELoss, "end to end: the second subscriber's --inject-loss, which recovery must fill (0: none)")
		faults  = flag.Bool("faults", true, "after the end-to-end run, run the feed handler and one verifying subscriber while the link flaps and rxe0 is removed and added back")
		fcount  = flag.Uint64("faults-count", defaultFaultsCount, "faults run: messages the feed handler publishes")
		frate   = flag.Int("faults-rate", defaultFaultsRate, "faults run: the feed handler's --rate")
		run     = flag.String("run", "", "run only the tests whose names match this regular expression, as go test -run (for development; the check then expects only those, and CI runs them all)")
		single  = flag.Bool("single", true, "boot the single VM: the test binaries, the end-to-end run and the device removal reproducer (-single=false with -two-hosts: the two-host run alone)")
		two     = flag.Bool("two-hosts", true, "boot two VMs joined by a qemu socket network on 127.0.0.1: the feed handler in one, two subscribers in the other (after the single VM)")
		twoN    = flag.Uint64("two-hosts-count", defaultTwoHostsCount, "two hosts: messages the feed handler publishes")
		twoRate = flag.Float64("two-hosts-rate", defaultTwoHostsRate, "two hosts: the feed handler's --rate, messages per second")
		twoTime = flag.Duration("two-hosts-timeout", defaultTwoHostsTimeout, "two hosts: limit for the two VMs (boot to power-off)")
		twoSMP  = flag.Int("two-hosts-smp", 1, "two hosts: virtual CPUs per VM")
	)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: vmtest [flags] [package ...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./ud/rdma"}
	}
	switch {
	case *rate <= 0:
		fmt.Fprintf(os.Stderr, "vmtest: -e2e-rate %v: must be positive (as fast as possible would starve the subscribers on the guest's two CPUs)\n", *rate)
		os.Exit(2)
	case *delay <= 0:
		fmt.Fprintf(os.Stderr, "vmtest: -e2e-max-delay %v: must be positive\n", *delay)
		os.Exit(2)
	case *count == 0 && *dur <= 0:
		fmt.Fprintf(os.Stderr, "vmtest: -e2e-duration %v: must be positive when -e2e-count is 0\n", *dur)
		os.Exit(2)
	case *fcount == 0 || *frate <= 0:
		fmt.Fprintf(os.Stderr, "vmtest: -faults-count %d, -faults-rate %d: both must be positive\n", *fcount, *frate)
		os.Exit(2)
	case *loss < 0 || *loss >= 1:
		fmt.Fprintf(os.Stderr, "vmtest: -e2e-loss %v: want 0 <= loss < 1\n", *loss)
		os.Exit(2)
	case !*single && !*two:
		fmt.Fprintf(os.Stderr, "vmtest: -single=false -two-hosts=false: nothing to run\n")
		os.Exit(2)
	case *twoN == 0:
		fmt.Fprintf(os.Stderr, "vmtest: -two-hosts-count 0: the two-host run is sized by count\n")
		os.Exit(2)
	case *twoRate <= 0:
		fmt.Fprintf(os.Stderr, "vmtest: -two-hosts-rate %v: must be positive\n", *twoRate)
		os.Exit(2)
	case *twoTime < time.Minute:
		fmt.Fprintf(os.Stderr, "vmtest: -two-hosts-timeout %v: at least 1m\n", *twoTime)
		os.Exit(2)
	case *twoSMP < 1:
		fmt.Fprintf(os.Stderr, "vmtest: -two-hosts-smp %d: at least 1\n", *twoSMP)
		os.Exit(2)
	}
	var runRE *regexp.Regexp
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil || strings.ContainsAny(*run, " \t") {
			fmt.Fprintf(os.Stderr, "vmtest: -run %q: want a regular expression without spaces (%v)\n", *run, err)
			os.Exit(2)
		}
		runRE = re
	}
	r := &runner{work: *work, timeout: *timeout, verbose: *verbose, mem: *mem, e2e: *e2e, probe: *probe, only: runRE,
		faults: *faults, faultsCount: *fcount, faultsRate: *frate,
		e2eCount: *count, e2eDuration: *dur, e2eRate: *rate, e2eMaxDelay: *delay, e2eLoss: *loss,
		single: *single, twoHosts: *two, twoCount: *twoN, twoRate: *twoRate, twoTimeout: *twoTime, twoSMP: *twoSMP}
	if *extra != "" {
		r.extra = strings.Split(*extra, ",")
	}
	if err := r.run(pkgs); err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("vmtest: PASS")
}

func defaultWork() string {
	if d := os.Getenv("TICKCAST_SOFTROCE_WORK"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "tickcast-softroce")
	}
	return filepath.Join(os.TempDir(), "tickcast-softroce")
}

// The end-to-end run's defaults. Under qemu's TCG the feed handler's 50us
// --max-delay expires after every message, and one message per packet
// carries about 1,000 messages/s; with 1ms packets fill (about 10 messages
// of the synthetic feed in rxe0's 1024-byte MTU). The guest reaches about
// 4,000 to 15,000 messages/s depending on the host (see run.sh for where
// the time goes), so the run is sized by time, not by count: 60 s of
// publishing leave the VM more than 2x margin within its 5-minute limit
// however fast the guest is. -e2e-count 1000000 is the soak run.
const (
	defaultE2EDuration = 60 * time.Second
	defaultE2ERate     = 15000
	defaultE2EMaxDelay = time.Millisecond
	defaultE2ELoss     = 0.001
)

type runner struct {
	work        string
	timeout     time.Duration
	verbose     bool
	mem         int
	extra       []string
	e2e         bool
	probe       int            // seconds per probe run (-probe); 0: none
	only        *regexp.Regexp // -run: only these tests; nil: all
	faults      bool
	faultsCount uint64
	faultsRate  int
	e2eCount    uint64        // 0: sized by e2eDuration
	e2eDuration time.Duration // publishing time when e2eCount is 0
	vmRan       time.Duration // how long the VM ran
	e2eRate     float64
	e2eMaxDelay time.Duration
	e2eLoss     float64
	root        string // module root
	suites      []*suite

	single     bool          // boot the single VM (-single)
	twoHosts   bool          // the two-host run (-two-hosts)
	twoCount   uint64        // messages the two-host run's feed handler publishes
	twoRate    float64       // and its --rate
	twoTimeout time.Duration // limit for the two VMs
	twoSMP     int           // virtual CPUs per VM
}

// suite is one package's test binary.
type suite struct {
	pkg      string   // import path
	name     string   // binary name in the guest, without .test
	expected []string // top-level tests from go test -list
	bin      string

	// From the guest.
	started bool
	exit    int
	sent    int64
	results map[string]string // test (and subtest) → final action
	elapsed map[string]float64
	output  map[string]*bytes.Buffer
	order   []string
	bench   []string // the tests' result lines (@bench, see record)
}

func (r *runner) run(pkgs []string) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		return fmt.Errorf("not inside the tickcast module (go env GOMOD: %q, %v)", out, err)
	}
	r.root = filepath.Dir(strings.TrimSpace(string(out)))
	bindir := filepath.Join(r.work, "bin")
	if err := os.RemoveAll(bindir); err != nil {
		return err
	}
	if err := os.MkdirAll(bindir, 0o755); err != nil {
		return err
	}
	t0 := time.Now()
	bins := []string{}
	if r.single {
		for _, p := range pkgs {
			s, err := r.buildSuite(p, bindir)
			if err != nil {
				return err
			}
			r.suites = append(r.suites, s)
			bins = append(bins, s.bin)
		}
		t2j := filepath.Join(bindir, "test2json")
		if err := r.goCmd("build", "-o", t2j, "cmd/test2json"); err != nil {
			return err
		}
		bins = append(bins, t2j)
	}
	// Always: the guest runs their --list-devices; the end-to-end run and
	// the probes use them too.
	for _, c := range e2eCommands {
		bin := filepath.Join(bindir, c)
		if err := r.goCmd("build", "-tags", "rdma", "-o", bin, "./cmd/"+c); err != nil {
			return err
		}
		bins = append(bins, bin)
	}
	bins = append(bins, r.extra...)
	script := filepath.Join(r.root, "test", "softroce", "build-initramfs.sh")
	cmd := exec.Command("bash", append([]string{script, r.work}, bins...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build-initramfs.sh: %v", err)
	}
	what := fmt.Sprintf("%d test binaries, %s", len(r.suites), strings.Join(e2eCommands, ", "))
	fmt.Printf("vmtest: built %s and the initramfs in %v\n", what, time.Since(t0).Round(100*time.Millisecond))

	// The two-host run comes after the single VM whatever its result, so
	// that one run reports both.
	var errs []error
	if r.single {
		results := filepath.Join(r.work, "results.log")
		err := r.boot(results)
		if err == nil {
			err = r.check(results)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("single VM: %w", err))
		}
	}
	if r.twoHosts {
		if err := r.runTwoHosts(); err != nil {
			errs = append(errs, fmt.Errorf("two hosts: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (r *runner) goCmd(args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %v", strings.Join(args, " "), err)
	}
	return nil
}

// buildSuite lists a package's tests and builds its rdma-tagged test binary.
func (r *runner) buildSuite(pkg, bindir string) (*suite, error) {
	cmd := exec.Command("go", "list", "-tags", "rdma", pkg)
	cmd.Dir = r.root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v", pkg, err)
	}
	s := &suite{pkg: strings.TrimSpace(string(out)), results: map[string]string{},
		elapsed: map[string]float64{}, output: map[string]*bytes.Buffer{}}
	s.name = strings.ReplaceAll(strings.TrimPrefix(s.pkg, "github.com/tickcast/tickcast/"), "/", "_")
	cmd = exec.Command("go", "test", "-tags", "rdma", "-list", ".", pkg)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err = cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -list %s: %v", pkg, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		// Benchmarks do not run; tests, examples with output and fuzz
		// targets' seed corpora do.
		if (strings.HasPrefix(l, "Test") || strings.HasPrefix(l, "Example") || strings.HasPrefix(l, "Fuzz")) &&
			(r.only == nil || r.only.MatchString(l)) {
			s.expected = append(s.expected, l)
		}
	}
	if len(s.expected) == 0 {
		return nil, fmt.Errorf("%s: go test -tags rdma -list found no tests (-run %v)", pkg, r.only)
	}
	s.bin = filepath.Join(bindir, s.name+".test")
	if err := r.goCmd("test", "-c", "-tags", "rdma", "-o", s.bin, pkg); err != nil {
		return nil, err
	}
	return s, nil
}

// boot runs the VM until it powers off or the timeout passes. The console
// (ttyS0) goes to console.log, the guest's report (ttyS1) to results.
func (r *runner) boot(results string) error {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return errors.New("qemu-system-x86_64 not found (Debian package qemu-system-x86)")
	}
	os.Remove(results)
	console := filepath.Join(r.work, "console.log")
	logf, err := os.Create(console)
	if err != nil {
		return err
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	guestTimeout := r.timeout - 30*time.Second
	if guestTimeout < 30*time.Second {
		guestTimeout = r.timeout
	}
	// No network device: nothing the tests send can leave the VM.
	args := r.qemuArgs(min(2, runtime.NumCPU()), []string{"-nic", "none"}, results, r.cmdline(guestTimeout))
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.Stdin = nil
	if r.verbose {
		cmd.Stdout = io.MultiWriter(logf, os.Stdout)
	} else {
		cmd.Stdout = logf
	}
	cmd.Stderr = cmd.Stdout
	t0 := time.Now()
	fmt.Printf("vmtest: booting %s under qemu (TCG), limit %v\n", readTrim(filepath.Join(r.work, "kernel.txt")), r.timeout)
	err = cmd.Run()
	r.vmRan = time.Since(t0)
	fmt.Printf("vmtest: VM ran %v of its %v limit (%.0f%%; console: %s)\n", r.vmRan.Round(100*time.Millisecond), r.timeout,
		100*r.vmRan.Seconds()/r.timeout.Seconds(), console)
	if ctx.Err() != nil {
		tail(console)
		return fmt.Errorf("the VM did not finish within %v", r.timeout)
	}
	if err != nil {
		tail(console)
		return fmt.Errorf("qemu: %v", err)
	}
	return nil
}

// qemuArgs are qemu's arguments for a VM of smp virtual CPUs with the
// network devices net, its report (ttyS1) going to results and the kernel
// command line cmdline. The console (ttyS0) is qemu's stdout.
func (r *runner) qemuArgs(smp int, net []string, results, cmdline string) []string {
	args := []string{
		// TCG: this host's /dev/kvm does not boot a stock kernel. tb-size
		// bounds qemu's translation cache (and so its memory).
		"-accel", "tcg,thread=multi,tb-size=256", "-cpu", "max",
		"-smp", strconv.Itoa(smp), "-m", strconv.Itoa(r.mem),
		"-display", "none", "-monitor", "none", "-no-reboot",
	}
	args = append(args, net...)
	return append(args,
		"-kernel", filepath.Join(r.work, "vmlinuz"),
		"-initrd", filepath.Join(r.work, "initramfs.cpio.gz"),
		// ttyS0 is the console; ttyS1 the guest's report, kept apart
		// from kernel messages.
		"-serial", "stdio",
		"-serial", "file:"+results,
		"-append", cmdline,
	)
}

// cmdline is the guest kernel's command line: guest-init.sh reads the
// tests' timeout from tctimeout= and the end-to-end run from tce2e=.
func (r *runner) cmdline(guestTimeout time.Duration) string {
	// clocksource=tsc: see run.sh. Under TCG the kernel otherwise picks
	// the emulated HPET, and every clock read becomes a system call that
	// traps into qemu's device model.
	c := baseCmdline(guestTimeout)
	if r.only != nil {
		c += " tcrun=" + r.only.String()
	}
	if r.faults {
		c += " tcfaults=" + strconv.FormatUint(r.faultsCount, 10) + "," + strconv.Itoa(r.faultsRate)
	}
	if r.probe > 0 {
		c += " tcprobe=" + strconv.Itoa(r.probe)
	}
	if r.e2e {
		c += " tce2e=" + strconv.FormatUint(r.e2eCount, 10) + "," + strconv.FormatFloat(r.e2eRate, 'f', -1, 64) +
			"," + r.e2eMaxDelay.String() + "," + strconv.FormatFloat(r.e2eLoss, 'f', -1, 64) +
			"," + r.e2eDuration.String()
	}
	return c
}

// baseCmdline is the part of the kernel command line every VM gets: the
// console, the clock source and the guest's time limit (tctimeout=).
func baseCmdline(guestTimeout time.Duration) string {
	return "console=ttyS0 quiet loglevel=3 panic=-1 clocksource=tsc tsc=reliable tctimeout=" + strconv.Itoa(int(guestTimeout.Seconds())) + "s"
}

func readTrim(f string) string {
	b, _ := os.ReadFile(f)
	return strings.TrimSpace(string(b))
}

func tail(f string) {
	b, _ := os.ReadFile(f)
	lines := strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n")
	fmt.Println("--- console (last 30 lines)")
	fmt.Println(strings.Join(lines[max(0, len(lines)-30):], "\n"))
}

// event is one line of go test -json (test2json) output.
type event struct {
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

// check parses the guest's report and applies every rule.
func (r *runner) check(results string) error {
	g, err := r.readReport(results)
	if err != nil {
		return err
	}
	problems := g.problems
	if !g.done {
		problems = append(problems, "the guest did not finish (no @done in its report)")
	}
	if !g.removalRan && r.hasRemoval() {
		problems = append(problems, "the device removal reproducer did not run (no @removalrc)")
	}
	var sent int64
	for _, s := range r.suites {
		problems = append(problems, r.checkSuite(s)...)
		if s.started && s.sent >= 0 {
			sent += s.sent
		}
	}
	for _, s := range r.suites {
		if len(s.bench) > 0 {
			fmt.Printf("\n%s results:\n", s.name)
			for _, l := range s.bench {
				fmt.Printf("  %s\n", l)
			}
		}
	}
	problems = append(problems, checkTestCounters(g.counters, sent)...)
	problems = append(problems, g.list.check()...)
	if r.e2e {
		problems = append(problems, r.checkE2E(g.e2e, g.counters, sent)...)
		problems = append(problems, g.list.checkLogs()...)
	}
	if r.faults {
		problems = append(problems, r.checkFaults(g.faults)...)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("%d problem(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}

// guestReport is what the guest's report says besides the test binaries'
// results, which go to their suites.
type guestReport struct {
	byName   map[string]*suite
	cur      *suite // the suite whose go test -json lines follow, if any
	counters map[string][2]int64
	netdev   map[string][]int64 // two hosts: eth0's counts (@netdev)
	e2e      *e2eReport
	faults   *faultsReport
	list     *listDevices // the commands' --list-devices
	problems []string     // the guest's own @error lines
	done     bool         // the report ends with @done
	// removalRan: the device removal reproducer ran (@removalrc).
	removalRan bool
}

// readReport reads the guest's report file, recording each test event in
// its suite and printing the guest's @clocksource and @probe lines.
func (r *runner) readReport(results string) (*guestReport, error) {
	f, err := os.Open(results)
	if err != nil {
		return nil, fmt.Errorf("no report from the guest: %v", err)
	}
	defer f.Close()
	g := &guestReport{byName: map[string]*suite{}, counters: map[string][2]int64{}, netdev: map[string][]int64{},
		e2e: newE2EReport(), faults: newFaultsReport(), list: newListDevices()}
	for _, s := range r.suites {
		g.byName[s.name] = s
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "@") {
			g.directive(line)
			continue
		}
		if g.cur == nil || !strings.HasPrefix(line, "{") {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			continue
		}
		g.cur.record(ev)
	}
	return g, nil
}

// directive records one @ line of the guest's report.
func (g *guestReport) directive(line string) {
	fields := strings.Fields(line)
	switch fields[0] {
	case "@counters":
		if len(fields) == 4 {
			a, _ := strconv.ParseInt(fields[2], 10, 64)
			b, _ := strconv.ParseInt(fields[3], 10, 64)
			g.counters[fields[1]] = [2]int64{a, b}
		}
	case "@netdev":
		if len(fields) == 8 {
			v := make([]int64, 6)
			for i := range v {
				v[i], _ = strconv.ParseInt(fields[2+i], 10, 64)
			}
			g.netdev[fields[1]] = v
		}
	case "@suite":
		g.cur = g.byName[fields[1]]
		if g.cur != nil {
			g.cur.started = true
		}
	case "@exit", "@sent":
		if s := g.byName[fields[1]]; s != nil && len(fields) == 3 {
			n, _ := strconv.ParseInt(fields[2], 10, 64)
			if fields[0] == "@exit" {
				s.exit = int(n)
			} else {
				s.sent = n
			}
		}
		g.cur = nil
	case "@e2e", "@summary", "@log":
		g.e2e.add(line)
	case "@fstep", "@frc", "@fsummary", "@flog", "@ftail":
		g.faults.add(line)
	case "@listdevices", "@listout", "@rdmadev":
		g.list.add(line)
	case "@e2etime":
		if len(fields) == 4 {
			g.e2e.t0, _ = strconv.Atoi(fields[1])
			g.e2e.t1, _ = strconv.Atoi(fields[2])
			g.e2e.budget, _ = strconv.Atoi(fields[3])
		}
	case "@removal":
		fmt.Printf("guest removal: %s\n", strings.TrimPrefix(line, "@removal "))
	case "@removalrc":
		g.removalRan = true
		if len(fields) == 2 && fields[1] != "0" {
			g.problems = append(g.problems, "device removal reproducer exited "+fields[1]+" (its @removal lines above say why)")
		}
	case "@error":
		g.problems = append(g.problems, "guest: "+strings.TrimPrefix(line, "@error "))
	case "@done":
		g.done = true
	case "@clocksource":
		fmt.Printf("guest clock source: %s\n", strings.Join(fields[1:], " "))
	case "@probe":
		printProbe(fields[1:])
	}
}

// checkSuite prints one test binary's results and returns its problems: it
// did not run, exited non-zero, did not say how many datagrams it sent, or
// a test did not pass.
func (r *runner) checkSuite(s *suite) []string {
	var problems []string
	fmt.Printf("\n=== %s (%s): exit %d, %d datagrams sent\n", s.name, s.pkg, s.exit, s.sent)
	if !s.started {
		return []string{s.name + ": did not run"}
	}
	if s.exit != 0 {
		problems = append(problems, fmt.Sprintf("%s: test binary exited %d", s.name, s.exit))
	}
	if s.sent < 0 {
		problems = append(problems, s.name+": no datagram count (TICKCAST_RDMA_SENT_FILE not written)")
	}
	expected := map[string]bool{}
	for _, t := range s.expected {
		expected[t] = true
		if a := s.results[t]; a != "pass" {
			if a == "" {
				a = "missing (did not run)"
			}
			problems = append(problems, fmt.Sprintf("%s: %s: %s", s.name, t, a))
		}
	}
	for _, t := range s.order {
		a := s.results[t]
		fmt.Printf("  %-4s %-40s %6.2fs\n", strings.ToUpper(a), t, s.elapsed[t])
		if a == "skip" || a == "fail" {
			if !expected[t] { // subtests; top-level ones are reported above
				problems = append(problems, fmt.Sprintf("%s: %s: %s", s.name, t, a))
			}
		}
		if (r.verbose || a != "pass") && s.output[t] != nil {
			for _, l := range strings.Split(strings.TrimRight(s.output[t].String(), "\n"), "\n") {
				if !strings.HasPrefix(l, "=== ") {
					fmt.Printf("         | %s\n", l)
				}
			}
		}
	}
	return problems
}

// checkTestCounters prints rxe0's counters over the test binaries and
// returns their problems: each counter must have risen by at least the
// datagrams the tests say they sent.
func checkTestCounters(counters map[string][2]int64, sent int64) []string {
	before, okb := counters["before"]
	after, oka := counters["after"]
	if !okb || !oka {
		return []string{"rxe0 hw_counters not reported before and after the tests"}
	}
	var problems []string
	ds, dr := after[0]-before[0], after[1]-before[1]
	fmt.Printf("\nrxe0 hw_counters: sent_pkts %d -> %d (+%d), rcvd_pkts %d -> %d (+%d); tests sent %d datagrams\n",
		before[0], after[0], ds, before[1], after[1], dr, sent)
	if sent <= 0 {
		problems = append(problems, "the tests report no datagrams sent")
	}
	if ds < sent {
		problems = append(problems, fmt.Sprintf("rxe0 sent_pkts rose by %d, less than the %d datagrams sent", ds, sent))
	}
	if dr < sent {
		problems = append(problems, fmt.Sprintf("rxe0 rcvd_pkts rose by %d, less than the %d datagrams sent", dr, sent))
	}
	return problems
}

func (s *suite) record(ev event) {
	if ev.Test == "" {
		return
	}
	switch ev.Action {
	case "run":
		if _, ok := s.results[ev.Test]; !ok {
			s.order = append(s.order, ev.Test)
			s.results[ev.Test] = "run"
		}
	case "pass", "fail", "skip":
		if _, ok := s.results[ev.Test]; !ok {
			s.order = append(s.order, ev.Test)
		}
		s.results[ev.Test] = ev.Action
		s.elapsed[ev.Test] = ev.Elapsed
	case "output":
		if l, ok := strings.CutPrefix(ev.Output, "@bench "); ok {
			s.bench = append(s.bench, strings.TrimRight(l, "\n"))
		}
		b := s.output[ev.Test]
		if b == nil {
			b = new(bytes.Buffer)
			s.output[ev.Test] = b
		}
		b.WriteString(ev.Output)
	}
}

// printProbe prints one @probe line: NAME U0 S0 U1 S1 and the summaries.
func printProbe(f []string) {
	if len(f) < 5 {
		fmt.Printf("probe: malformed report %q\n", strings.Join(f, " "))
		return
	}
	tick := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v / 100 } // USER_HZ
	user, sys := tick(f[3])-tick(f[1]), tick(f[4])-tick(f[2])
	var fh struct {
		Messages  uint64  `json:"messages"`
		Packets   uint64  `json:"packets"`
		ElapsedS  float64 `json:"elapsed_s"`
		MsgsPerS  float64 `json:"msgs_per_s"`
		LiveSkip  uint64  `json:"live_skipped"`
		LivePub   uint64  `json:"live_published"`
		Interrupt bool    `json:"interrupted"`
	}
	rest := strings.Join(f[5:], " ")
	dec := json.NewDecoder(strings.NewReader(rest))
	if err := dec.Decode(&fh); err != nil {
		fmt.Printf("probe %s: no summary (%v): %s\n", f[0], err, rest)
		return
	}
	perMsg := 0.0
	if fh.Messages > 0 {
		perMsg = (user + sys) / float64(fh.Messages) * 1e6
	}
	fmt.Printf("probe %-22s %8d messages in %6d packets, %6.1fs: %7.0f msg/s; CPU of the processes %.1fs user + %.1fs system = %.0f us/message; live NATS published %d, skipped %d\n",
		f[0], fh.Messages, fh.Packets, fh.ElapsedS, fh.MsgsPerS, user, sys, perMsg, fh.LivePub, fh.LiveSkip)
	var sub struct {
		Received uint64  `json:"received"`
		MsgsPerS float64 `json:"msgs_per_s"`
		Reason   string  `json:"exit_reason"`
	}
	if dec.Decode(&sub) == nil && sub.Received > 0 {
		fmt.Printf("probe %-22s subscriber received %d (%s)\n", f[0], sub.Received, sub.Reason)
	}
}

// hasRemoval reports whether the ud/rdma suite, which carries the device
// removal reproducer, is among the suites.
func (r *runner) hasRemoval() bool {
	for _, s := range r.suites {
		if s.name == "ud_rdma" {
			return true
		}
	}
	return false
}
