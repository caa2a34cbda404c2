package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTailRatios checks the per-round ratios to the floor in each phase,
// for tickcast in both deployments, a baseline without the split (whole
// run only) and NATS, and the tail table built from them.
func TestTailRatios(t *testing.T) {
	r := &latResult{Channels: []int{1}, Rates: []float64{10000}}
	for round, f := range []float64{1, 2, 3} {
		base := fakeRun(round+1, 10000, "baseline-direct", 40*f, 400)
		base.First, base.Steady = nil, nil
		base.Deploy = deployEmbedded
		ext := fakeRun(round+1, 10000, "tickcast-ext-direct", 30*f, 300)
		ext.Deploy = deployExternal
		ext.First.P99Us = 3000 * f // a start-up tail: 30, 60, 90 times the floor's first second
		r.Runs = append(r.Runs,
			fakeRun(round+1, 10000, peerFloorBlocking, 10*f, 100),
			fakeRun(round+1, 10000, "tickcast-direct", 20*f, 200),
			ext, base,
			fakeRun(round+1, 10000, peerNATS, 10*f, 100),
		)
	}
	r.summarize()
	type key struct{ peer, phase string }
	got := map[key]tailRatio{}
	for _, x := range r.TailRatios {
		got[key{x.Peer, x.Phase}] = x
	}
	for k, want := range map[key][4]float64{ // medians of p50, p99, p99.9, max ÷ floor
		{"tickcast-direct", phaseWhole}:      {2, 2, 2, 2},
		{"tickcast-direct", phaseFirst}:      {2, 2, 2, 2},
		{"tickcast-direct", phaseSteady}:     {2, 2, 2, 2},
		{"tickcast-ext-direct", phaseFirst}:  {3, 15, 3, 3}, // p99: 3000f ÷ 400 for f = 1, 2, 3
		{"tickcast-ext-direct", phaseSteady}: {3, 3, 3, 3},
		{"baseline-direct", phaseWhole}:      {4, 4, 4, 4},
		{peerNATS, phaseSteady}:              {1, 1, 1, 1},
	} {
		x, ok := got[k]
		if !ok {
			t.Errorf("no ratio for %v", k)
			continue
		}
		if g := [4]float64{x.P50.Median, x.P99.Median, x.P999.Median, x.Max.Median}; g != want || x.P50.N != 3 || x.Floor != peerFloorBlocking {
			t.Errorf("%v: ratios %v over %d rounds against %s, want %v over 3 against %s", k, g, x.P50.N, x.Floor, want, peerFloorBlocking)
		}
	}
	for _, ph := range []string{phaseFirst, phaseSteady} {
		if _, ok := got[key{"baseline-direct", ph}]; ok {
			t.Errorf("baseline without the split has a %s ratio", ph)
		}
	}
	if _, ok := got[key{peerFloorBlocking, phaseWhole}]; ok {
		t.Error("the floor is compared with itself")
	}
	// The ext peer's first-second p99 over the rounds: 3000, 6000, 9000.
	var ext *peerSummary
	for i := range r.Summary {
		if r.Summary[i].Peer == "tickcast-ext-direct" {
			ext = &r.Summary[i]
		}
	}
	if ext == nil || ext.First == nil || ext.First.P99.Median != 6000 || ext.Steady.Count.Median != 60 {
		t.Fatalf("tickcast-ext-direct summary %+v", ext)
	}
	var md bytes.Buffer
	writeMarkdown(&md, r)
	for _, row := range []string{
		"| 10k | tickcast-ext-direct | whole | 100 | 60.0 [30.0–90.0] | 300 | 300 | 300 | 3.00 | 3.00 | 3.00 | 3.00 |",
		"| 10k |  | first second | 40 | 120 [60.0–180] | 6,000 [3,000–9,000] | 1,200 | 1,200 | 3.00 | 15.00 [7.50–22.50] | 3.00 | 3.00 |",
		"| 10k | baseline-direct | whole (no split) | 100 |",
		"| 10k | floor-blocking | whole | 100 | 20.0 [10.0–30.0] | 100 | 100 | 100 |  |  |  |  |",
	} {
		if !strings.Contains(md.String(), row) {
			t.Errorf("Markdown lacks the row\n%s\nin:\n%s", row, md.String())
		}
	}
	// The peers in order: floor, tickcast, tickcast-ext, baseline, NATS.
	var order []string
	for _, s := range r.Summary {
		order = append(order, s.Peer)
	}
	if want := []string{peerFloorBlocking, "tickcast-direct", "tickcast-ext-direct", "baseline-direct", peerNATS}; !slices.Equal(order, want) {
		t.Errorf("peer order %v, want %v", order, want)
	}
}

