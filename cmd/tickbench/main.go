// Command tickbench measures tickcast end to end on loopback multicast beside
// baselines, in one run: by default latency, with --throughput throughput.
//
// Latency (the default): paced rates (10k, 50k and 100k msg/s), every peer a
// sender process and a receiver process paced by package pace, the feed
// handler's pacer, with one message per datagram. The peers are a raw-socket
// floor in two receive classes (blocking: one goroutine in epoll_wait over
// every socket, then recvmmsg; busy-poll: one locked thread polling the
// non-blocking sockets), tickcast (the real feedhandler and subscriber
// binaries, one run per subscriber --mode, with the feed handler's embedded
// NATS server and with an external nats-server process as users deploy
// it) and NATS core (an embedded nats-server in its own process, a
// publisher and a subscriber). Every receiver's latency is also split into
// the run's first second and its steady state. Rounds
// interleave every peer at every rate, with 1 and 4 channels; the report
// gives medians and spreads of the percentiles, counts, CPU per message and
// the ratios of tickcast to the floor of its receive class and to NATS, plus
// a rate search on the floor, ping-pong round trips (raw UDP, tickcast, NATS
// request/reply, and sockperf when installed) and a fan-out ramp. .hgrm
// files and SVG percentile plots go to --outdir. --tail is a preset of
// long runs for the tail.
//
// Throughput (--throughput): tickcast at full speed beside a raw
// sendmmsg/recvmmsg floor moving the same bytes in the same number of
// datagrams, and the ratio of the two.
//
// The baselines are processes of this same binary (hidden roles, the first
// argument "--role NAME") that use bare system calls, the NATS client and
// server, or the public tickcast API; the feedhandler and subscriber are
// built from the current source tree at start.
//
// Usage:
//
//	go run ./cmd/tickbench [--rates R,...] [--rounds N] [--modes M,...] [--channels C,...]
//	    [--deploy embedded,external] [--live-sub] [--tail] [--floors F,...]
//	    [--quick] [--outdir DIR] [--markdown FILE] [--json] [--out FILE] ...
//	go run ./cmd/tickbench --throughput [--count N] [--repeat R] [--size S] [--batch B]
//	    [--channels C] [--busy-poll] [--json] [--out FILE] [--timeout D]
//
// Only 127.0.0.1 and multicast groups in 239.77.0.0/16-239.79.0.0/16 on the
// loopback interface with TTL 0 are used: nothing leaves the host. Every
// child process has a time limit. See docs/bench.md for how to read the
// output.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// settings are tickbench's flags.
type settings struct {
	count    uint64
	repeat   int
	size     int
	batch    int
	channels int
	busyPoll bool
	json     bool
	out      string
	timeout  time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// roleOf returns the hidden role named by args ("--role NAME" or
// "--role=NAME" first), which makes this process one end of the floor.
func roleOf(args []string) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	a := strings.TrimPrefix(strings.TrimPrefix(args[0], "-"), "-")
	if v, ok := strings.CutPrefix(a, "role="); ok {
		return v, true
	}
	if a == "role" && len(args) > 1 {
		return args[1], true
	}
	return "", false
}

// runRole runs a floor role with its full argument list (the role flag
// included) and returns the exit status.
func runRole(role string, args []string, stdout, stderr io.Writer) int {
	var err error
	switch role {
	case "raw-send":
		err = rawSend(args, stdout)
	case "raw-recv":
		err = rawRecv(args, stdout, stderr)
	case "tick-send":
		err = tickSend(args, stdout, stderr)
	case "lat-send":
		err = latSend(args, stdout)
	case "lat-recv":
		err = latRecv(args, stdout, stderr)
	case "nats-server":
		err = natsServer(args, stdout, stderr)
	case "nats-pub":
		err = natsPub(args, stdout)
	case "nats-sub":
		err = natsSub(args, stdout, stderr)
	case "nats-echo":
		err = natsEcho(args, stdout, stderr)
	case "nats-ping":
		err = natsPing(args, stdout)
	case "udp-echo":
		err = udpEcho(args, stdout, stderr)
	case "udp-ping":
		err = udpPing(args, stdout)
	case "tc-echo":
		err = tcEcho(args, stdout, stderr)
	case "tc-ping":
		err = tcPing(args, stdout)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tickbench %s: %v\n", role, err)
		return 1
	}
	return 0
}

