package main

// Running the ping-pong pairs and the fan-out ramp.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Ping-pong transports.
const (
	ppUDP      = "udp"
	ppTickcast = "tickcast"
	ppNATS     = "nats"
	ppSockperf = "sockperf"
)

// ppRun is one ping-pong measurement.
type ppRun struct {
	Round     int    `json:"round"`
	Transport string `json:"transport"`
	Pings     uint64 `json:"pings"`
	Pongs     uint64 `json:"pongs"`
	// RTT is the round trip. sockperf reports half round trips: for it,
	// HalfRTT holds what it printed and RTT is twice that.
	RTT     latStats `json:"rtt"`
	HalfRTT latStats `json:"half_rtt"`
	Hgrm    string   `json:"hgrm,omitempty"`
	Err     string   `json:"error,omitempty"`
}

// halve returns s with every figure halved.
func halve(s latStats) latStats {
	return latStats{Count: s.Count, P50Us: s.P50Us / 2, P90Us: s.P90Us / 2, P99Us: s.P99Us / 2, P999Us: s.P999Us / 2, MaxUs: s.MaxUs / 2}
}

// runPingPong runs every transport's ping-pong once.
func runPingPong(ctx context.Context, env latEnv, s latSettings, round int) []ppRun {
	var out []ppRun
	one := func(t string, f func(r *ppRun) error) {
		r := ppRun{Round: round, Transport: t}
		if env.outdir != "" {
			r.Hgrm = fmt.Sprintf("%s/hgrm/pingpong_%s_round%d.hgrm", env.outdir, t, round)
		}
		if err := f(&r); err != nil {
			r.Err = err.Error()
		}
		if t != ppSockperf {
			r.HalfRTT = halve(r.RTT)
		}
		out = append(out, r)
	}
	n := strconv.FormatUint(s.ppCount, 10)
	one(ppUDP, func(r *ppRun) error { return pingUDP(ctx, env, n, r) })
	// tickcast in its blocking-class modes: the spinning ones would put
	// two spinning threads (echo and ping) on this host's cores.
	for _, mode := range []string{"direct", "blocking"} {
		one(ppTickcast+"-"+mode, func(r *ppRun) error { return pingTickcast(ctx, env, mode, n, r) })
	}
	one(ppNATS, func(r *ppRun) error { return pingNATS(ctx, env, n, r) })
	if s.sockperf != "" {
		one(ppSockperf, func(r *ppRun) error { return pingSockperf(ctx, s, env.size, r) })
	}
	return out
}

// maxLife is the --max-life argument of the echo roles: they end by
// themselves should tickbench not stop them.
func maxLife(env latEnv) []string { return []string{"--max-life", env.timeout.String()} }

// runPinger runs a pinger role to its end and puts its report into r.
func runPinger(ctx context.Context, env latEnv, name string, args []string, r *ppRun) error {
	var rep pingReport
	if _, _, err := runToEnd(ctx, name, env.timeout, env.exe, args, &rep); err != nil {
		return err
	}
	r.Pings, r.Pongs, r.RTT = rep.Pings, rep.Pongs, rep.latStats
	return nil
}

// pingUDP runs the plain UDP ping-pong: udp-ping against udp-echo.
func pingUDP(ctx context.Context, env latEnv, n string, r *ppRun) error {
	echo, err := startReady(ctx, "udp-echo", env.timeout, env.exe, append([]string{"--role", "udp-echo"}, maxLife(env)...),
		udpEchoReadyMark, 5*time.Second)
	if err != nil {
		return err
	}
	defer stopServer(echo)
	return runPinger(ctx, env, "udp-ping", []string{"--role", "udp-ping", "--port", echo.readyText(udpEchoReadyMark),
		"--size", strconv.Itoa(env.size), "--count", n, "--hgrm", r.Hgrm}, r)
}

