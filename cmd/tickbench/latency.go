package main

// The latency mode: every peer at every paced rate, in interleaved rounds,
// each peer a sender process and a receiver process (plus a server for
// NATS), all paced by package pace, the feed handler's pacer. See
// docs/bench.md.

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Peer names.
const (
	peerFloorBlocking = "floor-blocking"
	peerFloorBusy     = "floor-busy-poll"
	peerNATS          = "nats"
	tickcastPrefix    = "tickcast-"
	baselinePrefix    = "baseline-"
	// externalInfix follows the prefix in the name of a tickcast or
	// baseline peer that runs against a nats-server process of its own
	// (--nats-url) instead of the feed handler's embedded server:
	// tickcast-ext-MODE, baseline-ext-MODE.
	externalInfix = "ext-"
)

// Receive classes: a tickcast mode is compared with the floor of its class.
const (
	classBlocking = "blocking"
	classBusy     = "busy"
)

// probeLimitUs is the floor p50 the rate search holds to.
const probeLimitUs = 100

// latSettings are the latency mode's flags.
type latSettings struct {
	rates       []float64
	searchRates []float64 // empty: no search
	rounds      int
	modes       []string // empty: detect from subscriber --help
	channels    []int
	duration    time.Duration // per run at each rate: count = rate × duration
	probeDur    time.Duration // per search probe
	count       uint64        // fixed count per run, overriding duration (quick)
	outdir      string
	timeout     time.Duration
	pingpong    bool
	ppCount     uint64
	sockperf    string // path; empty: none
	fanout      bool
	fanCount    uint64
	fanSubs     []int
	shmSubs     []int // local subscriber counts of the shm deployment
	quick       bool
	baseline    string   // git revision whose programs also run, as baseline-MODE peers; empty: none
	deploys     []string // deployEmbedded, deployExternal: the NATS server the tickcast peers use
	floors      []string // the floor's receive modes: blocking, busy-poll
	liveSub     bool     // tickcast peers: also a subscriber on the live NATS subjects
	tail        bool     // the --tail preset
}

// procCPU is one process's CPU time (user + system, from its rusage).
type procCPU struct {
	Name     string  `json:"name"`
	CPUS     float64 `json:"cpu_s"`
	UsPerMsg float64 `json:"cpu_us_per_msg"` // per message delivered
}

// latRun is one peer at one rate in one round.
type latRun struct {
	Round     int     `json:"round"`
	Channels  int     `json:"channels"`
	Rate      float64 `json:"rate"`
	Probe     bool    `json:"probe,omitempty"` // a rate-search probe (floor peers only)
	Peer      string  `json:"peer"`
	Class     string  `json:"class"`
	Sent      uint64  `json:"sent"`
	Delivered uint64  `json:"delivered"`
	Lost      uint64  `json:"lost"`
	// Achieved is delivered messages per second from the first send to the
	// last receipt: below Rate when the sender could not keep the pace.
	Achieved float64   `json:"achieved_rate"`
	Lat      latStats  `json:"latency"`                // send stamp to receipt (floor, NATS) or release (tickcast)
	Tick     *latStats `json:"tick_latency,omitempty"` // tickcast: feed handler's receipt of the tick to release
	// First and Steady split Lat by receipt (release) time: the first
	// second from the first message received, and the rest of the run.
	// Both nil when the receiver does not report them (an older
	// subscriber of --baseline).
	First  *latStats `json:"first_second,omitempty"`
	Steady *latStats `json:"steady,omitempty"`
	// Deploy is the NATS server of a tickcast run: embedded (the feed
	// handler's) or external (a nats-server process).
	Deploy string `json:"deploy,omitempty"`
	// Live is the live NATS subscriber's outcome (--live-sub).
	Live      *liveRun  `json:"live_sub,omitempty"`
	LateP99Us float64   `json:"send_late_p99_us"` // how late the sender's sends were against the pacer
	Procs     []procCPU `json:"procs"`
	Hgrm      string    `json:"hgrm,omitempty"`
	Err       string    `json:"error,omitempty"`
}

