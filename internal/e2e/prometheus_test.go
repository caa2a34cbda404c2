package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/tickcast/tickcast/dashboards"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/testenv"
	"gopkg.in/yaml.v3"
)

// rulesFile is the alerting rules the project ships.
const rulesFile = "../../deploy/prometheus/alerts.yml"

// TestPrometheus checks the metrics and the alerting rules against a real
// Prometheus (Debian's prometheus package; TICKCAST_REQUIRE=prometheus makes
// its absence a failure). It runs a feed handler and two subscribers with
// faults, and a Prometheus on loopback that scrapes the three every second
// and evaluates the rules, and checks:
//
//   - promtool check metrics finds nothing wrong with any /metrics;
//   - every metric selector of every rule matches a scraped series, so a
//     renamed metric cannot leave a rule silently watching nothing (and a
//     copy of the rules with one metric renamed is caught);
//   - every alert fires in the scenario made for it;
//   - the same selector check holds for every query of every generated
//     Grafana dashboard (dashboards/*.json), and a copy of a dashboard with
//     one metric renamed is caught.
//
// Scenarios: subscriber 1 drops 2% of its datagrams and recovers them from a
// feed handler that lets each requester have only 200 messages per second,
// so recovery is rejected (rate-limited) and fails, and messages are lost;
// it also listens on a B line that nobody publishes on (a line that
// stopped).
// Subscriber 2 drops 2% without recovery (gaps, losses) and has a one-slot
// receive ring (receive threads: --mode blocking) and a small socket buffer, and the test stops it for 300 ms
// every second: its ring fills, the kernel drops, and the messages that
// waited have a p99 latency far above the rule's 1 ms (its --stale-after is
// longer than the stalls, which would otherwise look like a silent feed
// when it resumes before its receive loops do). Last, the feed
// handler is stopped (SIGSTOP) until the channels go stale and its target is
// down. A script sends packets of another session onto channel 1's group
// throughout: both sides' competing-publisher alerts fire; another resends a
// live packet of channel 0 under later sequence numbers: the forged-packets
// alert fires. The feed handler archives (--archive) on the test's NATS
// server's JetStream, and the test deletes the archive's stream once it
// holds a record: the records are refused from then on, and the archive
// alert fires. The feed handler and both subscribers (subscriber 2 for its
// keys only) use a NATS server the test runs, which it shuts down until all
// are disconnected, then restarts on its port: they reconnect.
//
// Prometheus loads a copy of the rules whose `for:` durations are 0, so
// that an alert fires at its first true evaluation instead of minutes
// later; the expressions and thresholds are the shipped ones.
func TestPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	testenv.Need(t, "prometheus", err == nil, "prometheus is not installed (Debian package prometheus)")
	promtool, err := exec.LookPath("promtool")
	testenv.Need(t, "prometheus", err == nil, "promtool is not installed (Debian package prometheus)")

	rules := readRules(t, rulesFile)
	// The RDMA alerts' metrics exist only with --transport rdma on an RDMA
	// device, which this host has not: promtool's unit tests
	// (deploy/prometheus/alerts_test.yml) check them, and tickprom's tests
	// the series they select. Here they are left out.
	rules = slices.DeleteFunc(rules, func(r map[string]any) bool {
		if name := r["alert"].(string); strings.HasPrefix(name, "TickcastRDMA") {
			t.Logf("%s left out: its metrics need an RDMA device (promtool's unit tests cover it)", name)
			return true
		}
		return false
	})
	dir := t.TempDir()
	testRules := filepath.Join(dir, "alerts.yml")
	writeRules(t, testRules, rules, func(r map[string]any) { delete(r, "for") })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ga, gb, _ := groups(t)
	fhAddr, sub1Addr, sub2Addr, promAddr := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	natsHost, natsPortStr, _ := net.SplitHostPort(natsAddr(t))
	natsPort, _ := strconv.Atoi(natsPortStr)
	natsCfg := natsconn.ServerConfig{Host: natsHost, Port: natsPort, JetStream: true, StoreDir: filepath.Join(dir, "jetstream")}
	natsSrv, err := natsconn.StartServer(natsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { natsSrv.Shutdown() }()
	natsURL := natsSrv.ClientURL() // start gives subscribers this --nats-url
	common := []string{"--group", ga, "--channels", "2", "--idle-timeout", "90s", "--inject-loss", "0.02"}
	sub1 := start(t, ctx, subscriberBin, append(common, "--metrics-addr", sub1Addr, "--group-b", gb)...)
	// Subscriber 2 receives on threads of its own (--mode blocking): only
	// a receive loop can find the ring full; in the direct modes the
	// socket buffer is the only queue, and its overflow is kernel drops.
	sub2 := start(t, ctx, subscriberBin, append(common, "--metrics-addr", sub2Addr, "--recovery=false", "--mode", "blocking",
		"--ring-slots", "1", "--rcvbuf", "65536", "--inject-seed", "2", "--stale-after", "2s")...)
	for _, s := range []*proc{sub1, sub2} {
		s.waitLog(t, `"subscribed"`, 10*time.Second)
	}
	fh := start(t, ctx, feedhandlerBin, "--group", ga, "--channels", "2", "--count", "0", "--rate", "20000", "--watch-groups",
		"--rate-limit", "200", "--heartbeat", "50ms", "--metrics-addr", fhAddr, "--nats-url", natsURL, "--archive")
	fh.waitLog(t, `"publishing"`, 10*time.Second)
	// The archive's stream deleted under the feed handler: its records are
	// refused from then on, for the archive alert.
	deleteArchiveStream(t, natsURL)
	// Another publisher on channel 1's group, for the competing-publisher
	// alerts of both sides.
	scriptCtx, stopScript := context.WithCancel(ctx)
	script := compete(t, scriptCtx, ga, 1, "01ZSA99999")
	// Forged packets under the live session of channel 0, for the
	// forged-packets alert.
	forger := forge(t, scriptCtx, ga, 0)
	defer func() { stopScript(); <-script; <-forger }()
	procs := map[string]*proc{"feedhandler": fh, "subscriber 1": sub1, "subscriber 2": sub2}
	t.Cleanup(func() {
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Signal(os.Interrupt)
		}
		for _, p := range procs {
			p.wait(t, 10*time.Second)
		}
	})
	logs := func() string {
		var b strings.Builder
		for name, p := range procs {
			fmt.Fprintf(&b, "--- %s stderr:\n%s\n", name, tail(p.stderr.String()))
		}
		return b.String()
	}

	// Subscriber 2 stalls for 300 ms every second.
	stallDone := make(chan struct{})
	stallCtx, stopStall := context.WithCancel(ctx)
	go func() {
		defer close(stallDone)
		for stallCtx.Err() == nil {
			sub2.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(300 * time.Millisecond)
			sub2.cmd.Process.Signal(syscall.SIGCONT)
			select {
			case <-stallCtx.Done():
			case <-time.After(700 * time.Millisecond):
			}
		}
	}()
	defer func() { stopStall(); <-stallDone }()

	// Prometheus, scraping every second.
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: feedhandler
    static_configs:
      - targets: [%q]
  - job_name: subscriber
    static_configs:
      - targets: [%q, %q]
