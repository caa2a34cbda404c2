package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/recovery"
)

// The container test runs docker-compose.yml on a real Docker engine, with
// an override file of its own (written below) that changes only what a
// test on a shared host must: images built here (the programs, NATS and
// Prometheus, since no registry is reachable in CI), ports and a multicast
// group of its own, a finite restart policy, and more subscribers.
// Grafana is not started: its image cannot be built here.

// engineSubscribers are the subscriber services the test runs, with the
// settings each adds to the verifying subscriber of docker-compose.yml.
var engineSubscribers = []struct {
	service string
	args    []string
}{
	{"subscriber", nil}, // as in docker-compose.yml
	{"subscriber-loss", []string{"--inject-loss", "0.01", "--inject-seed", "3"}}, // recovers over NATS
	{"subscriber-lost", []string{"--inject-loss", "0.01", "--recovery=false"}},   // fires TickcastMessagesLost
	{"subscriber-late", nil}, // restarted mid-feed: joins late, loads the snapshot
}

// compose is the compose implementation: docker compose (v2) if the docker
// CLI has it, else docker-compose (v1).
func compose() ([]string, bool) {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, true
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}, true
	}
	return nil, false
}

// TestComposeOnEngine brings docker-compose.yml up on a real engine, each
// program in its own container on the host's network, and checks:
//
//   - the feed handler's and the subscribers' healthchecks (--health) turn
//     healthy;
//   - a subscriber container restarted mid-feed joins late and loads the
//     snapshot;
//   - Prometheus, in its own container, has every program as a target, up,
//     with the alert rules loaded, and TickcastMessagesLost fires for the
//     subscriber that loses messages with recovery off;
//   - compose stop ends the feed cleanly: the feed handler sends the end of
//     session and exits 0, and every subscriber exits with its summary:
//     verified, missing 0, the injected loss recovered over NATS;
//   - compose down leaves no container, volume or image of the test's.
func TestComposeOnEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: the container test runs in the full test run")
	}
	info, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	testenv.Need(t, "docker", err == nil, fmt.Sprintf("no Docker engine answers (docker info: %v %s)", err, bytes.TrimSpace(info)))
	cmp, ok := compose()
	testenv.Need(t, "docker", ok, "no compose implementation (docker compose or docker-compose)")
	start := time.Now()
	e := newEngineRun(t, cmp)
	t.Logf("engine %s, %s; images built in %v", bytes.TrimSpace(info), strings.Join(cmp, " "), time.Since(start).Round(time.Millisecond))
	t.Log("grafana: not started here (its image cannot be pulled or built without a registry); compose_test.go checks its provisioning")

	services := []string{"nats", "feedhandler", "prometheus"}
	for _, s := range engineSubscribers {
		services = append(services, s.service)
	}
	e.compose(append([]string{"up", "-d", "--no-build"}, services...)...)
	for _, svc := range []string{"feedhandler", "subscriber"} {
		e.waitHealthy(svc, 60*time.Second)
	}

	// Mid-feed, one subscriber container restarts: it joins late, once
	// every channel is far enough on that the start of its session comes
	// as a snapshot (recovery.DefaultSnapshotAbove messages).
	e.waitPublished(recovery.DefaultSnapshotAbove+2000, 120*time.Second)
	if out, err := exec.Command("docker", "restart", e.container("subscriber-late")).CombinedOutput(); err != nil {
		t.Fatalf("docker restart subscriber-late: %v\n%s", err, out)
	}

	e.checkPrometheus()

	// compose stop, the feed handler first: it ends its session, and the
	// subscribers end theirs.
	e.compose("stop", "feedhandler")
	if code := e.exitCode("feedhandler", 30*time.Second); code != 0 {
		t.Errorf("feed handler exit %d after compose stop, want 0\n%s", code, e.logs("feedhandler", true))
	}
	for _, s := range engineSubscribers {
		e.checkSubscriber(s.service)
	}
	t.Logf("the container test took %v", time.Since(start).Round(time.Second))
}