// pingTickcast runs tickcast's ping-pong in mode: tc-ping against tc-echo,
// each way on a group of its own.
func pingTickcast(ctx context.Context, env latEnv, mode, n string, r *ppRun) error {
	group, port, err := freshGroup(77, 2)
	if err != nil {
		return err
	}
	there, back := fmt.Sprintf("%s:%d", group, port), fmt.Sprintf("%s:%d", channelGroup(group, 1), port)
	echo, err := startReady(ctx, "tc-echo", env.timeout, env.exe, append([]string{"--role", "tc-echo", "--in", there, "--out", back, "--mode", mode}, maxLife(env)...),
		"tc-echo: ready", 5*time.Second)
	if err != nil {
		return err
	}
	defer stopServer(echo)
	return runPinger(ctx, env, "tc-ping", append([]string{"--role", "tc-ping", "--in", back, "--out", there,
		"--count", n, "--hgrm", r.Hgrm, "--mode", mode}, maxLife(env)...), r)
}

// pingNATS runs NATS request/reply: nats-ping against nats-echo through a
// nats-server.
func pingNATS(ctx context.Context, env latEnv, n string, r *ppRun) error {
	srv, url, err := startNATSServer(ctx, env)
	if err != nil {
		return err
	}
	defer stopServer(srv)
	size := strconv.Itoa(env.size)
	echo, err := startReady(ctx, "nats-echo", env.timeout, env.exe, append([]string{"--role", "nats-echo", "--url", url,
		"--subject", "tickbench.ping", "--size", size}, maxLife(env)...), "nats-echo: ready", 10*time.Second)
	if err != nil {
		return err
	}
	defer stopServer(echo)
	return runPinger(ctx, env, "nats-ping", []string{"--role", "nats-ping", "--url", url,
		"--subject", "tickbench.ping", "--size", size, "--count", n, "--hgrm", r.Hgrm}, r)
}

// pingSockperf runs sockperf's UDP ping-pong for about as many round trips
// as the others make, up to 10 s. It writes no histogram.
func pingSockperf(ctx context.Context, s latSettings, size int, r *ppRun) error {
	r.Hgrm = ""
	secs := max(1, min(10, int(s.ppCount/10000)))
	half, err := runSockperf(ctx, s.sockperf, size, secs)
	if err != nil {
		return err
	}
	r.HalfRTT = half
	r.RTT = latStats{Count: half.Count, P50Us: 2 * half.P50Us, P90Us: 2 * half.P90Us, P99Us: 2 * half.P99Us,
		P999Us: 2 * half.P999Us, MaxUs: 2 * half.MaxUs}
	r.Pings, r.Pongs = uint64(half.Count), uint64(half.Count)
	return nil
}

// runSockperf runs sockperf's UDP ping-pong on 127.0.0.1 for secs seconds
// with size-byte messages and returns the half round trips it reports.
func runSockperf(ctx context.Context, path string, size, secs int) (latStats, error) {
	_, port, err := freshGroup(79, 1) // a free UDP port on 127.0.0.1
	if err != nil {
		return latStats{}, err
	}
	p := strconv.Itoa(port)
	srv, err := startProc(ctx, "sockperf server", time.Duration(secs+20)*time.Second, []string{path}, []string{"server", "-i", "127.0.0.1", "-p", p}, "")
	if err != nil {
		return latStats{}, err
	}
	defer srv.kill()
	time.Sleep(300 * time.Millisecond) // it prints nothing when ready
	cctx, cancel := context.WithTimeout(ctx, time.Duration(secs+15)*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, path, "ping-pong", "-i", "127.0.0.1", "-p", p, "-t", strconv.Itoa(secs), "-m", strconv.Itoa(size)).CombinedOutput()
	if err != nil {
		return latStats{}, fmt.Errorf("sockperf ping-pong: %v\n%s", err, out)
	}
	return parseSockperf(string(out))
}

var (
	ansiEscape     = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	sockPercentile = regexp.MustCompile(`percentile\s+([0-9.]+)\s*=\s*([0-9.]+)`)
	sockMax        = regexp.MustCompile(`<MAX> observation\s*=\s*([0-9.]+)`)
	sockTotal      = regexp.MustCompile(`Total\s+([0-9]+)\s+observations`)
)