// benchFlags are tickbench's flags: settings and latSettings, and the
// texts parsed into them after parsing.
type benchFlags struct {
	s                                                               settings
	ls                                                              latSettings
	channels, rates, searchRates, modes, fanSubs, shmSubs, markdown string
	deploy, floors                                                  string
	search, throughput, subCap                                      bool
	day                                                             daySettings
	dayMode                                                         bool
	subs                                                            string
}

// flagSet returns the flag set that fills f.
func (f *benchFlags) flagSet(stderr io.Writer) *flag.FlagSet {
	s, ls := &f.s, &f.ls
	fs := flag.NewFlagSet("tickbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.throughput, "throughput", false, "measure throughput (tickcast at full speed beside a sendmmsg/recvmmsg floor) instead of latency")
	fs.StringVar(&f.channels, "channels", "", "channels (multicast groups) per run, comma separated (latency default 1,4; throughput default 1, one value)")
	fs.BoolVar(&s.json, "json", false, "print the result as JSON instead of a table")
	fs.StringVar(&s.out, "out", "", "also write the JSON result to this file")
	fs.DurationVar(&s.timeout, "timeout", 30*time.Second, "limit for each child process (day default 10m)")
	// Latency mode.
	fs.StringVar(&f.rates, "rates", "10000,50000,100000", "latency: paced rates in msg/s, comma separated")
	fs.IntVar(&ls.rounds, "rounds", 5, "latency: rounds, each running every peer at every rate")
	fs.StringVar(&f.modes, "modes", "", "latency: subscriber modes, comma separated (default: those of blocking,busy-poll,direct,direct-spin that subscriber --help lists); also direct-spinwait, mode direct with --spin-wait (ratios against the blocking floor, as it sleeps when idle)")
	fs.DurationVar(&spinWait, "spin-wait", spinWait, "latency: the subscriber's --spin-wait in mode direct-spinwait")
	fs.DurationVar(&ls.duration, "duration", 2*time.Second, "latency: length of each run; messages = rate × duration")
	fs.BoolVar(&f.search, "search", true, "latency: search for the highest rate at which the floor's p50 stays under 100 µs (probes at --search-rates)")
	fs.StringVar(&f.searchRates, "search-rates", "100000,200000,400000,800000", "latency: the floor's probe rates in msg/s")
	fs.DurationVar(&ls.probeDur, "probe-duration", 500*time.Millisecond, "latency: length of each search probe")
	fs.BoolVar(&ls.pingpong, "pingpong", true, "latency: also run ping-pong round trips (raw UDP, tickcast, NATS request/reply, sockperf)")
	fs.Uint64Var(&ls.ppCount, "pingpong-count", 20000, "latency: round trips per ping-pong run")
	fs.StringVar(&ls.sockperf, "sockperf", "/usr/bin/sockperf", "latency: sockperf binary for its UDP ping-pong (empty: none; skipped with a note when missing)")
	fs.BoolVar(&ls.fanout, "fanout", true, "latency: also run the fan-out ramp (one unpaced sender, --fanout-subs subscribers)")
	fs.StringVar(&f.fanSubs, "fanout-subs", "1,2,4", "latency: subscriber counts of the fan-out ramp")
	fs.StringVar(&f.shmSubs, "shm-subs", "1", "latency, with --deploy shm: local subscriber counts, comma separated; K > 1 is the peer tickcast-shmK-MODE, whose first subscriber's latency is reported while K-1 more read the same rings")
	fs.Uint64Var(&ls.fanCount, "fanout-count", 300000, "latency: messages per fan-out run")
	fs.StringVar(&ls.outdir, "outdir", "bench-out", "latency: directory for the .hgrm files and SVG plots (empty: none)")
	fs.BoolVar(&ls.quick, "quick", false, "latency: smoke test: every peer at 2k msg/s, 3,000 messages, 1 round, short ping-pong and fan-out, no search; "+
		"exits 1 unless every peer delivered everything and the output parses (checks no speed)")
	fs.StringVar(&ls.baseline, "baseline", "", "latency and day: also run the feed handler and subscriber of this git revision (e.g. a commit before a change), as peers baseline-MODE (day: baseline), in the same rounds")
	fs.StringVar(&f.markdown, "markdown", "", "latency and day: also write the report as Markdown to this file (BENCHMARKS.md)")
	fs.StringVar(&f.deploy, "deploy", "embedded,external", "latency: NATS deployments of the tickcast (and baseline) peers, comma separated: "+
		"embedded (the feed handler's own server, peers tickcast-MODE), external (a nats-server process and --nats-url, as docker-compose.yml deploys it, peers tickcast-ext-MODE) "+
		"and shm (the embedded server, the packets through the feed handler's shared-memory rings to a subscriber on this host: feedhandler --shm, subscriber --transport shm, peers tickcast-shm-MODE)")
	fs.StringVar(&f.floors, "floors", "blocking,busy-poll", "latency: receive modes of the raw floor, comma separated (peers floor-blocking, floor-busy-poll)")
	fs.BoolVar(&ls.liveSub, "live-sub", false, "latency: run a subscriber on the live NATS subjects (--transport nats) beside every tickcast subscriber")
	fs.BoolVar(&ls.tail, "tail", false, "latency: the tail preset: rates 10k,100k,300k, channels 1,4, 30 s runs, 5 rounds, both deployments, "+
		"peers floor-blocking, tickcast-direct, tickcast-ext-direct and nats, no search, ping-pong or fan-out (about 70 minutes; "+
		"flags given with it override it, e.g. --duration 10s --rounds 3)")
	// Throughput mode.
	fs.Uint64Var(&s.count, "count", 2_000_000, "throughput: messages the feed handler publishes per tickcast run; day: ITCH messages in the day it writes (default there 10000000)")
	fs.IntVar(&s.repeat, "repeat", 3, "throughput and day: rounds (one floor run and one tickcast run per mode, or per peer and size, each)")
	fs.IntVar(&s.size, "size", 0, "throughput: floor datagram size in bytes (0: tickcast's mean packet size, measured in the warm-up run)")
	fs.IntVar(&s.batch, "batch", 16, "throughput and day: datagrams per sendmmsg, for the floor sender and the feed handler's --send-batch alike")
	fs.BoolVar(&s.busyPoll, "busy-poll", false, "throughput: also run tickcast with the subscriber in busy-poll mode each round (besides direct and blocking with pre-generated messages, and direct with live generation)")
	fs.BoolVar(&f.subCap, "sub-capacity", false, "measure one subscriber's capacity instead: tickcast packets of --count messages (unsealed) sent by UDP GSO faster than it takes them, "+
		"with and without --gro, beside the raw receiver fed the same way; ticks/s and CPU per packet")
	// The whole path (--day).
	fs.BoolVar(&f.dayMode, "day", false, "measure the whole path instead: an ITCH day file → feed handler (--rate 0) → subscribers that must receive every tick, beside the raw floor")
	fs.StringVar(&f.day.file, "itch-file", "", "day: the ITCH file (NASDAQ's format, plain) to publish (default: write a day of --count messages, 8,000 stocks, with itchgen)")
	fs.StringVar(&f.subs, "subs", "1,2", "day: subscriber counts, comma separated")
	fs.BoolVar(&f.day.noAuth, "no-auth", false, "day: also run this tree with --auth=false on the feed handler and the subscribers as the peer tickcast-noauth in the same rounds (the cost of authentication)")
	fs.BoolVar(&f.day.gso, "gso", false, "day: also run this tree's feed handler with --gso (UDP segmentation offload) as the peer tickcast-gso in the same rounds")
	fs.BoolVar(&f.day.gro, "gro", false, "day: also run this tree with feedhandler --gso and subscriber --gro (UDP GRO: each GSO write arrives as one buffer) as the peer tickcast-gro in the same rounds")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tickbench [flags]            latency (default)\n"+
			"       tickbench --throughput [flags]\n"+
			"       tickbench --day [flags]\n"+
			"       tickbench --sub-capacity [flags]\n\n"+
			"Latency: paced rates, each peer a sender and a receiver process on loopback multicast: a raw-socket\n"+
			"floor (blocking epoll+recvmmsg and busy-poll), tickcast (feedhandler → subscriber, per --modes) and\n"+
			"NATS core; interleaved rounds, medians and spreads, ratios, rate search, ping-pong (with sockperf)\n"+
			"and fan-out; .hgrm files and SVG plots in --outdir. --quick is a smoke test of all of it.\n"+
			"Throughput: tickcast at full speed beside a raw sendmmsg/recvmmsg floor, and the ratios.\n"+
			"Day (--day): an ITCH file through the feed handler to 1 and 2 subscribers on 1 and 4 channels, at full speed:\n"+
			"ITCH messages/s, ticks/s, packets/s, CPU per tick and per packet and peak RSS of every process, beside the floor.\n"+
			"Subscriber capacity (--sub-capacity): one subscriber fed tickcast packets faster than it takes them, beside the raw receiver.\n"+
			"See docs/bench.md.\n\n")
		fs.PrintDefaults()
	}
	return fs
}

