// Command tickbench measures tickcast end to end on loopback multicast next
// to a raw-socket floor, in one run, and reports the ratio of the two.
//
// The floor is two processes of this same binary (hidden roles raw-send and
// raw-recv) that move datagrams with bare sendmmsg/recvmmsg system calls and
// no tickcast code. tickcast is measured with the real feedhandler and
// subscriber binaries, built from the current source tree at start. The
// machine may be shared and noisy, so absolute rates say little; ratios of
// measurements taken a few seconds apart say more. Rounds interleave a floor
// run and a tickcast run, and the report gives the median and spread of
// each figure and of the per-round ratios.
//
// Usage:
//
//	go run ./cmd/tickbench [--count N] [--repeat R] [--size S] [--batch B]
//	    [--channels C] [--busy-poll] [--json] [--out FILE] [--timeout D]
//
// Only 127.0.0.1 and multicast groups in 239.77.0.0/16-239.79.0.0/16 on the
// loopback interface with TTL 0 are used: nothing leaves the host. See
// docs/bench.md for how to read the output.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
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
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tickbench %s: %v\n", role, err)
		return 1
	}
	return 0
}

func run(args []string, stdout, stderr io.Writer) int {
	if role, ok := roleOf(args); ok {
		return runRole(role, args, stdout, stderr)
	}
	var s settings
	fs := flag.NewFlagSet("tickbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&s.count, "count", 2_000_000, "messages the feed handler publishes per tickcast run")
	fs.IntVar(&s.repeat, "repeat", 3, "rounds (one floor run and one tickcast run per mode each)")
	fs.IntVar(&s.size, "size", 0, "floor datagram size in bytes (0: tickcast's mean packet size, measured in the warm-up run)")
	fs.IntVar(&s.batch, "batch", 16, "datagrams per sendmmsg, for the floor sender and the feed handler's --send-batch alike")
	fs.IntVar(&s.channels, "channels", 1, "feed handler channels (1: one multicast stream, like the floor)")
	fs.BoolVar(&s.busyPoll, "busy-poll", false, "also run tickcast with the subscriber in busy-poll mode each round")
	fs.BoolVar(&s.json, "json", false, "print the result as JSON instead of a table")
	fs.StringVar(&s.out, "out", "", "also write the JSON result to this file")
	fs.DurationVar(&s.timeout, "timeout", 30*time.Second, "limit for each child process")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tickbench [flags]\n\n"+
			"Measures tickcast (feedhandler → subscriber) on loopback multicast beside a raw\n"+
			"sendmmsg/recvmmsg floor, interleaved, and reports the ratios. See docs/bench.md.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := s.validate(); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := measure(ctx, s, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	if s.out != "" {
		if err := os.WriteFile(s.out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "tickbench: %v\n", err)
			return 1
		}
	}
	if s.json {
		fmt.Fprintln(stdout, string(b))
	} else {
		printTable(stdout, res)
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

// measure builds the binaries, runs the warm-up and the rounds, and
// summarizes them.
func measure(ctx context.Context, s settings, progress io.Writer) (*result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tickbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(progress, "tickbench: building feedhandler and subscriber\n")
	fhBin, subBin, err := buildBinaries(ctx, dir)
	if err != nil {
		return nil, err
	}
	msgBytes, err := meanMsgBytes(s.channels, s.count)
	if err != nil {
		return nil, err
	}
	modes := []string{"blocking"}
	if s.busyPoll {
		modes = append(modes, "busy-poll")
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
	warm.Count, warm.Mode = max(s.count/5, min(s.count, 200_000)), "blocking"
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
		var rd round
		fmt.Fprintf(progress, "tickbench: round %d/%d: floor %d × %d B", i+1, s.repeat, fc.Count, fc.Size)
		if rd.Floor, err = runFloor(ctx, fc); err != nil {
			fmt.Fprintln(progress)
			return nil, fmt.Errorf("round %d: floor: %w", i+1, err)
		}
		fmt.Fprintf(progress, " %.0f dg/s", rd.Floor.DgramsPerS)
		for _, mode := range modes {
			c := tc
			c.Count, c.Mode = s.count, mode
			fmt.Fprintf(progress, "; tickcast %s", mode)
			r, err := runTickcast(ctx, c)
			if err != nil {
				fmt.Fprintln(progress)
				return nil, fmt.Errorf("round %d: tickcast %s: %w", i+1, mode, err)
			}
			r.PktRatio = r.PacketsPerS / rd.Floor.DgramsPerS
			r.ByteRatio = r.BytesPerS / rd.Floor.BytesPerS
			if r.CPUPerPacketUs > 0 {
				r.CPURatio = rd.Floor.CPUPerDgramUs / r.CPUPerPacketUs
			}
			fmt.Fprintf(progress, " %.0f ticks/s", r.TicksPerS)
			rd.Tickcast = append(rd.Tickcast, r)
		}
		fmt.Fprintln(progress)
		res.Rounds = append(res.Rounds, rd)
	}
	res.summarize()
	return res, nil
}