// parseSockperf reads the latency summary of sockperf's ping-pong output:
// half round trips in µs.
func parseSockperf(out string) (latStats, error) {
	out = ansiEscape.ReplaceAllString(out, "")
	var s latStats
	found := map[string]bool{}
	for _, m := range sockPercentile.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return s, fmt.Errorf("sockperf percentile %s: %w", m[1], err)
		}
		switch m[1] {
		case "50.000":
			s.P50Us = v
		case "90.000":
			s.P90Us = v
		case "99.000":
			s.P99Us = v
		case "99.900":
			s.P999Us = v
		default:
			continue
		}
		found[m[1]] = true
	}
	if m := sockMax.FindStringSubmatch(out); m != nil {
		s.MaxUs, _ = strconv.ParseFloat(m[1], 64)
		found["max"] = true
	}
	if m := sockTotal.FindStringSubmatch(out); m != nil {
		s.Count, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if len(found) != 5 || s.Count == 0 {
		return s, fmt.Errorf("sockperf output without its percentiles and observation count:\n%s", out)
	}
	return s, nil
}

// fanRun is one fan-out measurement: one unpaced sender, Subs receivers.
type fanRun struct {
	Round    int       `json:"round"`
	Peer     string    `json:"peer"`
	Subs     int       `json:"subs"`
	Sent     uint64    `json:"sent"`
	Received []uint64  `json:"received"`    // per subscriber
	PerSub   []float64 `json:"ticks_per_s"` // per subscriber: messages received per second
	// PerSubMedian and PerSubMin summarize PerSub.
	PerSubMedian float64 `json:"ticks_per_s_median"`
	PerSubMin    float64 `json:"ticks_per_s_min"`
	Lost         uint64  `json:"lost"` // summed over the subscribers
	Err          string  `json:"error,omitempty"`
}

// finish fills the summary fields of r.
func (r *fanRun) finish() {
	for _, n := range r.Received {
		if n < r.Sent {
			r.Lost += r.Sent - n
		}
	}
	if len(r.PerSub) > 0 {
		st := summarize(r.PerSub)
		r.PerSubMedian, r.PerSubMin = st.Median, st.Min
	}
}

// rateOver is n messages over the span from startNs to endNs.
func rateOver(n uint64, startNs, endNs int64) float64 {
	if d := time.Duration(endNs - startNs).Seconds(); d > 0 {
		return float64(n) / d
	}
	return 0
}

// runFanout runs the floor, NATS and tickcast (direct mode) with k
// subscribers each, the sender as fast as it can, one message per datagram
// (floor, NATS) or per message (tickcast, which packs them).
func runFanout(ctx context.Context, env latEnv, s latSettings, round, k int) []fanRun {
	var out []fanRun
	one := func(peer string, f func(r *fanRun) error) {
		r := fanRun{Round: round, Peer: peer, Subs: k}
		if err := f(&r); err != nil {
			r.Err = err.Error()
		}
		r.finish()
		out = append(out, r)
	}
	n := strconv.FormatUint(s.fanCount, 10)
	one("floor", func(r *fanRun) error { return fanFloor(ctx, env, k, n, r) })
	one(peerNATS, func(r *fanRun) error { return fanNATS(ctx, env, k, n, r) })
	one("tickcast-direct", func(r *fanRun) error { return fanTickcast(ctx, env, k, s.fanCount, false, r) })
	if slices.Contains(s.deploys, deploySHM) {
		one("tickcast-shm-direct", func(r *fanRun) error { return fanTickcast(ctx, env, k, s.fanCount, true, r) })
	}
	return out
}

