package main

// The tail of the latency: the deployments tickcast runs in (the feed
// handler's embedded NATS server, or an external nats-server as users
// deploy it), an optional live NATS subscriber beside the multicast one,
// and every run's latency split into its first second and its steady
// state, with the floor's figures of the same rounds and the ratios to
// them. See docs/bench.md, "The tail".

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Deployments of the tickcast peers (--deploy).
const (
	deployEmbedded = "embedded" // the feed handler's embedded NATS server: tickcast-MODE
	deployExternal = "external" // a nats-server process, --nats-url on both programs: tickcast-ext-MODE
	// deploySHM: the embedded NATS server, and the packets through the
	// feed handler's shared-memory rings (feedhandler --shm, subscriber
	// --transport shm): tickcast-shm-MODE.
	deploySHM = "shm"
)

// shmInfix marks the peers of the shm deployment.
const shmInfix = "shm-"

// Phases of a run: the whole of it, its first second (from the first
// message received) and the rest.
const (
	phaseWhole  = "whole"
	phaseFirst  = "first second"
	phaseSteady = "steady"
)

// liveGrace is how long a live subscriber may take to finish after the
// multicast subscriber did before it is told to stop.
const liveGrace = 5 * time.Second

// tickcastPeer is the name of a tickcast or baseline peer (prefix) in mode
// and deployment.
func tickcastPeer(prefix, deploy string, mode string) string {
	switch deploy {
	case deployExternal:
		return prefix + externalInfix + mode
	case deploySHM:
		return prefix + shmInfix + mode
	}
	return prefix + mode
}

// freeTCPAddr returns 127.0.0.1:PORT with a TCP port nothing listens on
// right now, for an embedded NATS server whose address must be known
// before it starts.
func freeTCPAddr() (string, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	l.Close()
	return addr, nil
}

// liveRun is what the live NATS subscriber (--live-sub) received.
type liveRun struct {
	Received   uint64   `json:"received"`
	Missing    uint64   `json:"missing"` // published but not received (joined late, or lost)
	ExitReason string   `json:"exit_reason,omitempty"`
	Lat        latStats `json:"latency"` // send stamp to release, as the multicast subscriber's
	Err        string   `json:"error,omitempty"`
}

// liveSubArgs are the live subscriber's arguments: the live NATS subjects
// of the run's channels on the server of ns, no recovery (what it misses,
// such as the start when it joins the embedded server late, shows as
// missing instead of loading the feed handler) and no expectation: it ends
// with the end of session, or is stopped.
func liveSubArgs(a runArgs, ns natsSide) []string {
	url := ns.url
	if url == "" {
		url = "nats://" + ns.listen
	}
	return []string{"--transport", "nats", "--nats-url", url, "--channels", strconv.Itoa(a.channels),
		"--idle-timeout", subIdleTimeout.String(), "--format", "none", "--log-format", "json", "--log-level", "info",
		"--recovery=false", "--metrics-addr="}
}

// startLiveSub starts the live subscriber and waits until it subscribed.
// With an external server that is before the feed handler starts; with the
// embedded one it connects once the feed handler's server is up (within
// the NATS client's reconnect wait, 250 ms), so it misses the start.
func startLiveSub(ctx context.Context, env latEnv, a runArgs, ns natsSide) (*proc, error) {
	return startReady(ctx, "live-sub", env.timeout, []string{env.subscriber}, liveSubArgs(a, ns), `"message":"subscribed"`, 10*time.Second)
}

// finishLiveSub waits for the live subscriber to end (it stops at the end
// of session), stops it after liveGrace, and reads its summary.
func finishLiveSub(p *proc, published uint64) *liveRun {
	select {
	case <-p.done:
	case <-time.After(liveGrace):
		p.terminate()
	}
	lr := &liveRun{}
	var ss subLatSummary
	if _, err := p.summary(&ss); err != nil {
		lr.Err = err.Error()
		return lr
	}
	lr.Received, lr.ExitReason, lr.Lat = ss.Received, ss.ExitReason, ss.latStats
	if ss.Received < published {
		lr.Missing = published - ss.Received
	}
	return lr
}