// latEnv is what every run needs.
type latEnv struct {
	exe         []string // this program, for the roles
	feedhandler string
	subscriber  string
	prefix      string // peer name prefix of the tickcast runs: tickcastPrefix or baselinePrefix
	external    bool   // tickcast runs: a nats-server process of their own, not the embedded server
	shm         bool   // tickcast runs: through the feed handler's shared-memory rings (deploySHM)
	noSHM       bool   // the programs have no shared-memory transport (a baseline from before it)
	localSubs   int    // shm: subscribers reading the rings (the first one measured); 0 is 1
	liveSub     bool   // tickcast runs: a live NATS subscriber too
	size        int    // payload bytes: tickcast's one-message packet
	outdir      string
	timeout     time.Duration
}

// deploy names the deployment of env's tickcast runs.
func (env latEnv) deploy() string {
	switch {
	case env.external:
		return deployExternal
	case env.shm:
		return deploySHM
	}
	return deployEmbedded
}

// checkOthers reads the summaries of the local subscribers that were not
// measured (--shm-subs) and fails unless each received every message.
func checkOthers(others []*proc, messages uint64) error {
	for i, p := range others {
		var ss subLatSummary
		if _, err := p.summary(&ss); err != nil {
			return err
		}
		if ss.Received != messages {
			return fmt.Errorf("local subscriber %d of %d received %d of %d messages", i+2, len(others)+1, ss.Received, messages)
		}
	}
	return nil
}

// peer is the name of env's tickcast peer in mode.
func (env latEnv) peer(mode string) string {
	if env.shm && env.localSubs > 1 {
		return env.prefix + "shm" + strconv.Itoa(env.localSubs) + "-" + mode
	}
	return tickcastPeer(env.prefix, env.deploy(), mode)
}

// withoutFlag returns args without flag and its value.
func withoutFlag(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// withSHM points a run's feed handler and subscribers at shared-memory
// rings of the run's own: it makes their directory, which the caller
// removes after the run, and adds the flags to both argument lists.
func withSHM(subArgs, fhArgs *[]string) (dir string, err error) {
	if dir, err = os.MkdirTemp(shmBenchDir(), "tickbench-shm-"); err != nil {
		return "", err
	}
	*subArgs = append(*subArgs, "--transport", "shm", "--shm-dir", dir)
	*fhArgs = append(*fhArgs, "--shm", "--shm-dir", dir)
	return dir, nil
}

// shmBenchDir is where the shm deployment's rings go: the host's tmpfs,
// or the temporary directory without one.
func shmBenchDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// runArgs are one run's parameters.
type runArgs struct {
	round, channels int
	rate            float64
	count           uint64
	probe           bool
}

func (a runArgs) hgrm(env latEnv, peer string) string {
	if env.outdir == "" {
		return ""
	}
	return filepath.Join(env.outdir, "hgrm", fmt.Sprintf("c%d_%s_%s_round%d.hgrm", a.channels, rateName(a.rate), peer, a.round))
}

// rateName is a short name of a rate: 2k, 100k, 1.5M.
func rateName(r float64) string {
	switch {
	case r == 0:
		return "max"
	case r >= 1e6:
		return strconv.FormatFloat(r/1e6, 'f', -1, 64) + "M"
	case r >= 1e3:
		return strconv.FormatFloat(r/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// classOf is the receive class of a tickcast mode: a mode that spins is
// compared with the busy-poll floor, the others with the blocking floor.
// modeSpinWait is tickbench's name for the subscriber in mode direct with
// --spin-wait (tickbench --spin-wait): spin, then wait.
const modeSpinWait = "direct-spinwait"

// spinWait is the subscriber's --spin-wait in mode direct-spinwait.
var spinWait = 20 * time.Microsecond

func classOf(mode string) string {
	if mode == modeSpinWait {
		return classBlocking // it spins a while, then sleeps
	}
	if strings.Contains(mode, "busy") || strings.Contains(mode, "spin") {
		return classBusy
	}
	return classBlocking
}

// detectModes reads the subscriber's --help and returns the receive modes
// it lists, from the wanted ones (all known ones when want is empty), and a
// note for each wanted mode it does not list.
func detectModes(ctx context.Context, subscriber string, want []string) (modes, notes []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, subscriber, "--help").CombinedOutput()
	help := modeHelp(string(out))
	if help == "" {
		return nil, nil, fmt.Errorf("subscriber --help shows no --mode setting:\n%s", out)
	}
	auto := len(want) == 0
	if auto {
		want = []string{"blocking", "busy-poll", "direct", "direct-spin"}
	}
	for _, m := range want {
		if m == modeSpinWait {
			if regexp.MustCompile(`(?m)^\s*--spin-wait\b`).Match(out) {
				modes = append(modes, m)
			} else {
				notes = append(notes, fmt.Sprintf("mode %s skipped: subscriber --help has no --spin-wait", m))
			}
			continue
		}
		if regexp.MustCompile(`(^|[^a-z-])` + regexp.QuoteMeta(m) + `($|[^a-z-])`).MatchString(help) {
			modes = append(modes, m)
		} else if !auto || !strings.HasPrefix(m, "direct") {
			notes = append(notes, fmt.Sprintf("mode %s skipped: subscriber --help does not list it", m))
		} else {
			notes = append(notes, fmt.Sprintf("mode %s not measured: this subscriber does not have it yet", m))
		}
	}
	return modes, notes, nil
}

// hasFlag reports whether program --help lists flag.
func hasFlag(ctx context.Context, program, flag string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, program, "--help").CombinedOutput()
	return regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(flag) + `\b`).Match(out)
}

// modeHelp returns the help text of the --mode setting in a usage text.
func modeHelp(usage string) string {
	lines := strings.Split(usage, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "--mode ") {
			var b strings.Builder
			for _, m := range lines[i+1:] {
				t := strings.TrimSpace(m)
				if strings.HasPrefix(t, "--") || strings.HasPrefix(t, "env ") || t == "" {
					break
				}
				b.WriteString(t + " ")
			}
			return b.String()
		}
	}
	return ""
}