`, testRules, fhAddr, sub1Addr, sub2Addr)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pp := &proc{cmd: exec.CommandContext(ctx, prom, "--config.file", cfgFile, "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", promAddr, "--log.level", "warn"), done: make(chan error, 1)}
	pp.cmd.Stdout, pp.cmd.Stderr = &pp.stdout, &pp.stderr
	if err := pp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { pp.done <- pp.cmd.Wait() }()
	defer func() { pp.cmd.Process.Signal(os.Interrupt); pp.wait(t, 10*time.Second) }()
	api := promAPI{t: t, base: "http://" + promAddr}

	// Every target up.
	waitFor(t, 30*time.Second, func() (bool, string) {
		res, err := api.query(`up == 1`)
		return err == nil && len(res) == 3, fmt.Sprintf("up: %v %v\nprometheus:\n%s\n%s", res, err, tail(pp.stderr.String()), logs())
	})

	// promtool check metrics on every /metrics.
	for name, addr := range map[string]string{"feedhandler": fhAddr, "subscriber 1": sub1Addr, "subscriber 2": sub2Addr} {
		body := httpGet(t, "http://"+addr+"/metrics")
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("promtool check metrics on %s: %v\n%s", name, err, out)
		}
		if n := strings.Count(body, "\ntickcast_"); n < 30 {
			t.Errorf("%s: only %d tickcast series", name, n)
		}
	}

	// Every selector of every rule matches a scraped series.
	waitFor(t, 15*time.Second, func() (bool, string) {
		missing := api.unmatchedSelectors(rules)
		return len(missing) == 0, fmt.Sprintf("selectors that match no scraped series: %v", missing)
	})
	// The check is not vacuous: a rule copy with one metric renamed fails
	// it, naming the broken selector.
	mutated := filepath.Join(dir, "mutated.yml")
	writeRules(t, mutated, rules, func(r map[string]any) {
		r["expr"] = strings.ReplaceAll(r["expr"].(string), "tickcast_subscriber_gaps_total", "tickcast_subscriber_gap_total")
	})
	if missing := api.unmatchedSelectors(readRules(t, mutated)); len(missing) != 1 || !strings.Contains(missing[0], "tickcast_subscriber_gap_total") {
		t.Errorf("renamed metric in a copy of the rules: unmatched selectors %v, want exactly the renamed one", missing)
	}

	// The same for every query of every Grafana dashboard.
	checkDashboards(t, api)

	// Every alert but those of a stopped feed handler and of NATS down
	// fires while the faults run.
	later := []string{"TickcastFeedStale", "TickcastFeedHandlerDown", "TickcastNATSDisconnected", "TickcastNATSReconnected"}
	var all []string
	for _, r := range rules {
		all = append(all, r["alert"].(string))
	}
	firing := func() []string {
		res, err := api.query(`ALERTS{alertstate="firing"}`)
		if err != nil {
			return nil
		}
		var names []string
		for _, s := range res {
			if n := s.Metric["alertname"]; !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return names
	}
	waitFor(t, 60*time.Second, func() (bool, string) {
		got := firing()
		for _, a := range all {
			if !slices.Contains(later, a) && !slices.Contains(got, a) {
				return false, fmt.Sprintf("alerts firing %v, want every one of %v but %v\n%s", got, all, later, logs())
			}
		}
		return true, ""
	})
	t.Logf("firing with faults: %v", firing())
	for _, a := range firing() {
		if slices.Contains(later, a) {
			t.Errorf("%s fires while the feed handler and NATS run", a)
		}
	}

	// NATS down: the three programs lose their connection (subscriber 2,
	// without recovery, connects for its keys), then reconnect to the
	// server restarted on the same port.
	natsSrv.Shutdown()
	waitFor(t, 30*time.Second, func() (bool, string) {
		res, err := api.query(`ALERTS{alertname="TickcastNATSDisconnected",alertstate="firing"}`)
		return err == nil && len(res) == 3, fmt.Sprintf("NATS down: TickcastNATSDisconnected firing for %v %v, want the feed handler and both subscribers", res, err)
	})
	if natsSrv, err = natsconn.StartServer(natsCfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		res, err := api.query(`ALERTS{alertname="TickcastNATSReconnected",alertstate="firing"}`)
		return err == nil && len(res) == 3, fmt.Sprintf("NATS restarted: TickcastNATSReconnected firing for %v %v, want the feed handler and both subscribers", res, err)
	})
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := firing()
		return !slices.Contains(got, "TickcastNATSDisconnected"), fmt.Sprintf("alerts firing %v after NATS restarted", got)
	})
	t.Logf("firing after NATS restarted: %v", firing())

	// Feed stale: the feed handler stops sending (not even heartbeats).
	stopStall()
	<-stallDone
	fh.cmd.Process.Signal(syscall.SIGSTOP)
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := firing()
		return slices.Contains(got, "TickcastFeedStale") && slices.Contains(got, "TickcastFeedHandlerDown"),
			fmt.Sprintf("alerts firing %v after the feed handler stopped", got)
	})
	fh.cmd.Process.Signal(syscall.SIGCONT)
	t.Logf("firing with the feed handler stopped: %v", firing())
}

// readRules returns every rule of a rules file, as YAML maps.
func readRules(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []map[string]any
	for _, g := range doc.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no rules", file)
	}
	return out
}

// writeRules writes rules as one group, each changed by edit (on a copy).
func writeRules(t *testing.T, file string, rules []map[string]any, edit func(map[string]any)) {
	t.Helper()
	var copies []map[string]any
	for _, r := range rules {
		c := map[string]any{}
		for k, v := range r {
			c[k] = v
		}
		edit(c)
		copies = append(copies, c)
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "tickcast", "rules": copies}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v\n%s", u, resp.StatusCode, err, b)
	}
	return string(b)
}

// waitFor polls cond every 250 ms until it holds, failing the test with
// cond's message after d.
func waitFor(t *testing.T, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// promAPI queries a Prometheus server's HTTP API.
type promAPI struct {
	t    *testing.T
	base string
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
}

func (p promAPI) get(path string, params url.Values) ([]promSeries, error) {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", path, r.Error)
	}
	var out []promSeries
	if path == "/api/v1/series" {
		var labels []map[string]string
		if err := json.Unmarshal(r.Data, &labels); err != nil {
			return nil, err
		}
		for _, l := range labels {
			out = append(out, promSeries{Metric: l})
		}
		return out, nil
	}
	var v struct {
		Result []promSeries `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &v); err != nil {
		return nil, err
	}
	return v.Result, nil
}