// startReceivers starts k receivers and waits until each is ready. The
// caller kills the ones returned, also on an error.
func startReceivers(ctx context.Context, env latEnv, k int, name string, exe []string, args []string, mark string) ([]*proc, error) {
	var ps []*proc
	for i := 0; i < k; i++ {
		p, err := startProc(ctx, fmt.Sprintf("%s %d", name, i+1), env.timeout, exe, args, mark)
		if err != nil {
			return ps, err
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if err := p.waitReady(10 * time.Second); err != nil {
			return ps, err
		}
	}
	return ps, nil
}

// killAll kills every process of ps.
func killAll(ps []*proc) {
	for _, p := range ps {
		p.kill()
	}
}

// collectFan reads the receivers' reports after the sender's, which started
// sending at startNs, into r.
func collectFan(r *fanRun, subs []*proc, startNs int64) error {
	for _, p := range subs {
		var rr latRecvReport
		if _, err := p.summary(&rr); err != nil {
			return err
		}
		r.Received = append(r.Received, rr.Received)
		r.PerSub = append(r.PerSub, rateOver(rr.Received, startNs, rr.LastNs))
	}
	return nil
}

// fanFloor runs the floor's fan-out: k lat-recv and an unpaced lat-send.
func fanFloor(ctx context.Context, env latEnv, k int, n string, r *fanRun) error {
	group, port, err := freshGroup(79, 1)
	if err != nil {
		return err
	}
	common := []string{"--group", group.String(), "--port", strconv.Itoa(port), "--size", strconv.Itoa(env.size)}
	subs, err := startReceivers(ctx, env, k, "lat-recv", env.exe, append([]string{"--role", "lat-recv", "--expect", n}, common...), "lat-recv: ready")
	defer killAll(subs)
	if err != nil {
		return err
	}
	var sr latSendReport
	if _, _, err := runToEnd(ctx, "lat-send", env.timeout, env.exe, append([]string{"--role", "lat-send", "--rate", "0", "--count", n}, common...), &sr); err != nil {
		return err
	}
	r.Sent = sr.Sent
	return collectFan(r, subs, sr.StartNs)
}

// fanNATS runs NATS core's fan-out: a server, k nats-sub and an unpaced
// nats-pub.
func fanNATS(ctx context.Context, env latEnv, k int, n string, r *fanRun) error {
	srv, url, err := startNATSServer(ctx, env)
	if err != nil {
		return err
	}
	defer stopServer(srv)
	size := strconv.Itoa(env.size)
	subs, err := startReceivers(ctx, env, k, "nats-sub", env.exe, []string{"--role", "nats-sub", "--url", url, "--subject", "tickbench.fan.*",
		"--size", size, "--expect", n}, "nats-sub: ready")
	defer killAll(subs)
	if err != nil {
		return err
	}
	var sr latSendReport
	if _, _, err := runToEnd(ctx, "nats-pub", env.timeout, env.exe, []string{"--role", "nats-pub", "--url", url, "--subject", "tickbench.fan",
		"--size", size, "--rate", "0", "--count", n}, &sr); err != nil {
		return err
	}
	r.Sent = sr.Sent
	return collectFan(r, subs, sr.StartNs)
}

// fanTickcast runs tickcast's fan-out: k subscribers in direct mode and
// the feed handler unpaced, its messages pre-generated.
func fanTickcast(ctx context.Context, env latEnv, k int, count uint64, shm bool, r *fanRun) error {
	group, port, err := freshGroup(77, 1)
	if err != nil {
		return err
	}
	ns := isolatedNATS()
	subArgs, fhArgs := tickcastLatArgs(fmt.Sprintf("%s:%d", group, port), "direct", 1, 0, count, "", ns)
	// Pre-generated messages, as the other senders generate nothing.
	fhArgs = append(fhArgs, "--pregenerate")
	if shm {
		dir, err := withSHM(&subArgs, &fhArgs)
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	subs, err := startReceivers(ctx, env, k, "subscriber", []string{env.subscriber}, subArgs, `"message":"subscribed"`)
	defer killAll(subs)
	if err != nil {
		return err
	}
	var fs fhSummary
	_, fhAt, err := runToEnd(ctx, "feedhandler", env.timeout, []string{env.feedhandler}, fhArgs, &fs)
	if err != nil {
		return err
	}
	r.Sent = fs.Messages
	// As in the throughput mode: the window starts elapsed_s before the
	// feed handler's summary line was read and ends when each
	// subscriber's was.
	start := fhAt.Add(-time.Duration(fs.ElapsedS*float64(time.Second)) - ns.linger())
	for _, p := range subs {
		var ss subLatSummary
		at, err := p.summary(&ss)
		if err != nil {
			return err
		}
		r.Received = append(r.Received, ss.Received)
		r.PerSub = append(r.PerSub, rateOver(ss.Received, start.UnixNano(), at.UnixNano()))
	}
	return nil
}

// distinct returns the distinct values of xs in first-seen order.
func distinct[T comparable](xs []T) []T {
	var out []T
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// joinInts formats ints comma separated.
func joinInts(xs []int) string {
	var b []string
	for _, x := range xs {
		b = append(b, strconv.Itoa(x))
	}
	return strings.Join(b, ",")
}
