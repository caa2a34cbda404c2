package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickcast/tickcast/internal/hgrm"
)

// TestHgrmRoundTrip writes a histogram as .hgrm and parses it back.
func TestHgrmRoundTrip(t *testing.T) {
	h := hdrhistogram.New(1, latMaxNs, 3)
	for i := int64(1); i <= 1000; i++ {
		recordLat(h, i*1000) // 1..1000 µs
	}
	path := filepath.Join(t.TempDir(), "x.hgrm")
	if err := hgrm.Write(path, h); err != nil {
		t.Fatal(err)
	}
	pts, err := readHgrm(path)
	if err != nil {
		t.Fatal(err)
	}
	last := pts[len(pts)-1]
	if last.Count != 1000 || last.Percentile != 1 || last.ValueUs < 999 || last.ValueUs > 1001 {
		t.Errorf("last point %+v, want 1000 values up to 1000 µs", last)
	}
	for _, p := range pts {
		if p.Percentile >= 0.5 {
			if p.ValueUs < 499 || p.ValueUs > 502 {
				t.Errorf("p50 point %+v, want about 500 µs", p)
			}
			break
		}
	}
	st := statsOf(h)
	if st.Count != 1000 || st.P50Us < 499 || st.P50Us > 501 || st.MaxUs < 999 || st.MaxUs > 1001 {
		t.Errorf("statsOf = %+v", st)
	}
}