// query evaluates an instant query.
func (p promAPI) query(q string) ([]promSeries, error) {
	return p.get("/api/v1/query", url.Values{"query": {q}})
}

// unmatchedSelectors parses every rule's expression with the PromQL parser
// and returns the metric selectors that match no series Prometheus has
// scraped in the last ten minutes.
func (p promAPI) unmatchedSelectors(rules []map[string]any) []string {
	var missing []string
	for _, r := range rules {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(r["expr"].(string))
		if err != nil {
			p.t.Errorf("rule %v: %v", r["alert"], err)
			continue
		}
		var sels []string
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				var ms []string
				for _, m := range vs.LabelMatchers {
					ms = append(ms, m.String())
				}
				sels = append(sels, "{"+strings.Join(ms, ",")+"}")
			}
			return nil
		})
		if len(sels) == 0 {
			p.t.Errorf("rule %v: no metric selector in %q", r["alert"], r["expr"])
		}
		for _, sel := range sels {
			now := time.Now()
			res, err := p.get("/api/v1/series", url.Values{"match[]": {sel},
				"start": {fmt.Sprint(now.Add(-10 * time.Minute).Unix())}, "end": {fmt.Sprint(now.Unix())}})
			if err != nil || len(res) == 0 {
				missing = append(missing, fmt.Sprintf("%v: %s (%v)", r["alert"], sel, err))
			}
		}
	}
	return missing
}