// engineRun is one run of the stack: its project name, files and images.
type engineRun struct {
	t          *testing.T
	cmp        []string
	project    string
	dir        string // the override file and the test's Prometheus configuration
	images     map[string]string
	ports      map[string]int
	group      string
	override   string
	containers map[string]string // by service, once looked up
}

func newEngineRun(t *testing.T, cmp []string) *engineRun {
	e := &engineRun{t: t, cmp: cmp, project: fmt.Sprintf("tickcast-enginetest-%d", os.Getpid()), dir: t.TempDir(),
		images: map[string]string{}, ports: map[string]int{}, containers: map[string]string{}}
	for _, name := range []string{"nats", "prometheus", "feedhandler", "subscriber", "subscriber-loss", "subscriber-lost", "subscriber-late"} {
		e.ports[name] = testenv.FreePorts(t, 1)[0]
	}
	e.group = fmt.Sprintf("239.77.%d.%d:%d", 100+os.Getpid()%100, 1+os.Getpid()%200, 20000+testenv.FreePorts(t, 1)[0]%20000)
	t.Cleanup(e.down)
	e.buildImages()
	e.writeOverride()
	return e
}

// run runs a command, failing the test with its output if it fails.
func (e *engineRun) run(dir string, env []string, name string, args ...string) string {
	e.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildImages builds the three images from programs built on this host:
// tickcast's (engine/prebuilt.Dockerfile, the Dockerfile's runtime stage),
// NATS (nats-server from the module tickcast uses) and Prometheus (Debian's
// binary with its loader and libraries).
func (e *engineRun) buildImages() {
	t := e.t
	tag := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().Unix())
	build := func(name, dockerfile, ctx string) {
		ref := "tickcast-enginetest/" + name + ":" + tag
		df, _ := filepath.Abs(dockerfile)
		e.run(ctx, nil, "docker", "build", "-q", "-t", ref, "-f", df, ".")
		e.images[name] = ref
	}
	static := []string{"CGO_ENABLED=0"}

	progs := filepath.Join(e.dir, "tickcast")
	e.run(root, static, "go", "build", "-trimpath", "-o", progs+"/", "./cmd/feedhandler", "./cmd/subscriber")
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Logf("no CA certificates on this host (%v): the image gets an empty bundle", err)
	}
	if err := os.WriteFile(filepath.Join(progs, "ca-certificates.crt"), certs, 0o644); err != nil {
		t.Fatal(err)
	}
	build("tickcast", "engine/prebuilt.Dockerfile", progs)

	natsDir := filepath.Join(e.dir, "nats")
	e.run(root, static, "go", "build", "-trimpath", "-o", natsDir+"/nats-server", "github.com/nats-io/nats-server/v2")
	build("nats", "engine/nats.Dockerfile", natsDir)

	prom := testenv.NeedTool(t, "prometheus")
	promDir := filepath.Join(e.dir, "prometheus")
	for _, f := range append([]string{prom}, sharedLibraries(t, prom)...) {
		copyInto(t, filepath.Join(promDir, "rootfs"), f)
	}
	if prom != "/usr/bin/prometheus" {
		copyFile(t, prom, filepath.Join(promDir, "rootfs/usr/bin/prometheus"))
	}
	build("prometheus", "engine/prometheus.Dockerfile", promDir)
}

// sharedLibraries returns the loader and libraries ldd lists for bin.
func sharedLibraries(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		// A static binary: ldd says "not a dynamic executable" and fails.
		return nil
	}
	var libs []string
	for _, m := range regexp.MustCompile(`(?m)(/\S+) \(0x[0-9a-f]+\)$`).FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	return libs
}