func TestParseHgrmRejects(t *testing.T) {
	for name, text := range map[string]string{
		"empty":      "",
		"no header":  "1.0 0.5 10 2.00\n",
		"fields":     " Value\tPercentile\tTotalCount\t1/(1-Percentile)\n\n1.0 0.5 10\n",
		"percentile": " Value\tPercentile\tTotalCount\t1/(1-Percentile)\n\n1.0 1.5 10 2.00\n",
		"decreasing": " Value\tPercentile\tTotalCount\t1/(1-Percentile)\n\n2.0 0.5 10 2.00\n1.0 0.6 11 2.50\n",
	} {
		if _, err := parseHgrm(strings.NewReader(text)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestStamp(t *testing.T) {
	b := make([]byte, 89)
	putStamp(b, 7, 1234567890123)
	if ns, end, _ := readStamp(b); end || ns != 1234567890123 {
		t.Errorf("data stamp read as ns %d, end %v", ns, end)
	}
	putEnd(b, 42)
	if _, end, n := readStamp(b[:stampLen]); !end || n != 42 {
		t.Errorf("end marker read as end %v, announced %d", end, n)
	}
}

// sockperfOutput is the tail of a real sockperf 3.7 ping-pong run.
const sockperfOutput = "sockperf: [Total Run] RunTime=1.001 sec; Warm up time=400 msec; SentMessages=36969; ReceivedMessages=36968\n" +
	"sockperf: \x1b[2;35m====> avg-latency=13.806 (std-dev=8.719)\x1b[0m\n" +
	"sockperf: \x1b[2;35mTotal 19915 observations\x1b[0m; each percentile contains 199.15 observations\n" +
	"sockperf: ---> <MAX> observation =  881.520\n" +
	"sockperf: ---> percentile 99.999 =  881.520\n" +
	"sockperf: ---> percentile 99.990 =  314.367\n" +
	"sockperf: ---> percentile 99.900 =   53.922\n" +
	"sockperf: ---> percentile 99.000 =   36.383\n" +
	"sockperf: ---> percentile 90.000 =   13.159\n" +
	"sockperf: ---> percentile 75.000 =   12.914\n" +
	"sockperf: ---> percentile 50.000 =   12.738\n" +
	"sockperf: ---> <MIN> observation =    6.502\n"

func TestParseSockperf(t *testing.T) {
	s, err := parseSockperf(sockperfOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := latStats{Count: 19915, P50Us: 12.738, P90Us: 13.159, P99Us: 36.383, P999Us: 53.922, MaxUs: 881.52}
	if s != want {
		t.Errorf("parseSockperf = %+v, want %+v", s, want)
	}
	if _, err := parseSockperf("sockperf: error: connection refused\n"); err == nil {
		t.Error("output without figures parsed")
	}
}

func TestModeHelp(t *testing.T) {
	usage := "Flags:\n  --mode string\n        receive mode: blocking (no CPU while idle), busy-poll (spins one core\n        per line), direct or direct-spin (the handler's thread reads)\n        env TICKCAST_MODE, default \"blocking\"\n  --cpu int\n"
	h := modeHelp(usage)
	for _, m := range []string{"blocking", "busy-poll", "direct-spin"} {
		if !strings.Contains(h, m) {
			t.Errorf("mode help %q lacks %s", h, m)
		}
	}
	if strings.Contains(h, "env") || strings.Contains(h, "--cpu") {
		t.Errorf("mode help %q runs past the setting", h)
	}
	if modeHelp("  --group string\n        a group\n") != "" {
		t.Error("found a --mode setting where there is none")
	}
}

func TestClassOf(t *testing.T) {
	for mode, want := range map[string]string{"blocking": classBlocking, "direct": classBlocking, "busy-poll": classBusy, "direct-spin": classBusy,
		modeSpinWait: classBlocking} {
		if got := classOf(mode); got != want {
			t.Errorf("classOf(%s) = %s, want %s", mode, got, want)
		}
	}
}

// TestSpinWaitFlag: mode direct-spinwait runs the subscriber in mode direct
// with --spin-wait, and tickbench refuses a --spin-wait the subscriber
// would.
func TestSpinWaitFlag(t *testing.T) {
	sub, _ := tickcastLatArgs("239.77.0.1:1", modeSpinWait, 1, 1000, 100, "", natsSide{})
	if got := strings.Join(sub, " "); !strings.Contains(got, "--mode direct ") || !strings.Contains(got, "--spin-wait "+spinWait.String()) {
		t.Errorf("subscriber args %q", got)
	}
	for _, bad := range []string{"-5us", "0s", "2s"} {
		var out strings.Builder
		if code := run([]string{"--modes", modeSpinWait, "--spin-wait", bad}, &out, &out); code != 2 || !strings.Contains(out.String(), "--spin-wait") {
			t.Errorf("--spin-wait %s: exit %d, %q", bad, code, out.String())
		}
	}
	spinWait = 20 * time.Microsecond // run set it
}

func TestParseLists(t *testing.T) {
	r, err := parseRates("rates", "10k, 50000,1.5M,10k")
	if err != nil || len(r) != 3 || r[0] != 10000 || r[1] != 50000 || r[2] != 1.5e6 {
		t.Errorf("parseRates = %v, %v", r, err)
	}
	for _, bad := range []string{"", "fast", "10", "20M"} {
		if _, err := parseRates("rates", bad); err == nil {
			t.Errorf("parseRates(%q) accepted", bad)
		}
	}
	if c, err := parseInts("channels", "1,4", 1, 32); err != nil || len(c) != 2 || c[1] != 4 {
		t.Errorf("parseInts = %v, %v", c, err)
	}
	if _, err := parseInts("channels", "0", 1, 32); err == nil {
		t.Error("parseInts accepted 0 channels")
	}
	if got := rateName(100000); got != "100k" {
		t.Errorf("rateName(100000) = %q", got)
	}
	if got := rateName(1.5e6); got != "1.5M" {
		t.Errorf("rateName(1.5e6) = %q", got)
	}
}

// fakeRun is a latency run for the summary tests: its first second (40
// messages) has twice the p50 and four times the tail of its steady state
// (60 messages), which has the whole run's figures.
func fakeRun(round int, rate float64, peer string, p50, p99 float64) latRun {
	class := classBlocking
	if strings.Contains(peer, "busy") || strings.Contains(peer, "spin") {
		class = classBusy
	}
	return latRun{Round: round, Channels: 1, Rate: rate, Peer: peer, Class: class, Sent: 100, Delivered: 100,
		Lat:    latStats{Count: 100, P50Us: p50, P90Us: p50, P99Us: p99, P999Us: p99, MaxUs: p99},
		First:  &latStats{Count: 40, P50Us: 2 * p50, P90Us: 2 * p50, P99Us: 4 * p99, P999Us: 4 * p99, MaxUs: 4 * p99},
		Steady: &latStats{Count: 60, P50Us: p50, P90Us: p50, P99Us: p99, P999Us: p99, MaxUs: p99},
		Procs:  []procCPU{{Name: "a", CPUS: 0.001, UsPerMsg: 10}}}
}

// TestLatencySummary checks the medians, the per-round ratios against the
// floor of the same receive class and NATS, and the rate search.
func TestLatencySummary(t *testing.T) {
	r := &latResult{Channels: []int{1}, Rates: []float64{10000}}
	for round, f := range []float64{1, 2, 3} {
		r.Runs = append(r.Runs,
			fakeRun(round+1, 10000, peerFloorBlocking, 10*f, 100),
			fakeRun(round+1, 10000, peerFloorBusy, 5*f, 50),
			fakeRun(round+1, 10000, "tickcast-blocking", 30*f, 200),
			fakeRun(round+1, 10000, "tickcast-busy-poll", 10*f, 100),
			fakeRun(round+1, 10000, peerNATS, 60*f, 400),
		)
		for _, pr := range []struct {
			rate, p50 float64
		}{{100000, 20}, {200000, 90}, {400000, 150}, {800000, 80}} {
			p := fakeRun(round+1, pr.rate, peerFloorBlocking, pr.p50, 500)
			p.Probe = true
			r.Runs = append(r.Runs, p)
		}
	}
	bad := fakeRun(1, 10000, "tickcast-direct", 1, 1)
	bad.Err = "subscriber: exited"
	r.Runs = append(r.Runs, bad)
	r.summarize()

	var tcb *peerSummary
	for i := range r.Summary {
		if s := &r.Summary[i]; s.Peer == "tickcast-blocking" && !s.Probe {
			tcb = s
		}
	}
	if tcb == nil || tcb.P50.Median != 60 || tcb.P50.Min != 30 || tcb.P50.Max != 90 || tcb.Runs != 3 || tcb.Lost.Median != 0 {
		t.Fatalf("tickcast-blocking summary %+v", tcb)
	}
	if len(tcb.CPU) != 1 || tcb.CPU[0].Name != "a" || tcb.CPU[0].Median != 10 {
		t.Errorf("CPU %+v", tcb.CPU)
	}
	for _, s := range r.Summary {
		if s.Peer == "tickcast-direct" && (s.Failed != 1 || s.P50.N != 0) {
			t.Errorf("failed run counted: %+v", s)
		}
	}
	want := map[string][4]float64{ // p50÷floor, p99÷floor, p50÷NATS, p99÷NATS (medians)
		"tickcast-blocking":  {3, 2, 0.5, 0.5},
		"tickcast-busy-poll": {2, 2, 1.0 / 6, 0.25},
	}
	if len(r.Ratios) != 2 {
		t.Fatalf("ratios %+v", r.Ratios)
	}
	for _, x := range r.Ratios {
		w := want[x.Peer]
		got := [4]float64{x.P50Floor.Median, x.P99Floor.Median, x.P50NATS.Median, x.P99NATS.Median}
		for i := range w {
			if d := got[i] - w[i]; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s ratios %v, want %v", x.Peer, got, w)
				break
			}
		}
		if x.P50Floor.N != 3 {
			t.Errorf("%s: %d rounds in the ratio, want 3", x.Peer, x.P50Floor.N)
		}
	}
	if r.Ratios[1].Floor != peerFloorBusy {
		t.Errorf("busy-poll compared with %s", r.Ratios[1].Floor)
	}
	// Medians of the blocking floor: 10k → 20 µs, 100k → 20, 200k → 90,
	// 400k → 150 (over), 800k → 80: the search stops at the first rate over.
	if len(r.Search) != 1 || r.Search[0].Highest != 200000 || r.Search[0].FirstOver != 400000 {
		t.Errorf("search %+v, want highest 200k, first over 400k", r.Search)
	}

	var text, md bytes.Buffer
	printLatency(&text, r)
	writeMarkdown(&md, r)
	for _, s := range []string{"tickcast-blocking", "60.0 [30.0–90.0]", "1 of 1 runs failed", "highest rate"} {
		if !strings.Contains(text.String(), s) || !strings.Contains(md.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, text.String())
		}
	}
	// The ratio row of tickcast-blocking: p50 ÷ floor 3, p99 ÷ floor 2.
	if !strings.Contains(md.String(), "| 1 | 10k | tickcast-blocking | floor-blocking | 3.00 | 2.00 | 0.50 | 0.50 |") {
		t.Errorf("Markdown lacks the ratio row:\n%s", md.String())
	}
	if strings.Contains(md.String(), "Placeholder") {
		t.Error("a full run's Markdown is marked as a placeholder")
	}
	r.Quick = true
	md.Reset()
	writeMarkdown(&md, r)
	if !strings.Contains(md.String(), "Placeholder") {
		t.Error("a quick run's Markdown is not marked as a placeholder")
	}
}

// TestQuickCheck checks that the smoke test's check catches each kind of
// failure and passes a clean result.
func TestQuickCheck(t *testing.T) {
	clean := func() *latResult {
		return &latResult{
			Runs:     []latRun{fakeRun(1, 2000, peerFloorBlocking, 10, 20)},
			PingPong: []ppRun{{Transport: ppUDP, Pings: 10, Pongs: 10}},
			Fanout:   []fanRun{{Peer: "floor", Subs: 2, Sent: 10, Received: []uint64{10, 10}}},
		}
	}
	if bad := quickCheck(clean()); len(bad) != 0 {
		t.Fatalf("clean result: %v", bad)
	}
	for name, spoil := range map[string]func(r *latResult){
		"error":      func(r *latResult) { r.Runs[0].Err = "boom" },
		"loss":       func(r *latResult) { r.Runs[0].Delivered, r.Runs[0].Lost = 99, 1 },
		"latencies":  func(r *latResult) { r.Runs[0].Lat.Count = 5 },
		"nothing":    func(r *latResult) { r.Runs[0].Sent, r.Runs[0].Delivered = 0, 0 },
		"hgrm":       func(r *latResult) { r.Runs[0].Hgrm = filepath.Join(t.TempDir(), "missing.hgrm") },
		"unanswered": func(r *latResult) { r.PingPong[0].Pongs = 9 },
		"fan-out":    func(r *latResult) { r.Fanout[0].Lost = 3 },
		"fan-subs":   func(r *latResult) { r.Fanout[0].Received = r.Fanout[0].Received[:1] },
		"no split":   func(r *latResult) { r.Runs[0].First, r.Runs[0].Steady = nil, nil },
		"split sum":  func(r *latResult) { r.Runs[0].Steady.Count = 59 },
		"no steady": func(r *latResult) {
			r.Runs[0].First.Count, r.Runs[0].Steady.Count = 100, 0
		},
		"live failed": func(r *latResult) { r.Runs[0].Live = &liveRun{Err: "live-sub: exited"} },
		"live empty":  func(r *latResult) { r.Runs[0].Live = &liveRun{} },
	} {
		r := clean()
		spoil(r)
		if bad := quickCheck(r); len(bad) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}

// TestSVGPlot checks that the plot is well-formed XML with a line and a
// legend entry per series.
func TestSVGPlot(t *testing.T) {
	pts := []hgrmPoint{{10, 0, 1}, {20, 0.5, 50}, {40, 0.9, 90}, {100, 0.99, 99}, {500, 1, 100}}
	svg := svgPlot("latency <test>", "µs", []plotSeries{{"floor", pts}, {"tickcast & co", pts}})
	dec := xml.NewDecoder(strings.NewReader(svg))
	lines, texts := 0, []string{}
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not XML: %v\n%s", err, svg)
			}
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if e.Name.Local == "polyline" {
				lines++
			}
		case xml.CharData:
			texts = append(texts, string(e))
		}
	}
	if lines != 2 {
		t.Errorf("%d polylines, want 2", lines)
	}
	all := strings.Join(texts, "|")
	for _, s := range []string{"tickcast & co", "latency <test>", "99%", "90%"} {
		if !strings.Contains(all, s) {
			t.Errorf("plot text lacks %q: %s", s, all)
		}
	}
	if x := percentileX(0.99); x < 1.99 || x > 2.01 {
		t.Errorf("percentileX(0.99) = %v, want 2", x)
	}
}

// TestWritePlots writes the plots of a result from real .hgrm files.
func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	h := newLatHist()
	recordLat(h, 20_000)
	path := filepath.Join(dir, "a.hgrm")
	if err := hgrm.Write(path, h); err != nil {
		t.Fatal(err)
	}
	r := &latResult{Channels: []int{1}, Rates: []float64{10000}}
	a := fakeRun(1, 10000, peerFloorBlocking, 20, 20)
	a.Hgrm = path
	r.Runs = []latRun{a}
	r.PingPong = []ppRun{{Transport: ppUDP, Pings: 1, Pongs: 1, Hgrm: path}}
	r.summarize()
	plots, err := writePlots(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 2 {
		t.Fatalf("plots %v, want a latency and a ping-pong plot", plots)
	}
	for _, p := range plots {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("<polyline")) {
			t.Errorf("%s: %v, no line", p, err)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back latResult
	if err := json.Unmarshal(b, &back); err != nil || len(back.Summary) != 1 || back.Summary[0].P50.Median != 20 {
		t.Errorf("JSON round trip: %v, %+v", err, back.Summary)
	}
}