// dashboardsDir holds the generated Grafana dashboards.
const dashboardsDir = "../../dashboards"

// checkDashboards checks the Grafana dashboards as the rules are checked:
// every query of every panel (and every query variable) of every
// dashboard, its template variables replaced by dashboards.TestValues,
// parses and each of its selectors matches a scraped series. A copy of the
// subscriber dashboard with one metric renamed must fail the check at every
// selector of that metric, and only there.
// withoutRDMA leaves out the queries of the dashboards' RDMA row: its
// series exist only with --transport rdma on an RDMA device, which this
// host has not (dashboards' TestQueries checks them against the
// collectors).
func withoutRDMA(queries []map[string]any) []map[string]any {
	return slices.DeleteFunc(queries, func(q map[string]any) bool {
		return strings.Contains(q["expr"].(string), "tickcast_rdma_")
	})
}

func checkDashboards(t *testing.T, api promAPI) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dashboardsDir, err)
	}
	var queries []map[string]any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, dashboardQueries(t, f, b)...)
	}
	n := len(queries)
	queries = withoutRDMA(queries)
	t.Logf("%d RDMA dashboard queries left out: their series need an RDMA device", n-len(queries))
	waitFor(t, 15*time.Second, func() (bool, string) {
		missing := api.unmatchedSelectors(queries)
		return len(missing) == 0, fmt.Sprintf("dashboard selectors that match no scraped series: %v", missing)
	})
	t.Logf("%d dashboard queries in %d dashboards match scraped series", len(queries), len(files))

	const from, to = "tickcast_subscriber_gaps_total", "tickcast_subscriber_gap_total"
	b, err := os.ReadFile(filepath.Join(dashboardsDir, "subscriber.json"))
	if err != nil {
		t.Fatal(err)
	}
	mutated := withoutRDMA(dashboardQueries(t, "mutated subscriber.json", []byte(strings.ReplaceAll(string(b), from, to))))
	want := 0
	for _, q := range mutated {
		want += strings.Count(q["expr"].(string), to)
	}
	missing := api.unmatchedSelectors(mutated)
	if want == 0 || len(missing) != want {
		t.Errorf("renamed metric in a copy of a dashboard: unmatched selectors %v, want the %d of %s", missing, want, to)
	}
	for _, m := range missing {
		if !strings.Contains(m, to) {
			t.Errorf("renamed metric in a copy of a dashboard: unmatched selector %s is not the renamed one", m)
		}
	}
}

// dashboardQueries returns a dashboard's queries as rules for
// unmatchedSelectors: each named by where it comes from, its expression
// expanded.
func dashboardQueries(t *testing.T, name string, dashboardJSON []byte) []map[string]any {
	t.Helper()
	qs, err := dashboards.Queries(dashboardJSON)
	if err != nil || len(qs) == 0 {
		t.Fatalf("%s: %d queries, %v", name, len(qs), err)
	}
	var out []map[string]any
	for _, q := range qs {
		out = append(out, map[string]any{"alert": q.Where, "expr": q.Expr})
	}
	return out
}

// deleteArchiveStream deletes the feed's archive stream on the NATS server
// at url, once it holds a record.
func deleteArchiveStream(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, 10*time.Second, func() (bool, string) {
		st, err := js.Stream(ctx, natsconn.ArchiveStream("tickcast"))
		if err != nil {
			return false, fmt.Sprintf("archive stream: %v", err)
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs > 0, fmt.Sprintf("archive stream: %v %v", info, err)
	})
	if err := js.DeleteStream(ctx, natsconn.ArchiveStream("tickcast")); err != nil {
		t.Fatal(err)
	}
}