// copyInto copies host file path to the same path under dir, following
// symbolic links.
func copyInto(t *testing.T, dir, path string) {
	t.Helper()
	copyFile(t, path, filepath.Join(dir, path))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// writeOverride writes the test's override file and Prometheus
// configuration.
func (e *engineRun) writeOverride() {
	t := e.t
	feedEnv := func() map[string]string {
		return map[string]string{
			"TICKCAST_GROUP":    e.group,
			"TICKCAST_NATS_URL": fmt.Sprintf("nats://127.0.0.1:%d", e.ports["nats"]),
		}
	}
	health := func(prog string, port int) map[string]any {
		return map[string]any{
			"test":     []string{"CMD", "/usr/local/bin/" + prog, "--health", fmt.Sprintf("http://127.0.0.1:%d/healthz", port)},
			"interval": "1s", "timeout": "3s", "retries": 3, "start_period": "5s",
		}
	}
	services := map[string]any{
		"nats": map[string]any{
			"image":   e.images["nats"],
			"command": []string{"--name", e.project, "--addr", "127.0.0.1", "--port", strconv.Itoa(e.ports["nats"]), "--http_port", "0"},
			"restart": "no",
		},
		"feedhandler": map[string]any{
			"image":       e.images["tickcast"],
			"command":     []string{"feedhandler", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", e.ports["feedhandler"])},
			"environment": merge(feedEnv(), map[string]string{"TICKCAST_RATE": "5000"}),
			"healthcheck": health("feedhandler", e.ports["feedhandler"]),
			"restart":     "no",
		},
		"prometheus": map[string]any{
			"image": e.images["prometheus"],
			"command": []string{"--config.file=/etc/tickcast-enginetest/prometheus.yml", "--storage.tsdb.path=/prometheus",
				fmt.Sprintf("--web.listen-address=127.0.0.1:%d", e.ports["prometheus"])},
			"volumes": []string{filepath.Join(e.dir, "prometheus-config") + ":/etc/tickcast-enginetest:ro"},
			"restart": "no",
		},
	}
	base := loadProject(t)
	baseSub := base.Services["subscriber"]
	var targets []string
	for _, s := range engineSubscribers {
		port := e.ports[s.service]
		targets = append(targets, fmt.Sprintf("127.0.0.1:%d", port))
		args := append([]string{"subscriber", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--verify"}, s.args...)
		svc := map[string]any{
			"image":       e.images["tickcast"],
			"command":     args,
			"environment": feedEnv(),
			"healthcheck": health("subscriber", port),
			"restart":     "no",
		}
		if s.service != "subscriber" {
			// A service of the test's own: the feed's settings of
			// docker-compose.yml's subscriber, on the host's network.
			env := map[string]string{}
			for k, v := range baseSub.Environment {
				if v != nil {
					env[k] = *v
				}
			}
			svc["environment"] = merge(env, feedEnv())
			svc["network_mode"] = "host"
			svc["depends_on"] = []string{"nats"}
		}
		services[s.service] = svc
	}
	b, err := json.MarshalIndent(map[string]any{"services": services}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// JSON is YAML: both compose implementations read it.
	e.override = filepath.Join(e.dir, "override.yml")
	if err := os.WriteFile(e.override, b, 0o644); err != nil {
		t.Fatal(err)
	}
	promCfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - /etc/prometheus/alerts.yml
scrape_configs:
  - job_name: feedhandler
    static_configs:
      - targets: ["127.0.0.1:%d"]
  - job_name: subscriber
    static_configs:
      - targets: ["%s"]
`, e.ports["feedhandler"], strings.Join(targets, `", "`))
	if err := os.MkdirAll(filepath.Join(e.dir, "prometheus-config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "prometheus-config", "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

func merge(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// compose runs the compose implementation on docker-compose.yml and the
// override, in the test's project.
func (e *engineRun) compose(args ...string) string {
	e.t.Helper()
	full := append(append([]string{}, e.cmp[1:]...), "-p", e.project, "-f", composeFile, "-f", e.override)
	return e.run("", nil, e.cmp[0], append(full, args...)...)
}

// container returns the container of service svc, running or stopped.
func (e *engineRun) container(svc string) string {
	e.t.Helper()
	if id, ok := e.containers[svc]; ok {
		return id
	}
	id := strings.TrimSpace(e.compose("ps", "-a", "-q", svc))
	if id == "" {
		e.t.Fatalf("no container for service %s", svc)
	}
	e.containers[svc] = strings.Fields(id)[0]
	return e.containers[svc]
}

// inspect returns a field of svc's container (a Go template).
func (e *engineRun) inspect(svc, format string) string {
	e.t.Helper()
	return strings.TrimSpace(e.run("", nil, "docker", "inspect", "--format", format, e.container(svc)))
}

// waitHealthy waits until svc's healthcheck reports healthy.
func (e *engineRun) waitHealthy(svc string, d time.Duration) {
	e.t.Helper()
	start := time.Now()
	for {
		status := e.inspect(svc, "{{.State.Health.Status}}")
		if status == "healthy" {
			e.t.Logf("%s healthy after %v", svc, time.Since(start).Round(100*time.Millisecond))
			if time.Since(start) > 10*time.Second {
				e.t.Logf("%s: its health log: %s", svc, e.inspect(svc, "{{json .State.Health.Log}}"))
			}
			return
		}
		if time.Since(start) > d {
			e.t.Fatalf("%s: health %q after %v\nhealth log: %s\n%s", svc, status, d, e.inspect(svc, "{{json .State.Health.Log}}"), e.logs(svc, true))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// logs returns svc's container output: stdout, or stdout and stderr.
func (e *engineRun) logs(svc string, stderr bool) string {
	cmd := exec.Command("docker", "logs", e.container(svc))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	if stderr {
		return out.String() + errb.String()
	}
	return out.String()
}

// exitCode waits for svc's container to exit and returns its exit code.
func (e *engineRun) exitCode(svc string, d time.Duration) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "wait", e.container(svc)).Output()
	if err != nil {
		e.t.Fatalf("%s did not exit within %v: %v\n%s", svc, d, err, e.logs(svc, true))
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		e.t.Fatalf("docker wait %s: %q", svc, out)
	}
	return code
}

// waitPublished waits until every channel of the feed handler has
// published at least n messages, from its metrics
// (tickcast_recovery_store_next_sequence).
func (e *engineRun) waitPublished(n int, d time.Duration) {
	t := e.t
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", e.ports["feedhandler"])
	re := regexp.MustCompile(`(?m)^tickcast_recovery_store_next_sequence\{channel="\d+"\} (\S+)$`)
	start := time.Now()
	for {
		lowest := -1.0
		if resp, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				v, _ := strconv.ParseFloat(m[1], 64)
				if lowest < 0 || v < lowest {
					lowest = v
				}
			}
		}
		if lowest > float64(n) {
			t.Logf("every channel past message %d after %v", n, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > d {
			t.Fatalf("the feed handler's channels did not all reach message %d within %v (lowest next sequence %.0f)", n, d, lowest)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkPrometheus waits until Prometheus has every program as a target, up,
// and TickcastMessagesLost firing for subscriber-lost.
func (e *engineRun) checkPrometheus() {
	t := e.t
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1/", e.ports["prometheus"])
	get := func(path string, v any) error {
		resp, err := http.Get(api + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", resp.Status, b)
		}
		return json.Unmarshal(b, v)
	}
	wantUp := len(engineSubscribers) + 1
	lostAt := fmt.Sprintf("127.0.0.1:%d", e.ports["subscriber-lost"])
	deadline := time.Now().Add(90 * time.Second)
	start := time.Now()
	var last string
	for {
		var targets struct {
			Data struct {
				ActiveTargets []struct {
					ScrapeURL string `json:"scrapeUrl"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		var alerts struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		var rules struct {
			Data struct {
				Groups []struct {
					Rules []struct{ Name string } `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		up, firing, loaded := 0, false, 0
		err := get("targets", &targets)
		if err == nil {
			err = get("alerts", &alerts)
		}
		if err == nil {
			err = get("rules", &rules)
		}
		if err == nil {
			var down []string
			for _, tg := range targets.Data.ActiveTargets {
				if tg.Health == "up" {
					up++
				} else {
					down = append(down, tg.ScrapeURL+" "+tg.Health+" "+tg.LastError)
				}
			}
			for _, a := range alerts.Data.Alerts {
				if a.Labels["alertname"] == "TickcastMessagesLost" && a.Labels["instance"] == lostAt && a.State == "firing" {
					firing = true
				}
			}
			for _, g := range rules.Data.Groups {
				loaded += len(g.Rules)
			}
			last = fmt.Sprintf("%d of %d targets up (down: %q), %d rules loaded, TickcastMessagesLost firing for %s: %v", up, wantUp, down, loaded, lostAt, firing)
			if up == wantUp && len(targets.Data.ActiveTargets) == wantUp && firing && loaded > 0 {
				t.Logf("prometheus after %v: %s", time.Since(start).Round(100*time.Millisecond), last)
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s\n%s", last, e.logs("prometheus", true))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkSubscriber waits for subscriber service svc to exit and checks its
// summary, the last JSON line it printed.
func (e *engineRun) checkSubscriber(svc string) {
	t := e.t
	code := e.exitCode(svc, 60*time.Second)
	var sum map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.logs(svc, false)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["role"] == "subscriber" {
			sum = m
		}
	}
	if sum == nil {
		t.Errorf("%s: no summary (exit %d)\n%s", svc, code, e.logs(svc, true))
		return
	}
	n := func(k string) float64 { f, _ := sum[k].(float64); return f }
	t.Logf("%s: exit %d, %s, received %.0f, missing %.0f, recovered %.0f, injected drops %.0f, snapshots %.0f, verify_ok %v",
		svc, code, sum["exit_reason"], n("received"), n("missing"), n("recovered"), n("injected_dropped_datagrams"), n("snapshots"), sum["verify_ok"])
	if sum["verify_ok"] != true || sum["exit_reason"] != "end-of-session" {
		t.Errorf("%s: verify_ok %v, exit_reason %v; want true, end-of-session", svc, sum["verify_ok"], sum["exit_reason"])
	}
	switch svc {
	case "subscriber-lost":
		if n("missing") == 0 || code == 0 {
			t.Errorf("%s: missing %.0f, exit %d; want messages lost (recovery off, loss injected) and a failing exit", svc, n("missing"), code)
		}
		return
	case "subscriber-loss":
		if n("injected_dropped_datagrams") == 0 || n("recovered") == 0 {
			t.Errorf("%s: injected drops %.0f, recovered %.0f; want loss injected and recovered over NATS", svc, n("injected_dropped_datagrams"), n("recovered"))
		}
	case "subscriber-late":
		if n("snapshots") == 0 {
			t.Errorf("%s: restarted mid-feed, it loaded no snapshot", svc)
		}
	}
	if code != 0 || n("missing") != 0 || sum["ok"] != true {
		t.Errorf("%s: exit %d, missing %.0f, ok %v; want 0, 0, true\n%s", svc, code, n("missing"), sum["ok"], e.logs(svc, true))
	}
}

// down removes the stack, its volumes and the test's images, and checks that
// nothing of the project is left.
func (e *engineRun) down() {
	t := e.t
	if e.override != "" {
		full := append(append([]string{}, e.cmp[1:]...), "-p", e.project, "-f", composeFile, "-f", e.override, "down", "-v", "--remove-orphans", "--timeout", "5")
		if out, err := exec.Command(e.cmp[0], full...).CombinedOutput(); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	}
	for _, ref := range e.images {
		if out, err := exec.Command("docker", "rmi", "-f", ref).CombinedOutput(); err != nil {
			t.Errorf("docker rmi %s: %v\n%s", ref, err, out)
		}
	}
	label := "label=com.docker.compose.project=" + e.project
	for _, what := range [][]string{{"ps", "-aq", "--filter", label}, {"volume", "ls", "-q", "--filter", label}, {"network", "ls", "-q", "--filter", label}, {"images", "-q", "tickcast-enginetest/*"}} {
		out, _ := exec.Command("docker", what...).Output()
		if left := strings.TrimSpace(string(out)); left != "" {
			t.Errorf("left behind after compose down (docker %s): %s", strings.Join(what, " "), left)
		}
	}
}