// subSplit is the subscriber summary's latency_first_* and latency_steady_*
// (LatencySplit in internal/subapp). FirstCount is nil when the summary
// lacks the keys: a subscriber older than the split.
type subSplit struct {
	FirstCount   *int64  `json:"latency_first_count"`
	FirstP50Us   float64 `json:"latency_first_p50_us"`
	FirstP90Us   float64 `json:"latency_first_p90_us"`
	FirstP99Us   float64 `json:"latency_first_p99_us"`
	FirstP999Us  float64 `json:"latency_first_p999_us"`
	FirstMaxUs   float64 `json:"latency_first_max_us"`
	SteadyCount  int64   `json:"latency_steady_count"`
	SteadyP50Us  float64 `json:"latency_steady_p50_us"`
	SteadyP90Us  float64 `json:"latency_steady_p90_us"`
	SteadyP99Us  float64 `json:"latency_steady_p99_us"`
	SteadyP999Us float64 `json:"latency_steady_p999_us"`
	SteadyMaxUs  float64 `json:"latency_steady_max_us"`
}

// stats returns the two phases, or nil and nil when the subscriber did not
// report them.
func (s subSplit) stats() (first, steady *latStats) {
	if s.FirstCount == nil {
		return nil, nil
	}
	return &latStats{Count: *s.FirstCount, P50Us: s.FirstP50Us, P90Us: s.FirstP90Us, P99Us: s.FirstP99Us, P999Us: s.FirstP999Us, MaxUs: s.FirstMaxUs},
		&latStats{Count: s.SteadyCount, P50Us: s.SteadyP50Us, P90Us: s.SteadyP90Us, P99Us: s.SteadyP99Us, P999Us: s.SteadyP999Us, MaxUs: s.SteadyMaxUs}
}

// phaseOf returns a run's latency in phase, or false when the run has no
// split (or no message in that phase).
func phaseOf(r latRun, phase string) (latStats, bool) {
	switch phase {
	case phaseFirst:
		if r.First != nil {
			return *r.First, r.First.Count > 0
		}
	case phaseSteady:
		if r.Steady != nil {
			return *r.Steady, r.Steady.Count > 0
		}
	default:
		return r.Lat, true
	}
	return latStats{}, false
}

// phaseStat is one phase of a peer's runs at one rate and channel count,
// over the rounds.
type phaseStat struct {
	Count stat `json:"count"`
	P50   stat `json:"p50_us"`
	P99   stat `json:"p99_us"`
	P999  stat `json:"p999_us"`
	Max   stat `json:"max_us"`
}

// summarizePhase summarizes phase over the runs that have it; nil when
// none has.
func summarizePhase(runs []latRun, phase string) *phaseStat {
	var ls []latStats
	for _, r := range runs {
		if s, ok := phaseOf(r, phase); ok {
			ls = append(ls, s)
		}
	}
	if len(ls) == 0 {
		return nil
	}
	col := func(f func(latStats) float64) stat { return summarize(mapSlice(ls, f)) }
	return &phaseStat{Count: col(func(s latStats) float64 { return float64(s.Count) }), P50: col(func(s latStats) float64 { return s.P50Us }),
		P99: col(func(s latStats) float64 { return s.P99Us }), P999: col(func(s latStats) float64 { return s.P999Us }),
		Max: col(func(s latStats) float64 { return s.MaxUs })}
}

// liveSummary is the live NATS subscriber of a peer's runs over the rounds.
type liveSummary struct {
	Runs     int  `json:"runs"`
	Failed   int  `json:"failed"`
	Received stat `json:"received"`
	P50      stat `json:"p50_us"`
	P99      stat `json:"p99_us"`
}

// summarizeLive summarizes the live subscribers of runs; nil when there
// were none.
func summarizeLive(runs []latRun) *liveSummary {
	var ok []liveRun
	ls := &liveSummary{}
	for _, r := range runs {
		if r.Live == nil {
			continue
		}
		ls.Runs++
		if r.Live.Err != "" {
			ls.Failed++
			continue
		}
		ok = append(ok, *r.Live)
	}
	if ls.Runs == 0 {
		return nil
	}
	ls.Received = summarize(mapSlice(ok, func(l liveRun) float64 { return float64(l.Received) }))
	ls.P50 = summarize(mapSlice(ok, func(l liveRun) float64 { return l.Lat.P50Us }))
	ls.P99 = summarize(mapSlice(ok, func(l liveRun) float64 { return l.Lat.P99Us }))
	return ls
}

// tailRatio is a peer's latency in one phase over the floor's in the same
// phase of the same round (the floor of the peer's receive class),
// summarized over the rounds.
type tailRatio struct {
	Channels int     `json:"channels"`
	Rate     float64 `json:"rate"`
	Peer     string  `json:"peer"`
	Floor    string  `json:"floor"`
	Phase    string  `json:"phase"`
	P50      stat    `json:"p50_vs_floor"`
	P99      stat    `json:"p99_vs_floor"`
	P999     stat    `json:"p999_vs_floor"`
	Max      stat    `json:"max_vs_floor"`
}