// TestSplitNotes checks the note for a tickcast or baseline peer whose
// subscriber does not report the split, once per peer.
func TestSplitNotes(t *testing.T) {
	old := latRun{Peer: "baseline-ext-direct", Deploy: deployExternal}
	failed := latRun{Peer: "baseline-direct", Deploy: deployEmbedded, Err: "boom"}
	floor := latRun{Peer: peerFloorBlocking}
	split := fakeRun(1, 1000, "tickcast-direct", 1, 1)
	split.Deploy = deployEmbedded
	notes := splitNotes([]latRun{old, old, failed, floor, split})
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "baseline-ext-direct: ") {
		t.Errorf("notes %q, want one for baseline-ext-direct", notes)
	}
}

// TestSubSplit reads the subscriber summary's split, and its absence in
// an older subscriber's summary.
func TestSubSplit(t *testing.T) {
	var ss subLatSummary
	line := `{"received":5,"latency_count":5,"latency_p50_us":7,"latency_first_count":2,"latency_first_p99_us":900,` +
		`"latency_steady_count":3,"latency_steady_p999_us":40}`
	if err := json.Unmarshal([]byte(line), &ss); err != nil {
		t.Fatal(err)
	}
	first, steady := ss.subSplit.stats()
	if first == nil || first.Count != 2 || first.P99Us != 900 || steady.Count != 3 || steady.P999Us != 40 || ss.P50Us != 7 {
		t.Errorf("split %+v %+v of %+v", first, steady, ss)
	}
	// A subscriber of the split with no message in the first second still
	// has it (count 0); an older one has not.
	ss = subLatSummary{}
	if err := json.Unmarshal([]byte(`{"received":5,"latency_count":5,"latency_p50_us":7}`), &ss); err != nil {
		t.Fatal(err)
	}
	if first, steady := ss.subSplit.stats(); first != nil || steady != nil {
		t.Errorf("an older summary has a split: %+v %+v", first, steady)
	}
}

// TestNATSSideArgs checks the flags of each deployment: the embedded one on
// a port the kernel picks (recovery and live copy off), the embedded one on
// a chosen port and the external one with nothing but the server's address
// (recovery and the live copy at their defaults, on).
func TestNATSSideArgs(t *testing.T) {
	for _, c := range []struct {
		ns          natsSide
		fh, sub     string
		fhNot, subN string
	}{
		{natsSide{}, "--linger 0s --metrics-addr= --nats-listen 127.0.0.1:0 --nats-live=false", "--recovery=false --metrics-addr=", "--nats-url", "--nats-url"},
		{natsSide{listen: "127.0.0.1:4999", live: true}, "--nats-listen 127.0.0.1:4999", "--nats-url nats://127.0.0.1:4999", "--nats-live", "--recovery"},
		{natsSide{listen: "127.0.0.1:4999"}, "--nats-listen 127.0.0.1:4999", "--nats-url nats://127.0.0.1:4999", "--nats-live", "--recovery"},
		{natsSide{url: "nats://127.0.0.1:4998"}, "--linger 0s --metrics-addr= --nats-url nats://127.0.0.1:4998", "--nats-url nats://127.0.0.1:4998 --metrics-addr=",
			"--nats-live", "--recovery"},
	} {
		fh, sub := strings.Join(c.ns.fhArgs(), " "), strings.Join(c.ns.subArgs(), " ")
		if !strings.Contains(fh, c.fh) || strings.Contains(fh, c.fhNot) || !strings.Contains(sub, c.sub) || strings.Contains(sub, c.subN) {
			t.Errorf("%+v: feed handler %q, subscriber %q", c.ns, fh, sub)
		}
	}
	live := strings.Join(liveSubArgs(runArgs{channels: 4}, natsSide{listen: "127.0.0.1:4999", live: true}), " ")
	if !strings.Contains(live, "--transport nats --nats-url nats://127.0.0.1:4999 --channels 4") || !strings.Contains(live, "--recovery=false") {
		t.Errorf("live subscriber %q", live)
	}
	if tickcastPeer(tickcastPrefix, deployExternal, "direct") != "tickcast-ext-direct" || tickcastPeer(baselinePrefix, deployEmbedded, "blocking") != "baseline-blocking" ||
		tickcastPeer(tickcastPrefix, deploySHM, "direct-spin") != "tickcast-shm-direct-spin" {
		t.Error("peer names")
	}
	for peer, mode := range map[string]string{"tickcast-ext-direct-spin": "direct-spin", "baseline-busy-poll": "busy-poll", "baseline-ext-direct": "direct",
		"tickcast-shm-direct": "direct", "tickcast-shm4-direct-spinwait": "direct-spinwait", "baseline-shm2-direct-spin": "direct-spin"} {
		if got := peerMode(peer); got != mode {
			t.Errorf("peerMode(%s) = %s, want %s", peer, got, mode)
		}
	}
	shm4 := latEnv{prefix: tickcastPrefix, shm: true, localSubs: 4}
	if got := shm4.peer("direct"); got != "tickcast-shm4-direct" {
		t.Errorf("4 local subscribers: peer %s", got)
	}
	if classOf(peerMode("tickcast-shm4-direct-spinwait")) != classBlocking || classOf(peerMode("tickcast-shm-direct-spin")) != classBusy {
		t.Error("receive classes of shm peers")
	}
	if got := strings.Join(withoutFlag([]string{"--a", "1", "--latency-out", "f", "--b"}, "--latency-out"), " "); got != "--a 1 --b" {
		t.Errorf("withoutFlag: %q", got)
	}
}

