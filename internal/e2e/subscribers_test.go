package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"gopkg.in/yaml.v3"
)

// The subscriber's default metrics address and the range of ports it moves
// on to when that port is in use (docs/operations.md).
const (
	subscriberMetricsHost  = "127.0.0.1"
	subscriberMetricsFirst = 9465
	subscriberMetricsLast  = 9564
)

// TestSubscribersDefaultMetrics runs four subscribers with the default
// metrics address on one host, beside one feed handler: each takes a port
// of its own from the documented range (the first four free ones) and
// registers it with --metrics-sd-dir, a real Prometheus (Debian's
// prometheus package; TICKCAST_REQUIRE=prometheus makes its absence a
// failure) discovers all four through the files (file_sd_configs, files
// that appear after it started) and scrapes each, and every subscriber
// verifies the whole feed with nothing missing and removes its file at
// exit. The subscribers get only the settings every end-to-end test gives:
// the feed's group and channels and the test's NATS server.
func TestSubscribersDefaultMetrics(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	testenv.Need(t, "prometheus", err == nil, "prometheus is not installed (Debian package prometheus)")
	began := time.Now()
	const nSubs = 4

	// The ports the subscribers should take: the range's first free ones.
	var want []string
	for p := subscriberMetricsFirst; p <= subscriberMetricsLast && len(want) < nSubs; p++ {
		addr := net.JoinHostPort(subscriberMetricsHost, strconv.Itoa(p))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			want = append(want, addr)
		}
	}
	if len(want) < nSubs {
		t.Fatalf("only %d free ports in %d..%d: %v", len(want), subscriberMetricsFirst, subscriberMetricsLast, want)
	}

	// Prometheus first, so that it discovers files written after it
	// started, as a long-running one does. It runs the shipped
	// configuration's file_sd stanza of the subscriber job, its paths
	// relative to the configuration file as in deploy/prometheus.
	sd := shippedFileSD(t)
	dir := t.TempDir()
	sdDir := filepath.Join(dir, filepath.Dir(sd[0]["files"].([]any)[0].(string)))
	if err := os.MkdirAll(sdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s"},
		"scrape_configs": []any{map[string]any{"job_name": "subscriber", "file_sd_configs": sd}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := testenv.FreeAddr(t)
	pp := launch(t, ctx, prom, "--config.file", cfgFile, "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", promAddr, "--log.level", "warn")
	defer func() { pp.cmd.Process.Signal(os.Interrupt); pp.wait(t, 10*time.Second) }()
	api := promAPI{t: t, base: "http://" + promAddr}

	ga, _, _ := groups(t)
	feed := []string{"--group", ga, "--channels", "2"}
	var subs []*proc
	for range nSubs {
		subs = append(subs, launch(t, ctx, subscriberBin, append([]string{"--nats-url", "nats://" + natsAddr(t),
			"--verify", "--idle-timeout", "60s", "--metrics-sd-dir", sdDir}, feed...)...))
	}
	t.Cleanup(func() {
		for _, s := range subs {
			s.cmd.Process.Signal(os.Interrupt)
		}
	})
	var got []string
	for i, s := range subs {
		s.waitLog(t, `"subscribed"`, 10*time.Second)
		addr := loggedMetricsAddr(t, s)
		moved := strings.Contains(s.stderr.String(), "default metrics port in use")
		if def := net.JoinHostPort(subscriberMetricsHost, strconv.Itoa(subscriberMetricsFirst)); moved != (addr != def) {
			t.Errorf("subscriber %d serves on %s; logged the move to another port: %v", i, addr, moved)
		}
		got = append(got, addr)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("subscribers serve metrics on %v, want the range's first free ports %v", got, want)
	}
	t.Logf("metrics ports: %v", got)
	files, _ := filepath.Glob(filepath.Join(sdDir, "*.json"))
	if len(files) != nSubs {
		t.Fatalf("%s holds %v, want %d files", sdDir, files, nSubs)
	}

	fh := start(t, ctx, feedhandlerBin, append([]string{"--count", "0", "--rate", "5000"}, feed...)...)
	fh.waitLog(t, `"publishing"`, 10*time.Second)
	t.Cleanup(func() { fh.cmd.Process.Signal(os.Interrupt) })

	// Prometheus finds the four through the files and scrapes each.
	waitFor(t, 30*time.Second, func() (bool, string) {
		up, err := api.subscriberTargetsUp()
		slices.Sort(up)
		return err == nil && slices.Equal(up, want), fmt.Sprintf("subscriber targets up %v (%v), want %v\nprometheus:\n%s", up, err, want, tail(pp.stderr.String()))
	})
	// Each target's series carry the file's labels and the subscriber's
	// own metrics.
	waitFor(t, 15*time.Second, func() (bool, string) {
		res, err := api.query(`count by (instance) ({job="subscriber",feed="tickcast",__name__=~"tickcast_subscriber_.+"})`)
		var inst []string
		for _, r := range res {
			inst = append(inst, r.Metric["instance"])
		}
		slices.Sort(inst)
		return err == nil && slices.Equal(inst, want), fmt.Sprintf("instances with tickcast_subscriber_* series: %v (%v), want %v", inst, err, want)
	})

	// End of session: every subscriber verified everything, nothing
	// missing, and removed its file.
	fh.cmd.Process.Signal(os.Interrupt)
	if code := fh.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	published := num(t, fh.summary(t), "messages")
	for i, s := range subs {
		code := s.wait(t, 15*time.Second)
		sum := s.summary(t)
		if code != 0 || sum["verify_ok"] != true || num(t, sum, "missing") != 0 || num(t, sum, "received") != published {
			t.Errorf("subscriber %d: exit %d, received %v of %d, missing %v, verify_ok %v\n%s", i, code, sum["received"], published,
				sum["missing"], sum["verify_ok"], tail(s.stderr.String()))
		}
	}
	if left, _ := os.ReadDir(sdDir); len(left) != 0 {
		t.Errorf("after the subscribers' exit %s still holds %v", sdDir, left)
	}
	t.Logf("%d subscribers verified %d messages each; %v in all", nSubs, published, time.Since(began).Round(time.Millisecond))
}

// shippedFileSD returns the file_sd_configs of the subscriber job of the
// shipped Prometheus configuration, failing the test unless there is one
// whose first pattern is a relative path.
func shippedFileSD(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../deploy/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ScrapeConfigs []struct {
			JobName string           `yaml:"job_name"`
			FileSD  []map[string]any `yaml:"file_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, sc := range c.ScrapeConfigs {
		if sc.JobName != "subscriber" || len(sc.FileSD) == 0 {
			continue
		}
		if files, _ := sc.FileSD[0]["files"].([]any); len(files) > 0 {
			if p, _ := files[0].(string); p != "" && !filepath.IsAbs(p) {
				return sc.FileSD
			}
		}
	}
	t.Fatalf("deploy/prometheus/prometheus.yml: job subscriber has no file_sd_configs with a relative path:\n%s", b)
	return nil
}

// loggedMetricsAddr returns the address a program logged that it serves
// metrics on.
func loggedMetricsAddr(t *testing.T, p *proc) string {
	t.Helper()
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var l struct {
			Message, Addr string
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "serving Prometheus metrics at /metrics" {
			return l.Addr
		}
	}
	t.Fatalf("%s logged no metrics address\n%s", filepath.Base(p.cmd.Path), tail(p.stderr.String()))
	return ""
}

// subscriberTargetsUp returns the addresses of the active targets of job
// subscriber whose last scrape succeeded (the targets API).
func (p promAPI) subscriberTargetsUp() ([]string, error) {
	resp, err := http.Get(p.base + "/api/v1/targets?" + url.Values{"state": {"active"}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				Labels map[string]string `json:"labels"`
				Health string            `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	var up []string
	for _, tg := range r.Data.ActiveTargets {
		if tg.Labels["job"] == "subscriber" && tg.Health == "up" {
			up = append(up, tg.Labels["instance"])
		}
	}
	return up, nil
}