func run(args []string, stdout, stderr io.Writer) int {
	if role, ok := roleOf(args); ok {
		return runRole(role, args, stdout, stderr)
	}
	var f benchFlags
	fs := f.flagSet(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tickbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if n := btoi(f.dayMode) + btoi(f.throughput) + btoi(f.subCap); n > 1 {
		fmt.Fprintln(stderr, "tickbench: --day, --throughput and --sub-capacity are modes: give one")
		return 2
	}
	if f.throughput {
		return runThroughput(ctx, f.s, f.channels, stdout, stderr)
	}
	if f.subCap {
		return runSubCapMain(ctx, f.s, set, stdout, stderr)
	}
	if f.dayMode {
		return f.runDay(ctx, set, stdout, stderr)
	}
	if f.channels == "" {
		f.channels = "1,4"
	}
	if err := f.ls.parseTail(f.deploy, f.floors, set); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	if err := f.ls.parse(f.s.timeout, f.channels, f.rates, f.searchRates, f.modes, f.fanSubs, f.search, set); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	var err error
	if f.ls.shmSubs, err = parseInts("shm-subs", f.shmSubs, 1, 8); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	return runLatencyMain(ctx, f.ls, f.s, f.markdown, stdout, stderr)
}

// runThroughput is --throughput: it measures and prints the result.
func runThroughput(ctx context.Context, s settings, channels string, stdout, stderr io.Writer) int {
	if channels == "" {
		channels = "1"
	}
	var err error
	if s.channels, err = strconv.Atoi(channels); err != nil {
		fmt.Fprintf(stderr, "tickbench: --channels %q: --throughput takes one number\n", channels)
		return 2
	}
	if err := s.validate(); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	res, err := measure(ctx, s, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	if err := emit(res, s.out, s.json, stdout, func(w io.Writer) { printTable(w, res) }); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	return 0
}

func (s *settings) validate() error {
	switch {
	case s.count < 10_000 || s.count > 100_000_000:
		return fmt.Errorf("--count %d: want 10000..100000000", s.count)
	case s.repeat < 1 || s.repeat > 50:
		return fmt.Errorf("--repeat %d: want 1..50", s.repeat)
	case s.size != 0 && (s.size < minSize || s.size > 1472):
		return fmt.Errorf("--size %d: want 0 (auto) or %d..1472 (tickcast's datagram limit)", s.size, minSize)
	case s.batch < 1 || s.batch > 1024:
		return fmt.Errorf("--batch %d: want 1..1024", s.batch)
	case s.channels < 1 || s.channels > 32:
		return fmt.Errorf("--channels %d: want 1..32", s.channels)
	case s.timeout < time.Second:
		return fmt.Errorf("--timeout %v: want at least 1s", s.timeout)
	}
	return nil
}

// variant is one way the throughput mode runs tickcast: a subscriber mode,
// with messages generated before or while publishing.
type variant struct {
	label, mode string
	pregen      bool
}

// runRound runs the floor once and then tickcast once in each variant, and
// compares each tickcast run with the floor. Progress goes on the line
// the caller started.
func runRound(ctx context.Context, fc floorConfig, tc tickcastConfig, count uint64, variants []variant, progress io.Writer) (round, error) {
	var rd round
	var err error
	if rd.Floor, err = runFloor(ctx, fc); err != nil {
		return rd, fmt.Errorf("floor: %w", err)
	}
	fmt.Fprintf(progress, " %.0f dg/s", rd.Floor.DgramsPerS)
	for _, v := range variants {
		c := tc
		c.Count, c.Mode, c.Pregenerate = count, v.mode, v.pregen
		fmt.Fprintf(progress, "; tickcast %s", v.label)
		r, err := runTickcast(ctx, c)
		if err != nil {
			return rd, fmt.Errorf("tickcast %s: %w", v.label, err)
		}
		r.Mode = v.label
		r.PktRatio = r.PacketsPerS / rd.Floor.DgramsPerS
		r.ByteRatio = r.BytesPerS / rd.Floor.BytesPerS
		if r.CPUPerPacketUs > 0 {
			r.CPURatio = rd.Floor.CPUPerDgramUs / r.CPUPerPacketUs
		}
		fmt.Fprintf(progress, " %.0f ticks/s", r.TicksPerS)
		rd.Tickcast = append(rd.Tickcast, r)
	}
	return rd, nil
}

// measure builds the binaries, runs the warm-up and the rounds, and
// summarizes them.
func measure(ctx context.Context, s settings, progress io.Writer) (*result, error) {
	exe, dir, fhBin, subBin, err := prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	msgBytes, err := meanMsgBytes(s.channels, s.count)
	if err != nil {
		return nil, err
	}
	// The raw sender generates nothing, so tickcast's feed handler is
	// given pre-generated messages too (--pregenerate); one variant keeps
	// the generator in the loop, as a feed handler runs in production.
	variants := []variant{{"direct", "direct", true}, {"direct, live generation", "direct", false}, {"blocking", "blocking", true}}
	if s.busyPoll {
		variants = append(variants, variant{"busy-poll", "busy-poll", true})
	}
	var modes []string
	for _, v := range variants {
		modes = append(modes, v.label)
	}
	tc := tickcastConfig{Feedhandler: fhBin, Subscriber: subBin, Channels: s.channels, Batch: s.batch,
		MsgBytes: msgBytes, Timeout: s.timeout}

	res := &result{
		Date: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPUs: runtime.NumCPU(), Count: s.count, Repeat: s.repeat, Batch: s.batch, RecvBatch: recvBatch,
		Channels: s.channels, Modes: modes, MeanMsgBytes: msgBytes,
	}

	// The warm-up run pays for first-exec costs (page cache, binary
	// loading) outside the measurement, and measures the packet fill that
	// sizes the floor's datagrams.
	warm := tc
	warm.Count, warm.Mode = max(s.count/5, min(s.count, 200_000)), "direct"
	fmt.Fprintf(progress, "tickbench: warm-up: tickcast %d messages\n", warm.Count)
	res.Warmup, err = runTickcast(ctx, warm)
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	res.Size, res.SizeSource = s.size, "--size"
	if s.size == 0 {
		res.Size, res.SizeSource = int(math.Round(res.Warmup.MeanPacketBytes)), "warm-up"
	}
	// As many datagrams as tickcast sends packets per run, so both move
	// about the same bytes and run for a comparable time.
	res.FloorCount = uint64(math.Round(float64(s.count) / res.Warmup.MsgsPerPacket))
	fc := floorConfig{Exe: []string{exe}, Count: res.FloorCount, Size: res.Size, Batch: s.batch, Timeout: s.timeout}

	for i := 0; i < s.repeat; i++ {
		fmt.Fprintf(progress, "tickbench: round %d/%d: floor %d × %d B", i+1, s.repeat, fc.Count, fc.Size)
		rd, err := runRound(ctx, fc, tc, s.count, variants, progress)
		fmt.Fprintln(progress)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		res.Rounds = append(res.Rounds, rd)
	}
	res.summarize()
	return res, nil
}

// parse checks the latency flags and fills ls from the comma-separated
// lists; set holds the flags given on the command line, which --quick does
// not override.
func (ls *latSettings) parse(timeout time.Duration, channels, rates, searchRates, modes, fanSubs string, search bool, set map[string]bool) error {
	var err error
	if ls.timeout == 0 || set["timeout"] {
		ls.timeout = timeout
	}
	if ls.channels, err = parseInts("channels", channels, 1, 32); err != nil {
		return err
	}
	if ls.fanSubs, err = parseInts("fanout-subs", fanSubs, 1, 8); err != nil {
		return err
	}
	if ls.rates, err = parseRates("rates", rates); err != nil {
		return err
	}
	if search {
		if ls.searchRates, err = parseRates("search-rates", searchRates); err != nil {
			return err
		}
	}
	for _, m := range strings.Split(modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			ls.modes = append(ls.modes, m)
		}
	}
	if ls.quick {
		// A smoke test: low rate, few messages, one round, the search off.
		if !set["rates"] {
			ls.rates = []float64{2000}
		}
		if !set["rounds"] {
			ls.rounds = 1
		}
		if !set["search"] {
			ls.searchRates = nil
		}
		if !set["pingpong-count"] {
			ls.ppCount = 2000
		}
		if !set["fanout-count"] {
			ls.fanCount = 20000
		}
		// 1.5 s at 2k msg/s: a steady state after the first second.
		ls.count = 3000
	}
	if ls.tail {
		if !set["rates"] {
			ls.rates = []float64{10e3, 100e3, 300e3}
		}
		if !set["modes"] {
			ls.modes = []string{"direct"}
		}
		if !set["search"] {
			ls.searchRates = nil
		}
	}
	if ls.sockperf != "" {
		if _, err := os.Stat(ls.sockperf); err != nil {
			ls.sockperf = ""
		}
	}
	switch {
	case ls.rounds < 1 || ls.rounds > 50:
		return fmt.Errorf("--rounds %d: want 1..50", ls.rounds)
	case ls.duration < 100*time.Millisecond || ls.duration > time.Minute:
		return fmt.Errorf("--duration %v: want 100ms..1m", ls.duration)
	case ls.probeDur < 100*time.Millisecond || ls.probeDur > time.Minute:
		return fmt.Errorf("--probe-duration %v: want 100ms..1m", ls.probeDur)
	case ls.ppCount < 1 || ls.ppCount > 10_000_000:
		return fmt.Errorf("--pingpong-count %d: want 1..10000000", ls.ppCount)
	case ls.fanCount < 1000 || ls.fanCount > 100_000_000:
		return fmt.Errorf("--fanout-count %d: want 1000..100000000", ls.fanCount)
	case spinWait <= 0 || spinWait > time.Second:
		return fmt.Errorf("--spin-wait %v: want more than 0, at most 1s", spinWait)
	case ls.timeout < time.Second:
		return fmt.Errorf("--timeout %v: want at least 1s", ls.timeout)
	}
	// Every run must fit its children's time limit with room to start.
	for _, r := range append(slices.Clone(ls.rates), ls.searchRates...) {
		if d := time.Duration(float64(ls.countFor(r, false)) / r * float64(time.Second)); d > ls.timeout/2 {
			return fmt.Errorf("a run at %s msg/s lasts %v: more than half of --timeout %v", rateName(r), d, ls.timeout)
		}
	}
	return nil
}

// parseInts parses a comma-separated list of ints in lo..hi.
func parseInts(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("--%s %q: want numbers %d..%d, comma separated", name, s, lo, hi)
		}
		out = append(out, n)
	}
	return distinct(out), nil
}