// floorOf is the floor peer a run is compared with.
func floorOf(class string) string {
	if class == classBusy {
		return peerFloorBusy
	}
	return peerFloorBlocking
}

// tailRatios compares every peer that is not a floor (tickcast and
// baseline in both deployments, NATS) with the floor of its class in the
// same round, rate and channel count, in each phase both runs have.
func tailRatios(runs []latRun) []tailRatio {
	by := byRound(runs)
	type key struct {
		channels int
		rate     float64
		peer     string
		phase    string
	}
	acc := map[key]*[4][]float64{}
	var order []key
	for _, r := range runs {
		if r.Err != "" || r.Probe || r.Peer == peerFloorBlocking || r.Peer == peerFloorBusy {
			continue
		}
		f, ok := by[roundKey{r.Round, r.Channels, r.Rate, floorOf(r.Class)}]
		if !ok {
			continue
		}
		for _, ph := range []string{phaseWhole, phaseFirst, phaseSteady} {
			x, ok1 := phaseOf(r, ph)
			y, ok2 := phaseOf(f, ph)
			if !ok1 || !ok2 {
				continue
			}
			k := key{r.Channels, r.Rate, r.Peer, ph}
			a, seen := acc[k]
			if !seen {
				a = &[4][]float64{}
				acc[k] = a
				order = append(order, k)
			}
			for i, q := range [4][2]float64{{x.P50Us, y.P50Us}, {x.P99Us, y.P99Us}, {x.P999Us, y.P999Us}, {x.MaxUs, y.MaxUs}} {
				if q[1] > 0 {
					a[i] = append(a[i], q[0]/q[1])
				}
			}
		}
	}
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.channels, b.channels), cmp.Compare(a.rate, b.rate), cmp.Compare(peerOrder(a.peer), peerOrder(b.peer)),
			cmp.Compare(phaseOrder(a.phase), phaseOrder(b.phase)))
	})
	var out []tailRatio
	for _, k := range order {
		a := acc[k]
		class := classBlocking
		if k.peer != peerNATS {
			class = classOf(peerMode(k.peer))
		}
		out = append(out, tailRatio{Channels: k.channels, Rate: k.rate, Peer: k.peer, Floor: floorOf(class), Phase: k.phase,
			P50: summarize(a[0]), P99: summarize(a[1]), P999: summarize(a[2]), Max: summarize(a[3])})
	}
	return out
}

// peerMode is the subscriber mode in a tickcast or baseline peer's name.
func peerMode(peer string) string {
	for _, p := range []string{tickcastPrefix, baselinePrefix} {
		if m, ok := strings.CutPrefix(peer, p); ok {
			m = strings.TrimPrefix(m, externalInfix)
			if rest, ok := strings.CutPrefix(m, "shm"); ok {
				// shm-MODE, or shmK-MODE for K local subscribers
				if _, after, ok := strings.Cut(strings.TrimLeft(rest, "0123456789"), "-"); ok {
					return after
				}
			}
			return m
		}
	}
	return peer
}

func phaseOrder(p string) int {
	return map[string]int{phaseWhole: 0, phaseFirst: 1, phaseSteady: 2}[p]
}