// cpuOf returns a process's CPU time per message delivered.
func cpuOf(name string, p *proc, delivered uint64) procCPU {
	c := procCPU{Name: name, CPUS: p.cpuSeconds()}
	if delivered > 0 {
		c.UsPerMsg = 1e6 * c.CPUS / float64(delivered)
	}
	return c
}

// finish fills the counts every run has.
func (r *latRun) finish(sent, delivered uint64, startNs, lastNs int64) {
	r.Sent, r.Delivered = sent, delivered
	if delivered < sent {
		r.Lost = sent - delivered
	}
	if w := time.Duration(lastNs - startNs).Seconds(); w > 0 && delivered > 1 {
		r.Achieved = float64(delivered) / w
	}
}

// runFloorLat runs the raw floor: a lat-recv in mode and a paced lat-send.
func runFloorLat(ctx context.Context, env latEnv, mode string, a runArgs) latRun {
	peer := peerFloorBlocking
	class := classBlocking
	if mode == "busy-poll" {
		peer, class = peerFloorBusy, classBusy
	}
	r := latRun{Round: a.round, Channels: a.channels, Rate: a.rate, Probe: a.probe, Peer: peer, Class: class, Hgrm: a.hgrm(env, peer)}
	err := func() error {
		group, port, err := freshGroup(79, a.channels)
		if err != nil {
			return err
		}
		common := []string{"--group", group.String(), "--port", strconv.Itoa(port), "--size", strconv.Itoa(env.size),
			"--channels", strconv.Itoa(a.channels)}
		recv, err := startReady(ctx, "lat-recv", env.timeout, env.exe, append([]string{"--role", "lat-recv", "--mode", mode,
			"--expect", strconv.FormatUint(a.count, 10), "--hgrm", r.Hgrm}, common...), "lat-recv: ready", 5*time.Second)
		if err != nil {
			return err
		}
		defer recv.kill()
		var sr latSendReport
		send, _, err := runToEnd(ctx, "lat-send", env.timeout, env.exe, append([]string{"--role", "lat-send",
			"--rate", fmtRate(a.rate), "--count", strconv.FormatUint(a.count, 10)}, common...), &sr)
		if err != nil {
			return err
		}
		var rr latRecvReport
		if _, err := recv.summary(&rr); err != nil {
			return err
		}
		r.finish(sr.Sent, rr.Received, sr.StartNs, rr.LastNs)
		r.Lat, r.LateP99Us = rr.latStats, sr.LateP99Us
		r.First, r.Steady = &rr.First, &rr.Steady
		r.Procs = []procCPU{cpuOf("send", send, rr.Received), cpuOf("recv", recv, rr.Received)}
		return nil
	}()
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// fmtRate formats a rate for a flag.
func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// startNATSServer starts the nats-server role and returns it and its URL.
func startNATSServer(ctx context.Context, env latEnv) (*proc, string, error) {
	srv, err := startProc(ctx, "nats-server", env.timeout, env.exe,
		[]string{"--role", "nats-server", "--max-life", env.timeout.String()}, natsReadyMark)
	if err != nil {
		return nil, "", err
	}
	if err := srv.waitReady(10 * time.Second); err != nil {
		srv.kill()
		return nil, "", err
	}
	return srv, srv.readyText(natsReadyMark), nil
}

// stopServer ends a server role and waits for it.
func stopServer(p *proc) {
	p.terminate()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	p.kill()
}

// runNATSLat runs NATS core: a server, a nats-sub on one subject per
// channel (a wildcard), and a paced nats-pub sending round robin over them.
func runNATSLat(ctx context.Context, env latEnv, a runArgs) latRun {
	r := latRun{Round: a.round, Channels: a.channels, Rate: a.rate, Peer: peerNATS, Class: classBlocking, Hgrm: a.hgrm(env, peerNATS)}
	err := func() error {
		srv, url, err := startNATSServer(ctx, env)
		if err != nil {
			return err
		}
		defer srv.kill()
		sub, err := startReady(ctx, "nats-sub", env.timeout, env.exe, []string{"--role", "nats-sub", "--url", url,
			"--subject", "tickbench.lat.*", "--size", strconv.Itoa(env.size), "--expect", strconv.FormatUint(a.count, 10),
			"--hgrm", r.Hgrm}, "nats-sub: ready", 10*time.Second)
		if err != nil {
			return err
		}
		defer sub.kill()
		var sr latSendReport
		pub, _, err := runToEnd(ctx, "nats-pub", env.timeout, env.exe, []string{"--role", "nats-pub", "--url", url,
			"--subject", "tickbench.lat", "--channels", strconv.Itoa(a.channels), "--size", strconv.Itoa(env.size),
			"--rate", fmtRate(a.rate), "--count", strconv.FormatUint(a.count, 10)}, &sr)
		if err != nil {
			return err
		}
		var rr latRecvReport
		if _, err := sub.summary(&rr); err != nil {
			return err
		}
		stopServer(srv)
		r.finish(sr.Sent, rr.Received, sr.StartNs, rr.LastNs)
		r.Lat, r.LateP99Us = rr.latStats, sr.LateP99Us
		r.First, r.Steady = &rr.First, &rr.Steady
		r.Procs = []procCPU{cpuOf("server", srv, rr.Received), cpuOf("pub", pub, rr.Received), cpuOf("sub", sub, rr.Received)}
		return nil
	}()
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// subLatSummary is the part of the subscriber's summary the latency mode
// reads.
type subLatSummary struct {
	Received    uint64 `json:"received"`
	Missing     uint64 `json:"missing"`
	KernelDrops uint64 `json:"kernel_drops"`
	ExitReason  string `json:"exit_reason"`
	latStats
	TickCount  int64   `json:"tick_latency_count"`
	TickP50Us  float64 `json:"tick_latency_p50_us"`
	TickP90Us  float64 `json:"tick_latency_p90_us"`
	TickP99Us  float64 `json:"tick_latency_p99_us"`
	TickP999Us float64 `json:"tick_latency_p999_us"`
	TickMaxUs  float64 `json:"tick_latency_max_us"`
	subSplit
}

// tickcastLatArgs returns the subscriber's and the feed handler's
// arguments for one run on group g, with NATS as ns says.
func tickcastLatArgs(g, mode string, channels int, rate float64, count uint64, hgrm string, ns natsSide) (sub, fh []string) {
	ch, n := strconv.Itoa(channels), strconv.FormatUint(count, 10)
	var spin []string
	if mode == modeSpinWait {
		mode, spin = "direct", []string{"--spin-wait", spinWait.String()}
	}
	sub = []string{"--group", g, "--iface", "127.0.0.1", "--channels", ch, "--expect", n, "--mode", mode, "--cpu", "-1",
		"--idle-timeout", subIdleTimeout.String(), "--format", "none", "--log-format", "json", "--log-level", "info"}
	sub = append(sub, spin...)
	sub = append(sub, ns.subArgs()...)
	if hgrm != "" {
		sub = append(sub, "--latency-out", hgrm)
	}
	fh = []string{"--group", g, "--iface", "127.0.0.1", "--ttl", "0", "--channels", ch, "--count", n, "--rate", fmtRate(rate),
		"--seed", strconv.Itoa(feedSeed), "--instruments", strconv.Itoa(feedInstruments), "--log-format", "json", "--log-level", "warn"}
	fh = append(fh, ns.fhArgs()...)
	return sub, fh
}

// runTickcastLat runs the real feed handler at the rate and one real
// subscriber in mode, with the feed handler's embedded NATS server or, for
// env.external, a nats-server process of the run's own; with env.liveSub
// also a subscriber on the live NATS subjects.
func runTickcastLat(ctx context.Context, env latEnv, mode string, a runArgs) latRun {
	peer := env.peer(mode)
	r := latRun{Round: a.round, Channels: a.channels, Rate: a.rate, Peer: peer, Class: classOf(mode), Hgrm: a.hgrm(env, peer),
		Deploy: deployEmbedded}
	r.Deploy = env.deploy()
	if env.prefix == baselinePrefix {
		r.Hgrm = "" // an older subscriber may not write histograms
	}
	err := func() error {
		group, port, err := freshGroup(77, a.channels)
		if err != nil {
			return err
		}
		var ns natsSide
		if env.external {
			srv, url, err := startNATSServer(ctx, env)
			if err != nil {
				return err
			}
			defer stopServer(srv)
			ns.url = url
		} else {
			// The embedded server on a port known in advance: the
			// subscriber (and the live subscriber) start first and
			// connect once the feed handler's server listens, as with
			// the demo.
			if ns.listen, err = freeTCPAddr(); err != nil {
				return err
			}
			ns.live = env.liveSub
		}
		var live *proc
		if env.liveSub {
			if live, err = startLiveSub(ctx, env, a, ns); err != nil {
				return err
			}
			defer live.kill()
		}
		subArgs, fhArgs := tickcastLatArgs(fmt.Sprintf("%s:%d", group, port), mode, a.channels, a.rate, a.count, r.Hgrm, ns)
		if env.shm {
			dir, err := withSHM(&subArgs, &fhArgs)
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
		}
		sub, err := startReady(ctx, "subscriber", env.timeout, []string{env.subscriber}, subArgs, `"message":"subscribed"`, 10*time.Second)
		if err != nil {
			return err
		}
		defer sub.kill()
		// More local subscribers on the same rings, not measured.
		others, err := startReceivers(ctx, env, env.localSubs-1, "local subscriber", []string{env.subscriber},
			withoutFlag(subArgs, "--latency-out"), `"message":"subscribed"`)
		defer killAll(others)
		if err != nil {
			return err
		}
		var fs fhSummary
		fh, _, err := runToEnd(ctx, "feedhandler", env.timeout, []string{env.feedhandler}, fhArgs, &fs)
		if err != nil {
			return err
		}
		if err := checkOthers(others, fs.Messages); err != nil {
			return err
		}
		var ss subLatSummary
		if _, err := sub.summary(&ss); err != nil {
			return err
		}
		r.finish(fs.Messages, ss.Received, 0, 0)
		if fs.ElapsedS > 0 {
			r.Achieved = float64(fs.Messages) / fs.ElapsedS
		}
		r.Lat = ss.latStats
		r.First, r.Steady = ss.subSplit.stats()
		if ss.TickCount > 0 {
			r.Tick = &latStats{Count: ss.TickCount, P50Us: ss.TickP50Us, P90Us: ss.TickP90Us, P99Us: ss.TickP99Us,
				P999Us: ss.TickP999Us, MaxUs: ss.TickMaxUs}
		}
		r.Procs = []procCPU{cpuOf("feedhandler", fh, ss.Received), cpuOf("subscriber", sub, ss.Received)}
		if live != nil {
			r.Live = finishLiveSub(live, fs.Messages)
			r.Procs = append(r.Procs, cpuOf("live-sub", live, ss.Received))
		}
		if fs.Messages != a.count || fs.Interrupted {
			return fh.failure(fmt.Sprintf("published %d of %d messages (interrupted %v)", fs.Messages, a.count, fs.Interrupted))
		}
		return nil
	}()
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// countFor is the message count of a run at rate.
func (s *latSettings) countFor(rate float64, probe bool) uint64 {
	if s.count > 0 {
		return s.count
	}
	d := s.duration
	if probe {
		d = s.probeDur
	}
	return uint64(max(1000, math.Round(rate*d.Seconds())))
}

// runLatency runs the latency mode and returns its result.
func runLatency(ctx context.Context, s latSettings, progress io.Writer) (*latResult, error) {
	exe, dir, fhBin, subBin, err := prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := newLatResult(s)
	env, err := setupLatency(ctx, s, res, exe, fhBin, subBin, progress)
	if err != nil {
		return nil, err
	}
	baseEnv, baseModes := env, []string(nil)
	if s.baseline != "" {
		if baseEnv, baseModes, err = setupBaseline(ctx, s, env, dir, progress); err != nil {
			return nil, err
		}
		res.Baseline = s.baseline
	}
	peers := latPeers(ctx, s, env, res.Modes, baseEnv, baseModes)
	for round := 1; round <= s.rounds; round++ {
		if err := runLatRound(ctx, s, env, peers, round, res, progress); err != nil {
			return nil, err
		}
	}
	res.Notes = append(res.Notes, splitNotes(res.Runs)...)
	res.summarize()
	if s.outdir != "" {
		plots, err := writePlots(res, s.outdir)
		if err != nil {
			return nil, err
		}
		res.Plots = plots
	}
	return res, nil
}

// setupLatency finds the subscriber's receive modes and the payload size
// into res, makes the histogram directory, and returns what every run
// needs.
func setupLatency(ctx context.Context, s latSettings, res *latResult, exe, fhBin, subBin string, progress io.Writer) (latEnv, error) {
	var err error
	res.Modes, res.Notes, err = detectModes(ctx, subBin, s.modes)
	if err != nil {
		return latEnv{}, err
	}
	for _, n := range res.Notes {
		fmt.Fprintf(progress, "tickbench: note: %s\n", n)
	}
	msgBytes, err := meanMsgBytes(1, 200_000)
	if err != nil {
		return latEnv{}, err
	}
	// One message per packet at these rates: the MoldUDP64 header and one
	// block of the feed's mean message.
	res.Size = int(math.Round(20 + msgBytes))
	if s.outdir != "" {
		if err := os.MkdirAll(filepath.Join(s.outdir, "hgrm"), 0o755); err != nil {
			return latEnv{}, err
		}
	}
	return latEnv{exe: []string{exe}, feedhandler: fhBin, subscriber: subBin, prefix: tickcastPrefix, size: res.Size, outdir: s.outdir,
		timeout: s.timeout, liveSub: s.liveSub}, nil
}

// setupBaseline builds the feed handler and subscriber at the --baseline
// revision in dir and returns their environment and receive modes.
func setupBaseline(ctx context.Context, s latSettings, env latEnv, dir string, progress io.Writer) (latEnv, []string, error) {
	fmt.Fprintf(progress, "tickbench: building feedhandler and subscriber at %s (baseline)\n", s.baseline)
	var err error
	baseEnv := env
	if baseEnv.feedhandler, baseEnv.subscriber, err = buildAt(ctx, s.baseline, filepath.Join(dir, "baseline")); err != nil {
		return latEnv{}, nil, err
	}
	baseEnv.prefix = baselinePrefix
	modes, notes, err := detectModes(ctx, baseEnv.subscriber, s.modes)
	if err != nil {
		return latEnv{}, nil, err
	}
	if slices.Contains(s.deploys, deploySHM) && !hasFlag(ctx, baseEnv.subscriber, "--shm-dir") {
		baseEnv.noSHM = true
		notes = append(notes, "deployment shm skipped: subscriber --help has no --shm-dir")
	}
	for _, n := range notes {
		fmt.Fprintf(progress, "tickbench: note: baseline: %s\n", n)
	}
	return baseEnv, modes, nil
}

// latPeer is one peer of the latency mode and how to run it.
type latPeer struct {
	name string
	run  func(a runArgs) latRun
}

// latPeers returns the peers in their first round's order: the floors
// (first, as the rate search runs those), tickcast in each mode and
// deployment, the baseline in each of its modes and each deployment, NATS.
func latPeers(ctx context.Context, s latSettings, env latEnv, modes []string, baseEnv latEnv, baseModes []string) []latPeer {
	var peers []latPeer
	for _, m := range s.floors {
		peers = append(peers, latPeer{"floor " + m, func(a runArgs) latRun { return runFloorLat(ctx, env, m, a) }})
	}
	tickcast := func(env latEnv, modes []string) {
		for _, d := range s.deploys {
			e := env
			e.external, e.shm = d == deployExternal, d == deploySHM
			if e.shm && e.noSHM {
				continue
			}
			subs := []int{1}
			if e.shm && len(s.shmSubs) > 0 {
				subs = s.shmSubs
			}
			for _, k := range subs {
				ek := e // each count's peers keep their own
				ek.localSubs = k
				for _, m := range modes {
					peers = append(peers, latPeer{ek.peer(m), func(a runArgs) latRun { return runTickcastLat(ctx, ek, m, a) }})
				}
			}
		}
	}
	tickcast(env, modes)
	tickcast(baseEnv, baseModes)
	return append(peers, latPeer{"nats", func(a runArgs) latRun { return runNATSLat(ctx, env, a) }})
}

// runLatRound runs one round: every peer at every rate on each channel
// count, the floors' rate search, the ping-pongs and the fan-out ramp.
func runLatRound(ctx context.Context, s latSettings, env latEnv, peers []latPeer, round int, res *latResult, progress io.Writer) error {
	for _, ch := range s.channels {
		if err := runLatRates(ctx, s, peers, round, ch, res, progress); err != nil {
			return err
		}
		if len(s.searchRates) > 0 {
			if err := runRateSearch(ctx, s, peers[:len(s.floors)], round, ch, res, progress); err != nil {
				return err
			}
		}
	}
	if s.pingpong {
		fmt.Fprintf(progress, "tickbench: round %d/%d, ping-pong:", round, s.rounds)
		for _, pr := range runPingPong(ctx, env, s, round) {
			fmt.Fprintf(progress, " %s p50 %.1f µs", pr.Transport, pr.RTT.P50Us)
			if pr.Err != "" {
				fmt.Fprintf(progress, " (error)")
			}
			res.PingPong = append(res.PingPong, pr)
		}
		fmt.Fprintln(progress)
	}
	if s.fanout {
		fmt.Fprintf(progress, "tickbench: round %d/%d, fan-out:", round, s.rounds)
		for _, k := range s.fanSubs {
			for _, fr := range runFanout(ctx, env, s, round, k) {
				fmt.Fprintf(progress, " %s×%d %s/s", fr.Peer, fr.Subs, thousands(fr.PerSubMedian))
				res.Fanout = append(res.Fanout, fr)
			}
		}
		fmt.Fprintln(progress)
	}
	return nil
}

// runLatRates runs every peer at every paced rate on ch channels.
func runLatRates(ctx context.Context, s latSettings, peers []latPeer, round, ch int, res *latResult, progress io.Writer) error {
	for _, rate := range s.rates {
		fmt.Fprintf(progress, "tickbench: round %d/%d, %d channel(s), %s msg/s:", round, s.rounds, ch, rateName(rate))
		a := runArgs{round: round, channels: ch, rate: rate, count: s.countFor(rate, false)}
		// The order of the peers turns each round, so that none is
		// always first after a pause or last in a busy stretch.
		for i := range peers {
			p := peers[(i+round-1)%len(peers)]
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r := p.run(a)
			fmt.Fprintf(progress, " %s", shortRun(r))
			res.Runs = append(res.Runs, r)
		}
		fmt.Fprintln(progress)
	}
	return nil
}

// runRateSearch runs the floors at each rate of the search on ch channels,
// for the highest rate at which they hold probeLimitUs.
func runRateSearch(ctx context.Context, s latSettings, floors []latPeer, round, ch int, res *latResult, progress io.Writer) error {
	fmt.Fprintf(progress, "tickbench: round %d/%d, %d channel(s), floor rate search:", round, s.rounds, ch)
	for _, rate := range s.searchRates {
		a := runArgs{round: round, channels: ch, rate: rate, count: s.countFor(rate, true), probe: true}
		for _, p := range floors {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r := p.run(a)
			fmt.Fprintf(progress, " %s@%s %s", r.Peer, rateName(rate), shortRun(r))
			res.Runs = append(res.Runs, r)
		}
	}
	fmt.Fprintln(progress)
	return nil
}

// shortRun is a run's progress mark: its p50 or that it failed.
func shortRun(r latRun) string {
	if r.Err != "" {
		return r.Peer + " ERROR"
	}
	if r.Probe {
		return fmt.Sprintf("%.0fµs", r.Lat.P50Us)
	}
	return fmt.Sprintf("%s %.0fµs", strings.TrimPrefix(r.Peer, tickcastPrefix), r.Lat.P50Us)
}