// TestParseTail checks the --tail preset, that flags given with it
// override it, --deploy and --floors, and their bad values.
func TestParseTail(t *testing.T) {
	parse := func(tail bool, deploy, floors string, set map[string]bool, apply func(ls *latSettings)) (latSettings, error) {
		ls := latSettings{rounds: 5, duration: 2 * time.Second, probeDur: 500 * time.Millisecond, ppCount: 1000, fanCount: 10000,
			pingpong: true, fanout: true, tail: tail}
		if apply != nil {
			apply(&ls)
		}
		if err := ls.parseTail(deploy, floors, set); err != nil {
			return ls, err
		}
		err := ls.parse(30*time.Second, "1,4", "10k,50k", "100k", "", "1", true, set)
		return ls, err
	}
	ls, err := parse(true, "embedded,external", "blocking,busy-poll", map[string]bool{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ls.rates, []float64{10e3, 100e3, 300e3}) || ls.duration != 30*time.Second || ls.rounds != 5 ||
		!slices.Equal(ls.modes, []string{"direct"}) || !slices.Equal(ls.floors, []string{"blocking"}) ||
		!slices.Equal(ls.deploys, []string{deployEmbedded, deployExternal}) || ls.pingpong || ls.fanout || len(ls.searchRates) != 0 ||
		ls.timeout < 60*time.Second || !slices.Equal(ls.channels, []int{1, 4}) {
		t.Errorf("--tail: %+v", ls)
	}
	// --tail --duration 10s --rounds 3 --deploy external.
	ls, err = parse(true, "external", "blocking", map[string]bool{"duration": true, "rounds": true, "deploy": true},
		func(ls *latSettings) { ls.duration, ls.rounds = 10*time.Second, 3 })
	if err != nil || ls.duration != 10*time.Second || ls.rounds != 3 || !slices.Equal(ls.deploys, []string{deployExternal}) || ls.timeout < 20*time.Second {
		t.Errorf("--tail with overrides: %+v, %v", ls, err)
	}
	// Without --tail nothing changes but the lists.
	ls, err = parse(false, "external,embedded", "busy-poll", map[string]bool{}, nil)
	if err != nil || ls.duration != 2*time.Second || !ls.pingpong || !slices.Equal(ls.deploys, []string{deployEmbedded, deployExternal}) ||
		!slices.Equal(ls.floors, []string{"busy-poll"}) || ls.timeout != 30*time.Second {
		t.Errorf("default: %+v, %v", ls, err)
	}
	for _, c := range []struct {
		tail          bool
		deploy, floor string
		quick         bool
		want          string
	}{
		{false, "docker", "blocking", false, `--deploy "docker"`},
		{false, "", "blocking", false, `--deploy ""`},
		{false, "embedded", "spin", false, `--floors "spin"`},
		{true, "embedded", "blocking", true, "--tail with --quick"},
	} {
		_, err := parse(c.tail, c.deploy, c.floor, map[string]bool{}, func(ls *latSettings) { ls.quick = c.quick })
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error %v, want one line starting %s", c, err, c.want)
		}
	}
}