// tailTables returns, per channel count, the table of every peer's
// percentiles in each phase beside the floor's and the ratios to them.
func (r *latResult) tailTables() []table {
	byKey := map[string]tailRatio{}
	for _, x := range r.TailRatios {
		byKey[fmt.Sprint(x.Channels, rateName(x.Rate), x.Peer, x.Phase)] = x
	}
	var out []table
	for _, ch := range r.Channels {
		t := table{title: fmt.Sprintf("Tail, %d channel(s): the whole run, its first second (from the first message received) and the steady state "+
			"(the rest); µs, median [min–max] over the rounds; ÷ floor: per-round ratio to the floor of the same receive class, median", ch),
			head: []string{"rate", "peer", "phase", "msgs", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "p50 ÷ floor", "p99 ÷ floor", "p99.9 ÷ floor", "max ÷ floor"}}
		for _, s := range r.Summary {
			if s.Channels != ch || s.Probe {
				continue
			}
			phases := []struct {
				name string
				ps   *phaseStat
			}{{phaseWhole, &phaseStat{Count: s.Delivered, P50: s.P50, P99: s.P99, P999: s.P999, Max: s.Max}}, {phaseFirst, s.First}, {phaseSteady, s.Steady}}
			for i, p := range phases {
				if p.ps == nil {
					continue
				}
				peer, name := "", p.name
				if i == 0 {
					peer = s.Peer
					if s.First == nil && s.Steady == nil {
						name += " (no split)"
					}
				}
				row := []string{rateName(s.Rate), peer, name, medRange(p.ps.Count, count), medRange(p.ps.P50, us), medRange(p.ps.P99, us),
					medRange(p.ps.P999, us), medRange(p.ps.Max, us), "", "", "", ""}
				if x, ok := byKey[fmt.Sprint(ch, rateName(s.Rate), s.Peer, p.name)]; ok {
					row[8], row[9], row[10], row[11] = medRange(x.P50, ratio), medRange(x.P99, ratio), medRange(x.P999, ratio), medRange(x.Max, ratio)
				}
				t.rows = append(t.rows, row)
			}
		}
		if len(t.rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// splitCheck returns what is wrong with a successful run's split in a
// --quick run: a peer of this tree (not a baseline) without it, phases
// that do not add up to the whole run, no steady state (the quick runs
// last 1.5 s), and a live subscriber that failed or received nothing.
func splitCheck(run latRun, where string) []string {
	var bad []string
	switch {
	case run.First == nil || run.Steady == nil:
		if !strings.HasPrefix(run.Peer, baselinePrefix) {
			bad = append(bad, where+": no first-second/steady split")
		}
	case run.First.Count+run.Steady.Count != run.Lat.Count:
		bad = append(bad, fmt.Sprintf("%s: first second %d + steady %d latencies, whole run %d", where, run.First.Count, run.Steady.Count, run.Lat.Count))
	case run.Steady.Count == 0:
		bad = append(bad, where+": no steady state (the run lasted under a second after its first message)")
	}
	if l := run.Live; l != nil && (l.Err != "" || l.Received == 0) {
		bad = append(bad, fmt.Sprintf("%s: live subscriber received %d: %s", where, l.Received, firstLine(l.Err)))
	}
	return bad
}

// splitNotes names the tickcast and baseline peers whose subscriber did not
// report the first-second and steady-state split (an older revision): the
// tail table shows their whole run only.
func splitNotes(runs []latRun) []string {
	var peers []string
	for _, r := range runs {
		if r.Err == "" && r.Deploy != "" && r.First == nil {
			peers = append(peers, r.Peer)
		}
	}
	var notes []string
	for _, p := range distinct(peers) {
		notes = append(notes, fmt.Sprintf("%s: the subscriber reports no first-second/steady split (it predates latency_first_*); whole run only", p))
	}
	return notes
}

// tailDuration is the --tail preset's length of a run.
const tailDuration = 30 * time.Second

// parseTail parses --deploy and --floors and applies the --tail preset to
// the flags the command line did not set (set): the floors, the duration,
// no ping-pong or fan-out, and a --timeout that fits the runs. parse
// applies the rest of it (rates, modes, no search).
func (ls *latSettings) parseTail(deploy, floors string, set map[string]bool) error {
	var err error
	if ls.tail && ls.quick {
		return fmt.Errorf("--tail with --quick: the preset and the smoke test exclude each other")
	}
	if ls.deploys, err = parseChoices("deploy", deploy, deployEmbedded, deployExternal, deploySHM); err != nil {
		return err
	}
	if ls.floors, err = parseChoices("floors", floors, "blocking", "busy-poll"); err != nil {
		return err
	}
	if !ls.tail {
		return nil
	}
	if !set["floors"] {
		ls.floors = []string{"blocking"}
	}
	if !set["duration"] {
		ls.duration = tailDuration
	}
	if !set["pingpong"] {
		ls.pingpong = false
	}
	if !set["fanout"] {
		ls.fanout = false
	}
	if !set["timeout"] {
		// A run's children live for the run and their start and end.
		ls.timeout = max(30*time.Second, 2*ls.duration+30*time.Second)
	}
	return nil
}

// parseChoices parses a comma-separated list of some of choices, in the
// order of choices.
func parseChoices(name, s string, choices ...string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(choices, f) {
			return nil, fmt.Errorf("--%s %q: want %s, comma separated", name, s, strings.Join(choices, " or "))
		}
		out = append(out, f)
	}
	var ordered []string
	for _, c := range choices {
		if slices.Contains(out, c) {
			ordered = append(ordered, c)
		}
	}
	return ordered, nil
}