// parseRates parses a comma-separated list of rates in msg/s; a k or M
// suffix multiplies by 1e3 or 1e6.
func parseRates(name, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mul := 1.0
		switch {
		case strings.HasSuffix(f, "k"):
			mul, f = 1e3, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mul, f = 1e6, strings.TrimSuffix(f, "M")
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r*mul < 100 || r*mul > 10e6 {
			return nil, fmt.Errorf("--%s %q: want rates of 100..10M msg/s, comma separated", name, s)
		}
		out = append(out, r*mul)
	}
	return distinct(out), nil
}

// runLatencyMain runs the latency mode and writes its outputs; it returns
// the exit status.
func runLatencyMain(ctx context.Context, ls latSettings, s settings, markdown string, stdout, stderr io.Writer) int {
	if ls.sockperf == "" && ls.pingpong {
		fmt.Fprintln(stderr, "tickbench: note: sockperf not found (Debian package sockperf): its ping-pong is skipped")
	}
	res, err := runLatency(ctx, ls, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	if ls.sockperf == "" && ls.pingpong {
		res.Notes = append(res.Notes, "sockperf not installed: its ping-pong was skipped")
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	var files []string
	if s.out != "" {
		files = append(files, s.out)
	}
	if ls.outdir != "" {
		files = append(files, filepath.Join(ls.outdir, "result.json"))
	}
	for _, f := range files {
		if err := os.WriteFile(f, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "tickbench: %v\n", err)
			return 1
		}
	}
	if markdown != "" {
		var md strings.Builder
		writeMarkdown(&md, res)
		// The --day section of an earlier run stays (writeDaySection).
		if old, err := os.ReadFile(markdown); err == nil {
			if day, ok := daySection(string(old)); ok {
				md.WriteString("\n" + day)
			}
		}
		if err := os.WriteFile(markdown, []byte(md.String()), 0o644); err != nil {
			fmt.Fprintf(stderr, "tickbench: %v\n", err)
			return 1
		}
	}
	if s.json {
		fmt.Fprintln(stdout, string(b))
	} else {
		printLatency(stdout, res)
	}
	if !ls.quick {
		return 0
	}
	// The smoke test: the JSON must read back to the same runs, and
	// every peer must have delivered everything.
	var back latResult
	bad := quickCheck(res)
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != len(res.Runs) || len(back.Summary) != len(res.Summary) {
		bad = append(bad, fmt.Sprintf("the JSON result does not read back: %v", err))
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "tickbench: --quick: %d problem(s):\n  %s\n", len(bad), strings.Join(bad, "\n  "))
		return 1
	}
	fmt.Fprintln(stderr, "tickbench: --quick: every peer delivered everything; output parsed")
	return 0
}

// runDay fills the day settings from the flags they share with the other
// modes and runs --day.
func (f *benchFlags) runDay(ctx context.Context, set map[string]bool, stdout, stderr io.Writer) int {
	d := &f.day
	d.count, d.rounds, d.batch, d.baseline, d.timeout = f.s.count, f.s.repeat, f.s.batch, f.ls.baseline, f.s.timeout
	d.json, d.out, d.markdown = f.s.json, f.s.out, f.markdown
	if !set["count"] {
		d.count = 10_000_000
	}
	if !set["timeout"] {
		d.timeout = 10 * time.Minute
	}
	var err error
	if d.channels, err = parseInts("channels", cmp.Or(f.channels, "1,4"), 1, 32); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	if d.subs, err = parseInts("subs", f.subs, 1, 8); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	return runDayMain(ctx, *d, stdout, stderr)
}

// emit writes res as indented JSON to the file out (if set), and prints it
// to stdout as JSON (asJSON) or as table does.
func emit(res any, out string, asJSON bool, stdout io.Writer, table func(io.Writer)) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if out != "" {
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if asJSON {
		fmt.Fprintln(stdout, string(b))
	} else {
		table(stdout)
	}
	return nil
}
