package main

// The latency mode's result: the runs, their medians and spreads per peer
// and rate, the ratios, the rate search, ping-pong and fan-out; printed as
// a table or as the Markdown of BENCHMARKS.md.

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// machine describes the host a result was measured on.
type machine struct {
	CPUs     int    `json:"nproc"`
	CPUModel string `json:"cpu_model"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// thisMachine reads the host's description.
func thisMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUModel: "unknown", Kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}

// latResult is everything one latency-mode run measured; --json prints it.
type latResult struct {
	Date        string    `json:"date"`
	Machine     machine   `json:"machine"`
	Command     string    `json:"command"`
	Quick       bool      `json:"quick"`
	Rates       []float64 `json:"rates"`
	SearchRates []float64 `json:"search_rates,omitempty"`
	Rounds      int       `json:"rounds"`
	Channels    []int     `json:"channels"`
	Modes       []string  `json:"modes"`
	Baseline    string    `json:"baseline,omitempty"` // git revision of the baseline-MODE peers
	Deploys     []string  `json:"deploys"`            // embedded (tickcast-MODE), external (tickcast-ext-MODE)
	Floors      []string  `json:"floors"`             // the floor's receive modes
	LiveSub     bool      `json:"live_sub"`           // a live NATS subscriber ran beside each tickcast subscriber
	Tail        bool      `json:"tail,omitempty"`     // the --tail preset
	Size        int       `json:"size"`               // payload bytes per datagram / NATS message
	Notes       []string  `json:"notes,omitempty"`

	Runs     []latRun `json:"runs"`
	PingPong []ppRun  `json:"pingpong,omitempty"`
	Fanout   []fanRun `json:"fanout,omitempty"`

	Summary         []peerSummary `json:"summary"`
	Ratios          []ratioStat   `json:"ratios"`
	TailRatios      []tailRatio   `json:"tail_ratios"`
	Search          []searchStat  `json:"search,omitempty"`
	PingPongSummary []ppSummary   `json:"pingpong_summary,omitempty"`
	FanoutSummary   []fanSummary  `json:"fanout_summary,omitempty"`
	Plots           []string      `json:"plots,omitempty"`
}

func newLatResult(s latSettings) *latResult {
	r := &latResult{Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Machine: thisMachine(), Command: "go run ./cmd/tickbench " + strings.Join(os.Args[1:], " "),
		Quick: s.quick, Rates: s.rates, SearchRates: s.searchRates, Rounds: s.rounds, Channels: s.channels,
		Deploys: s.deploys, Floors: s.floors, LiveSub: s.liveSub, Tail: s.tail}
	r.Command = strings.TrimSpace(r.Command)
	return r
}

// namedStat is a stat with a name (a process's CPU per message).
type namedStat struct {
	Name string `json:"name"`
	stat
}

// peerSummary is one peer at one rate and channel count over the rounds.
type peerSummary struct {
	Channels int     `json:"channels"`
	Rate     float64 `json:"rate"`
	Probe    bool    `json:"probe,omitempty"`
	Peer     string  `json:"peer"`
	Class    string  `json:"class"`
	Runs     int     `json:"runs"`
	Failed   int     `json:"failed"`
	P50      stat    `json:"p50_us"`
	P90      stat    `json:"p90_us"`
	P99      stat    `json:"p99_us"`
	P999     stat    `json:"p999_us"`
	Max      stat    `json:"max_us"`
	TickP50  *stat   `json:"tick_p50_us,omitempty"`
	TickP99  *stat   `json:"tick_p99_us,omitempty"`
	// First and Steady are the first second and the steady state of the
	// runs that report them (nil when none does: an older subscriber).
	First     *phaseStat   `json:"first_second,omitempty"`
	Steady    *phaseStat   `json:"steady,omitempty"`
	Live      *liveSummary `json:"live_sub,omitempty"`
	Sent      stat         `json:"sent"`
	Delivered stat         `json:"delivered"`
	Lost      stat         `json:"lost"`
	Achieved  stat         `json:"achieved_rate"`
	CPU       []namedStat  `json:"cpu_us_per_msg"`
	// Hgrm is the histogram file of the round whose p50 is the median
	// one (the lower middle of an even count).
	Hgrm string `json:"hgrm,omitempty"`
}

// ratioStat is one tickcast mode against the floor of its class and
// against NATS, per round, summarized.
type ratioStat struct {
	Channels int     `json:"channels"`
	Rate     float64 `json:"rate"`
	Peer     string  `json:"peer"`
	Floor    string  `json:"floor"`
	P50Floor stat    `json:"p50_vs_floor"`
	P99Floor stat    `json:"p99_vs_floor"`
	P50NATS  stat    `json:"p50_vs_nats"`
	P99NATS  stat    `json:"p99_vs_nats"`
}

// searchStat is the outcome of the floor's rate search.
type searchStat struct {
	Channels int     `json:"channels"`
	Peer     string  `json:"peer"`
	Highest  float64 `json:"highest_rate_under_100us_p50"` // 0: none of the probed rates
	// FirstOver is the lowest rate probed whose median p50 was 100 µs or
	// more (0: none).
	FirstOver float64 `json:"first_rate_over"`
	// Achieved is the median delivered rate at Highest.
	Achieved float64 `json:"achieved_rate"`
}

// ppSummary is one transport's ping-pong over the rounds.
type ppSummary struct {
	Transport string `json:"transport"`
	Runs      int    `json:"runs"`
	Failed    int    `json:"failed"`
	RTTP50    stat   `json:"rtt_p50_us"`
	RTTP99    stat   `json:"rtt_p99_us"`
	HalfP50   stat   `json:"half_rtt_p50_us"`
	HalfP99   stat   `json:"half_rtt_p99_us"`
	Lost      stat   `json:"lost"` // pings without an answer
}

// fanSummary is one peer with a number of subscribers over the rounds.
type fanSummary struct {
	Peer   string `json:"peer"`
	Subs   int    `json:"subs"`
	Runs   int    `json:"runs"`
	Failed int    `json:"failed"`
	PerSub stat   `json:"ticks_per_s_per_sub"` // the median subscriber of each round
	MinSub stat   `json:"ticks_per_s_slowest_sub"`
	Lost   stat   `json:"lost"`
}

type peerKey struct {
	channels int
	rate     float64
	peer     string
	probe    bool
}

// summarize fills the summaries from the runs.
func (r *latResult) summarize() {
	groups := map[peerKey][]latRun{}
	var keys []peerKey
	for _, run := range r.Runs {
		k := peerKey{run.Channels, run.Rate, run.Peer, run.Probe}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], run)
	}
	slices.SortStableFunc(keys, func(a, b peerKey) int {
		return cmp.Or(cmp.Compare(a.channels, b.channels), boolCmp(a.probe, b.probe), cmp.Compare(a.rate, b.rate), cmp.Compare(peerOrder(a.peer), peerOrder(b.peer)))
	})
	r.Summary = nil
	for _, k := range keys {
		r.Summary = append(r.Summary, summarizePeer(k, groups[k]))
	}
	r.Ratios = ratios(r.Runs)
	r.TailRatios = tailRatios(r.Runs)
	r.Search = search(r.Summary)
	r.PingPongSummary = summarizePingPong(r.PingPong)
	r.FanoutSummary = summarizeFanout(r.Fanout)
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// peerOrder orders peers: floors, tickcast modes, NATS.
func peerOrder(p string) int {
	switch {
	case p == peerFloorBlocking:
		return 0
	case p == peerFloorBusy:
		return 1
	case p == peerNATS:
		return 100
	}
	for i, m := range []string{"blocking", "busy-poll", "direct", "direct-spin"} {
		switch p {
		case tickcastPrefix + m:
			return 10 + i
		case tickcastPrefix + externalInfix + m:
			return 15 + i
		case tickcastPrefix + shmInfix + m:
			return 30 + i
		case baselinePrefix + m:
			return 20 + i
		case baselinePrefix + externalInfix + m:
			return 25 + i
		}
	}
	return 50
}

func summarizePeer(k peerKey, runs []latRun) peerSummary {
	ps := peerSummary{Channels: k.channels, Rate: k.rate, Probe: k.probe, Peer: k.peer, Runs: len(runs)}
	var ok []latRun
	for _, r := range runs {
		ps.Class = r.Class
		if r.Err != "" {
			ps.Failed++
			continue
		}
		ok = append(ok, r)
	}
	col := func(f func(r latRun) float64) stat {
		var xs []float64
		for _, r := range ok {
			xs = append(xs, f(r))
		}
		return summarize(xs)
	}
	ps.P50 = col(func(r latRun) float64 { return r.Lat.P50Us })
	ps.P90 = col(func(r latRun) float64 { return r.Lat.P90Us })
	ps.P99 = col(func(r latRun) float64 { return r.Lat.P99Us })
	ps.P999 = col(func(r latRun) float64 { return r.Lat.P999Us })
	ps.Max = col(func(r latRun) float64 { return r.Lat.MaxUs })
	ps.Sent = col(func(r latRun) float64 { return float64(r.Sent) })
	ps.Delivered = col(func(r latRun) float64 { return float64(r.Delivered) })
	ps.Lost = col(func(r latRun) float64 { return float64(r.Lost) })
	ps.Achieved = col(func(r latRun) float64 { return r.Achieved })
	if len(ok) > 0 && ok[0].Tick != nil {
		t50 := col(func(r latRun) float64 { return tickOr0(r).P50Us })
		t99 := col(func(r latRun) float64 { return tickOr0(r).P99Us })
		ps.TickP50, ps.TickP99 = &t50, &t99
	}
	ps.First, ps.Steady = summarizePhase(ok, phaseFirst), summarizePhase(ok, phaseSteady)
	ps.Live = summarizeLive(runs)
	var names []string
	for _, r := range ok {
		for _, p := range r.Procs {
			names = append(names, p.Name)
		}
	}
	for _, n := range distinct(names) {
		ps.CPU = append(ps.CPU, namedStat{n, col(func(r latRun) float64 {
			for _, p := range r.Procs {
				if p.Name == n {
					return p.UsPerMsg
				}
			}
			return 0
		})})
	}
	if len(ok) > 0 {
		s := slices.Clone(ok)
		slices.SortStableFunc(s, func(a, b latRun) int { return cmp.Compare(a.Lat.P50Us, b.Lat.P50Us) })
		ps.Hgrm = s[(len(s)-1)/2].Hgrm
	}
	return ps
}

func tickOr0(r latRun) latStats {
	if r.Tick == nil {
		return latStats{}
	}
	return *r.Tick
}

// roundKey names one run: a peer's run at a rate and channel count in a
// round.
type roundKey struct {
	round, channels int
	rate            float64
	peer            string
}

// byRound indexes the runs that completed (no error, not a search probe)
// by roundKey.
func byRound(runs []latRun) map[roundKey]latRun {
	by := map[roundKey]latRun{}
	for _, r := range runs {
		if r.Err == "" && !r.Probe {
			by[roundKey{r.Round, r.Channels, r.Rate, r.Peer}] = r
		}
	}
	return by
}

// ratios compares, per round, each tickcast mode with the floor of its
// class and with NATS at the same rate and channel count.
func ratios(runs []latRun) []ratioStat {
	by := byRound(runs)
	type rk struct {
		channels int
		rate     float64
		peer     string
	}
	acc := map[rk]*[4][]float64{}
	var order []rk
	for _, r := range runs {
		if r.Err != "" || r.Probe || !(strings.HasPrefix(r.Peer, tickcastPrefix) || strings.HasPrefix(r.Peer, baselinePrefix)) {
			continue
		}
		k := rk{r.Channels, r.Rate, r.Peer}
		a, ok := acc[k]
		if !ok {
			a = &[4][]float64{}
			acc[k] = a
			order = append(order, k)
		}
		floor := peerFloorBlocking
		if r.Class == classBusy {
			floor = peerFloorBusy
		}
		div := func(x, y float64) (float64, bool) { return x / y, y > 0 }
		if f, ok := by[roundKey{r.Round, r.Channels, r.Rate, floor}]; ok {
			if v, ok := div(r.Lat.P50Us, f.Lat.P50Us); ok {
				a[0] = append(a[0], v)
			}
			if v, ok := div(r.Lat.P99Us, f.Lat.P99Us); ok {
				a[1] = append(a[1], v)
			}
		}
		if n, ok := by[roundKey{r.Round, r.Channels, r.Rate, peerNATS}]; ok {
			if v, ok := div(r.Lat.P50Us, n.Lat.P50Us); ok {
				a[2] = append(a[2], v)
			}
			if v, ok := div(r.Lat.P99Us, n.Lat.P99Us); ok {
				a[3] = append(a[3], v)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b rk) int {
		return cmp.Or(cmp.Compare(a.channels, b.channels), cmp.Compare(a.rate, b.rate), cmp.Compare(peerOrder(a.peer), peerOrder(b.peer)))
	})
	var out []ratioStat
	for _, k := range order {
		a := acc[k]
		floor := peerFloorBlocking
		if classOf(peerMode(k.peer)) == classBusy {
			floor = peerFloorBusy
		}
		out = append(out, ratioStat{Channels: k.channels, Rate: k.rate, Peer: k.peer, Floor: floor,
			P50Floor: summarize(a[0]), P99Floor: summarize(a[1]), P50NATS: summarize(a[2]), P99NATS: summarize(a[3])})
	}
	return out
}

// search finds, per channel count and floor peer, the highest measured rate
// (probes and regular rates alike) whose median p50 stayed under 100 µs.
func search(sum []peerSummary) []searchStat {
	type k struct {
		channels int
		peer     string
	}
	var order []k
	by := map[k][]peerSummary{}
	probed := map[k]bool{}
	for _, s := range sum {
		if s.Peer != peerFloorBlocking && s.Peer != peerFloorBusy || s.P50.N == 0 {
			continue
		}
		key := k{s.Channels, s.Peer}
		if _, ok := by[key]; !ok {
			order = append(order, key)
		}
		by[key] = append(by[key], s)
		probed[key] = probed[key] || s.Probe
	}
	var out []searchStat
	for _, key := range order {
		if !probed[key] {
			continue
		}
		ss := by[key]
		slices.SortStableFunc(ss, func(a, b peerSummary) int { return cmp.Compare(a.Rate, b.Rate) })
		st := searchStat{Channels: key.channels, Peer: key.peer}
		for _, s := range ss {
			if s.P50.Median < probeLimitUs {
				if st.FirstOver == 0 {
					st.Highest, st.Achieved = s.Rate, s.Achieved.Median
				}
			} else if st.FirstOver == 0 {
				st.FirstOver = s.Rate
			}
		}
		out = append(out, st)
	}
	return out
}

func summarizePingPong(runs []ppRun) []ppSummary {
	var out []ppSummary
	for _, t := range distinct(mapSlice(runs, func(r ppRun) string { return r.Transport })) {
		s := ppSummary{Transport: t}
		var ok []ppRun
		for _, r := range runs {
			if r.Transport != t {
				continue
			}
			s.Runs++
			if r.Err != "" {
				s.Failed++
				continue
			}
			ok = append(ok, r)
		}
		col := func(f func(r ppRun) float64) stat { return summarize(mapSlice(ok, f)) }
		s.RTTP50 = col(func(r ppRun) float64 { return r.RTT.P50Us })
		s.RTTP99 = col(func(r ppRun) float64 { return r.RTT.P99Us })
		s.HalfP50 = col(func(r ppRun) float64 { return r.HalfRTT.P50Us })
		s.HalfP99 = col(func(r ppRun) float64 { return r.HalfRTT.P99Us })
		s.Lost = col(func(r ppRun) float64 { return float64(r.Pings - r.Pongs) })
		out = append(out, s)
	}
	return out
}

func summarizeFanout(runs []fanRun) []fanSummary {
	type k struct {
		peer string
		subs int
	}
	var out []fanSummary
	for _, key := range distinct(mapSlice(runs, func(r fanRun) k { return k{r.Peer, r.Subs} })) {
		s := fanSummary{Peer: key.peer, Subs: key.subs}
		var ok []fanRun
		for _, r := range runs {
			if r.Peer != key.peer || r.Subs != key.subs {
				continue
			}
			s.Runs++
			if r.Err != "" {
				s.Failed++
				continue
			}
			ok = append(ok, r)
		}
		s.PerSub = summarize(mapSlice(ok, func(r fanRun) float64 { return r.PerSubMedian }))
		s.MinSub = summarize(mapSlice(ok, func(r fanRun) float64 { return r.PerSubMin }))
		s.Lost = summarize(mapSlice(ok, func(r fanRun) float64 { return float64(r.Lost) }))
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b fanSummary) int { return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Subs, b.Subs)) })
	return out
}

func mapSlice[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// quickCheck returns what a --quick run must not have: a failed run, a
// message sent but not delivered, a split that does not add up or lacks a
// steady state, a live subscriber that failed or received nothing, a ping
// without its answer, a fan-out subscriber that missed messages, a
// histogram file that does not parse.
func quickCheck(r *latResult) []string {
	var bad []string
	for _, run := range r.Runs {
		where := fmt.Sprintf("round %d, %d channel(s), %s msg/s, %s", run.Round, run.Channels, rateName(run.Rate), run.Peer)
		switch {
		case run.Err != "":
			bad = append(bad, where+": "+firstLine(run.Err))
		case run.Sent == 0 || run.Delivered != run.Sent || run.Lost != 0:
			bad = append(bad, fmt.Sprintf("%s: sent %d, delivered %d, lost %d", where, run.Sent, run.Delivered, run.Lost))
		case run.Lat.Count != int64(run.Delivered):
			bad = append(bad, fmt.Sprintf("%s: %d latencies recorded for %d messages", where, run.Lat.Count, run.Delivered))
		}
		if run.Err == "" {
			bad = append(bad, splitCheck(run, where)...)
		}
		if run.Hgrm != "" && run.Err == "" {
			if pts, err := readHgrm(run.Hgrm); err != nil {
				bad = append(bad, where+": "+err.Error())
			} else if last := pts[len(pts)-1]; last.Count != int64(run.Delivered) {
				bad = append(bad, fmt.Sprintf("%s: %s counts %d messages, the run delivered %d", where, run.Hgrm, last.Count, run.Delivered))
			}
		}
	}
	for _, p := range r.PingPong {
		switch {
		case p.Err != "":
			bad = append(bad, fmt.Sprintf("ping-pong %s: %s", p.Transport, firstLine(p.Err)))
		case p.Pings == 0 || p.Pongs != p.Pings:
			bad = append(bad, fmt.Sprintf("ping-pong %s: %d pings, %d answers", p.Transport, p.Pings, p.Pongs))
		}
	}
	for _, f := range r.Fanout {
		if f.Err != "" {
			bad = append(bad, fmt.Sprintf("fan-out %s×%d: %s", f.Peer, f.Subs, firstLine(f.Err)))
		} else if f.Sent == 0 || f.Lost != 0 || len(f.Received) != f.Subs {
			bad = append(bad, fmt.Sprintf("fan-out %s×%d: sent %d, received %v", f.Peer, f.Subs, f.Sent, f.Received))
		}
	}
	return bad
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// medRange formats a stat as "median [min–max]" with format f.
func medRange(s stat, f func(float64) string) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 || s.Min == s.Max {
		return f(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", f(s.Median), f(s.Min), f(s.Max))
}

func us(x float64) string {
	switch {
	case x >= 1000:
		return thousands(x)
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

func ratio(x float64) string { return fmt.Sprintf("%.2f", x) }
func count(x float64) string { return thousands(x) }

// cpuText is the CPU per message of every process of a peer.
func cpuText(cs []namedStat) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %s", c.Name, us(c.Median)))
	}
	return strings.Join(parts, " + ")
}

// table is a report table: a header and rows of cells.
type table struct {
	title string
	head  []string
	rows  [][]string
}

// tables returns the report's tables, shared by the text and the Markdown
// output.
func (r *latResult) tables() []table {
	out := append(r.latencyTables(), r.tailTables()...)
	for _, mk := range []func() (table, bool){r.ratioTable, r.searchTable, r.pingPongTable, r.fanoutTable} {
		if t, ok := mk(); ok {
			out = append(out, t)
		}
	}
	return out
}

// latencyTables returns a latency table and a floor rate search table per
// channel count, each if it has rows.
func (r *latResult) latencyTables() []table {
	var out []table
	for _, ch := range r.Channels {
		for _, probe := range []bool{false, true} {
			t := table{head: []string{"rate", "peer", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "sent", "delivered", "lost", "CPU µs/msg"}}
			t.title = fmt.Sprintf("Latency, %d channel(s): send stamp → receipt (floor, NATS) or release to the handler (tickcast); median [min–max] over the rounds", ch)
			if probe {
				t.title = fmt.Sprintf("Floor rate search, %d channel(s): highest rate with p50 under %d µs", ch, probeLimitUs)
				t.head = []string{"rate", "peer", "p50 µs", "p99 µs", "achieved msg/s", "lost", "CPU µs/msg"}
			}
			for _, s := range r.Summary {
				if s.Channels != ch || s.Probe != probe {
					continue
				}
				fail := ""
				if s.Failed > 0 {
					fail = fmt.Sprintf(" (%d of %d runs failed)", s.Failed, s.Runs)
				}
				if probe {
					t.rows = append(t.rows, []string{rateName(s.Rate), s.Peer + fail, medRange(s.P50, us), medRange(s.P99, us),
						count(s.Achieved.Median), medRange(s.Lost, count), cpuText(s.CPU)})
					continue
				}
				t.rows = append(t.rows, []string{rateName(s.Rate), s.Peer + fail, medRange(s.P50, us), medRange(s.P90, us), medRange(s.P99, us),
					medRange(s.P999, us), medRange(s.Max, us), count(s.Sent.Median), count(s.Delivered.Median), medRange(s.Lost, count), cpuText(s.CPU)})
				if s.TickP50 != nil {
					t.rows = append(t.rows, []string{"", "  tick-to-handler", medRange(*s.TickP50, us), "", medRange(*s.TickP99, us), "", "", "", "", "", ""})
				}
				if l := s.Live; l != nil {
					name := "  live NATS subscriber"
					if l.Failed > 0 {
						name += fmt.Sprintf(" (%d of %d failed)", l.Failed, l.Runs)
					}
					t.rows = append(t.rows, []string{"", name, medRange(l.P50, us), "", medRange(l.P99, us), "", "", "", medRange(l.Received, count), "", ""})
				}
			}
			if len(t.rows) > 0 {
				out = append(out, t)
			}
		}
	}
	return out
}

// ratioTable is the table of ratios per round, if there are any.
func (r *latResult) ratioTable() (table, bool) {
	if !(len(r.Ratios) > 0) {
		return table{}, false
	}
	t := table{title: "Ratios per round (median [min–max]): tickcast ÷ floor of the same receive class, tickcast ÷ NATS",
		head: []string{"channels", "rate", "tickcast", "floor", "p50 ÷ floor", "p99 ÷ floor", "p50 ÷ NATS", "p99 ÷ NATS"}}
	for _, x := range r.Ratios {
		t.rows = append(t.rows, []string{fmt.Sprint(x.Channels), rateName(x.Rate), x.Peer, x.Floor, medRange(x.P50Floor, ratio),
			medRange(x.P99Floor, ratio), medRange(x.P50NATS, ratio), medRange(x.P99NATS, ratio)})
	}
	return t, true
}

// searchTable is the table of the rate search, if there was one.
func (r *latResult) searchTable() (table, bool) {
	if !(len(r.Search) > 0) {
		return table{}, false
	}
	t := table{title: fmt.Sprintf("Rate search: the highest measured rate at which the floor's median p50 stays under %d µs", probeLimitUs),
		head: []string{"channels", "floor", "highest rate", "achieved msg/s", "first rate over"}}
	for _, x := range r.Search {
		hi, over := "none", "none"
		if x.Highest > 0 {
			hi = rateName(x.Highest)
		}
		if x.FirstOver > 0 {
			over = rateName(x.FirstOver)
		}
		t.rows = append(t.rows, []string{fmt.Sprint(x.Channels), x.Peer, hi, count(x.Achieved), over})
	}
	return t, true
}

// pingPongTable is the table of ping-pong round trips, if there were any.
func (r *latResult) pingPongTable() (table, bool) {
	if !(len(r.PingPongSummary) > 0) {
		return table{}, false
	}
	t := table{title: "Ping-pong round trips (back to back, one in flight); sockperf reports half round trips, shown beside tickbench's halves",
		head: []string{"transport", "RTT p50 µs", "RTT p99 µs", "½ RTT p50 µs", "½ RTT p99 µs", "unanswered"}}
	for _, p := range r.PingPongSummary {
		name := p.Transport
		rtt50, rtt99 := medRange(p.RTTP50, us), medRange(p.RTTP99, us)
		if p.Transport == ppSockperf {
			name, rtt50, rtt99 = "sockperf (UDP, its half RTT)", "", ""
		}
		if p.Failed > 0 {
			name += fmt.Sprintf(" (%d of %d runs failed)", p.Failed, p.Runs)
		}
		t.rows = append(t.rows, []string{name, rtt50, rtt99, medRange(p.HalfP50, us), medRange(p.HalfP99, us), medRange(p.Lost, count)})
	}
	return t, true
}

// fanoutTable is the table of the fan-out ramp, if there was one.
func (r *latResult) fanoutTable() (table, bool) {
	if !(len(r.FanoutSummary) > 0) {
		return table{}, false
	}
	t := table{title: "Fan-out: one unpaced sender, N subscribers, messages received per second per subscriber (median [min–max] over the rounds)",
		head: []string{"peer", "subscribers", "median subscriber msg/s", "slowest subscriber msg/s", "lost (all subscribers)"}}
	for _, f := range r.FanoutSummary {
		name := f.Peer
		if f.Failed > 0 {
			name += fmt.Sprintf(" (%d of %d runs failed)", f.Failed, f.Runs)
		}
		t.rows = append(t.rows, []string{name, fmt.Sprint(f.Subs), medRange(f.PerSub, count), medRange(f.MinSub, count), medRange(f.Lost, count)})
	}
	return t, true
}

// header is the description of the run above the tables.
func (r *latResult) header() []string {
	m := r.Machine
	lines := []string{
		fmt.Sprintf("date       %s", r.Date),
		fmt.Sprintf("machine    %d CPUs, %s, Linux %s, %s %s/%s", m.CPUs, m.CPUModel, m.Kernel, m.Go, m.OS, m.Arch),
		fmt.Sprintf("command    %s", r.Command),
		fmt.Sprintf("rates      %s msg/s paced (package pace), %d round(s), channels %s, payload %d B per datagram or NATS message",
			strings.Join(mapSlice(r.Rates, rateName), ", "), r.Rounds, joinInts(r.Channels), r.Size),
		fmt.Sprintf("tickcast   modes %s%s", strings.Join(r.Modes, ", "), baselineNote(r.Baseline)),
		"deploy     " + deployNote(r.Deploys, r.LiveSub),
	}
	if r.Quick {
		lines = append(lines, "quick      smoke test: low rate, few messages, one round; checks delivery, not speed")
	}
	for _, n := range r.Notes {
		lines = append(lines, "note       "+n)
	}
	return lines
}

// printLatency writes the text report.
func printLatency(w io.Writer, r *latResult) {
	for _, l := range r.header() {
		fmt.Fprintln(w, l)
	}
	for _, t := range r.tables() {
		fmt.Fprintf(w, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.head, "\t")+"\t")
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
	}
	if len(r.Plots) > 0 {
		fmt.Fprintf(w, "\nplots: %s\n", strings.Join(r.Plots, " "))
	}
}

// writeMarkdown writes the report as the Markdown of BENCHMARKS.md.
func writeMarkdown(w io.Writer, r *latResult) {
	fmt.Fprintln(w, "# tickcast benchmarks")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "<!-- Generated by scripts/benchmarks.sh (go run ./cmd/tickbench --markdown BENCHMARKS.md); do not edit by hand. -->")
	fmt.Fprintln(w)
	if r.Quick {
		fmt.Fprintln(w, "> **Placeholder.** These figures come from a `--quick` smoke run (low rate, few messages, one round).")
		fmt.Fprintln(w, "> They show the layout, not tickcast's performance. Regenerate with `scripts/benchmarks.sh`.")
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "How the figures are made and how to read them: [docs/bench.md](docs/bench.md).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "## Run")
	fmt.Fprintln(w)
	m := r.Machine
	fmt.Fprintln(w, "| | |")
	fmt.Fprintln(w, "|---|---|")
	for _, kv := range [][2]string{
		{"date", r.Date}, {"command", "`" + r.Command + "`"}, {"nproc", fmt.Sprint(m.CPUs)}, {"CPU", m.CPUModel},
		{"kernel", "Linux " + m.Kernel}, {"Go", m.Go},
		{"rates", strings.Join(mapSlice(r.Rates, rateName), ", ") + " msg/s, paced"}, {"rounds", fmt.Sprint(r.Rounds)},
		{"channels", joinInts(r.Channels)}, {"tickcast modes", strings.Join(r.Modes, ", ") + baselineNote(r.Baseline)},
		{"NATS deployments", deployNote(r.Deploys, r.LiveSub)},
		{"payload", fmt.Sprintf("%d B (one tickcast message per packet)", r.Size)},
	} {
		fmt.Fprintf(w, "| %s | %s |\n", kv[0], strings.ReplaceAll(kv[1], "|", `\|`))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
	for _, t := range r.tables() {
		fmt.Fprintf(w, "\n### %s\n\n", t.title)
		fmt.Fprintf(w, "| %s |\n", strings.Join(t.head, " | "))
		fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(t.head)))
		for _, row := range t.rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
	if len(r.Plots) > 0 {
		fmt.Fprintln(w, "\nPercentile plots (SVG) and .hgrm files are written to the output directory (`--outdir`), not committed:")
		for _, p := range r.Plots {
			fmt.Fprintf(w, "`%s` ", p)
		}
		fmt.Fprintln(w)
	}
}

// deployNote describes the deployments and the live subscriber.
func deployNote(deploys []string, live bool) string {
	var parts []string
	for _, d := range deploys {
		switch d {
		case deployEmbedded:
			parts = append(parts, "embedded (the feed handler's own NATS server; tickcast-MODE)")
		case deployExternal:
			parts = append(parts, "external (a nats-server process, --nats-url, recovery and live copy on; tickcast-ext-MODE)")
		case deploySHM:
			parts = append(parts, "shm (the embedded NATS server, the packets through the feed handler's shared-memory rings: feedhandler --shm, subscriber --transport shm; tickcast-shm-MODE)")
		}
	}
	s := strings.Join(parts, ", ")
	if live {
		s += "; a live NATS subscriber beside every tickcast subscriber"
	}
	return s
}

// baselineNote names the baseline revision, if any.
func baselineNote(rev string) string {
	if rev == "" {
		return ""
	}
	return "; baseline-MODE peers: the programs of " + rev
}
