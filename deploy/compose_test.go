// Package deploy checks the container setup: docker-compose.yml, the
// Dockerfile and deploy/prometheus/prometheus.yml. Nothing here needs
// Docker: the compose file is loaded with compose-go (the library docker
// compose itself uses) and checked against the programs' real settings.
package deploy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/prometheus/common/model"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/internal/testenv"
	"gopkg.in/yaml.v3"
)

// Paths from this package's directory.
const (
	root        = ".."
	composeFile = "../docker-compose.yml"
	dockerfile  = "../Dockerfile"
	goMod       = "../go.mod"
)

// programs are the services that run tickcast's own programs, each the
// program of the same name.
var programs = []string{"feedhandler", "subscriber"}

// TestCompose loads docker-compose.yml and checks that it can work:
//
//   - the five services exist, and the feed handler and the subscriber are
//     built from the Dockerfile and run the program of their name;
//   - every TICKCAST_* variable and every --flag given to them is a setting
//     of that program (the feed handler's from its --help, the subscriber's
//     from subapp.Settings), with a value where the setting needs one;
//   - the settings the subscriber must share with the feed handler (channel
//     layout, synthetic feed for --verify) are equal;
//   - every service runs with host networking, and multicast stays on the
//     host: the feed handler sends on loopback with TTL 0;
//   - both programs talk to the nats service where it listens, and check
//     their health at their own metrics address;
//   - Prometheus's --config.file resolves through its mounts to a file that
//     the prometheus config package loads, whose rule files exist inside the
//     mount, and whose scrape targets are each program's --metrics-addr;
//   - every bind-mounted path exists, and Grafana's provisioning works in
//     the container: dashboard providers read mounted directories that
//     hold dashboards, and the datasource is where Prometheus listens.
func TestCompose(t *testing.T) {
	p := loadProject(t)
	for _, name := range []string{"nats", "prometheus", "grafana", "feedhandler", "subscriber"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("service %q missing", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	settings := map[string]map[string]setting{
		"feedhandler": parseUsage(t, feedhandlerHelp(t)),
		"subscriber":  parseUsage(t, cliconf.Usage("subscriber", &subapp.Settings{})),
	}
	given := map[string]map[string]string{} // program → setting → value from the compose file
	for _, prog := range programs {
		svc := p.Services[prog]
		checkBuild(t, p, svc)
		given[prog] = checkSettings(t, svc, settings[prog])
	}

	fh, sub := given["feedhandler"], given["subscriber"]
	for _, name := range []string{"channels", "group", "group-b", "seed", "instruments", "feed-name", "max-datagram", "iface"} {
		if fh[name] != sub[name] {
			t.Errorf("%s: feed handler has %q, subscriber %q; they must agree", name, fh[name], sub[name])
		}
	}
	if ip := net.ParseIP(fh["iface"]); ip == nil || !ip.IsLoopback() {
		t.Errorf("feed handler iface %q: the default must be loopback, so that multicast stays on the host", fh["iface"])
	}
	if fh["ttl"] != "0" {
		t.Errorf("feed handler ttl %q: the default must be 0 (TICKCAST_TTL), so that multicast stays on the host", fh["ttl"])
	}
	for name, svc := range p.Services {
		if svc.NetworkMode != "host" {
			t.Errorf("%s: network_mode %q, want host (every service on the host's network, as multicast deployments run)", name, svc.NetworkMode)
		}
	}
	natsAt := natsListen(t, p.Services["nats"])
	for _, prog := range programs {
		if u := given[prog]["nats-url"]; strings.TrimPrefix(u, "nats://") != natsAt {
			t.Errorf("%s nats-url %q: want the nats service where it listens, nats://%s", prog, u, natsAt)
		}
		checkHealthcheck(t, p.Services[prog], given[prog]["metrics-addr"])
	}

	checkMounts(t, p)
	scrapeInterval := checkPrometheus(t, p, given)
	checkGrafana(t, p, scrapeInterval)
}

// loadProject loads the compose file the way docker compose does, with a
// fixed environment so that the result does not depend on the caller's.
func loadProject(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory(root),
		cli.WithEnv([]string{}),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("loading %s: %v", composeFile, err)
	}
	return p
}

// A setting of one program, as its usage text lists it.
type setting struct {
	env  string // TICKCAST_* variable
	bool bool   // a flag that takes no value
}

// feedhandlerHelp builds cmd/feedhandler (its Settings are in package main)
// and returns its --help output.
func feedhandlerHelp(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "feedhandler")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/feedhandler").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/feedhandler: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("feedhandler --help: %v", err)
	}
	return string(out)
}

var (
	usageFlag = regexp.MustCompile(`^  --([a-z0-9-]+)( \S+)?$`)
	usageEnv  = regexp.MustCompile(`^\s+env (TICKCAST_[A-Z0-9_]+),`)
)

// parseUsage reads the settings from cliconf's usage text: a line per flag
// ("  --name type", no type for a bool) and, after its help, the line
// "env TICKCAST_NAME, default ...".
func parseUsage(t *testing.T, usage string) map[string]setting {
	t.Helper()
	settings := map[string]setting{}
	flag := ""
	sc := bufio.NewScanner(strings.NewReader(usage))
	for sc.Scan() {
		if m := usageFlag.FindStringSubmatch(sc.Text()); m != nil {
			flag = m[1]
			settings[flag] = setting{bool: m[2] == ""}
		} else if m := usageEnv.FindStringSubmatch(sc.Text()); m != nil && flag != "" {
			s := settings[flag]
			s.env = m[1]
			settings[flag] = s
			flag = ""
		}
	}
	if len(settings) < 10 {
		t.Fatalf("found only %d settings in the usage text:\n%s", len(settings), usage)
	}
	for name, s := range settings {
		if s.env == "" {
			t.Fatalf("no environment variable for --%s in the usage text", name)
		}
	}
	return settings
}

// natsListen returns the address the nats service listens on, from its
// --addr and --port.
func natsListen(t *testing.T, svc types.ServiceConfig) string {
	t.Helper()
	addr, port := "0.0.0.0", "4222"
	for i := 0; i+1 < len(svc.Command); i++ {
		switch svc.Command[i] {
		case "--addr", "-a":
			addr = svc.Command[i+1]
		case "--port", "-p":
			port = svc.Command[i+1]
		}
	}
	return net.JoinHostPort(addr, port)
}

// checkHealthcheck checks that svc's healthcheck runs its own program with
// --health at its metrics address (the images have no shell).
func checkHealthcheck(t *testing.T, svc types.ServiceConfig, metricsAddr string) {
	t.Helper()
	want := []string{"CMD", "/usr/local/bin/" + svc.Name, "--health", "http://" + metricsAddr + "/healthz"}
	if svc.HealthCheck == nil || !slices.Equal(svc.HealthCheck.Test, want) {
		var got []string
		if svc.HealthCheck != nil {
			got = svc.HealthCheck.Test
		}
		t.Errorf("%s: healthcheck %q, want %q", svc.Name, got, want)
	}
}

// checkBuild checks that svc runs its program from an image built from the
// project's Dockerfile.
func checkBuild(t *testing.T, p *types.Project, svc types.ServiceConfig) {
	t.Helper()
	b := svc.Build
	if b == nil {
		t.Errorf("%s: not built (no build:)", svc.Name)
		return
	}
	df := b.Dockerfile
	if !filepath.IsAbs(df) {
		df = filepath.Join(b.Context, df)
	}
	want, err := filepath.Abs(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Clean(df) != want {
		t.Errorf("%s: built from %s, want %s", svc.Name, df, want)
	}
	if len(svc.Entrypoint) > 0 {
		t.Errorf("%s: entrypoint %q; the image runs the program named first in command", svc.Name, svc.Entrypoint)
	}
	if len(svc.Command) == 0 || svc.Command[0] != svc.Name {
		t.Errorf("%s: command %q must start with the program %q", svc.Name, svc.Command, svc.Name)
	}
}

// checkSettings checks svc's TICKCAST_* variables and --flags against the
// program's settings and returns the values they give (a flag overriding a
// variable, as in the programs).
func checkSettings(t *testing.T, svc types.ServiceConfig, settings map[string]setting) map[string]string {
	t.Helper()
	byEnv := map[string]string{}
	for name, s := range settings {
		byEnv[s.env] = name
	}
	given := map[string]string{}
	for key, v := range svc.Environment {
		if !strings.HasPrefix(key, cliconf.EnvPrefix) {
			continue
		}
		name, ok := byEnv[key]
		switch {
		case !ok:
			t.Errorf("%s: environment %s is no setting of %s", svc.Name, key, svc.Name)
		case v == nil:
			t.Errorf("%s: environment %s has no value", svc.Name, key)
		default:
			given[name] = *v
		}
	}
	args := svc.Command
	if len(args) > 0 {
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: command argument %q is not a flag (the programs take no arguments)", svc.Name, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		s, ok := settings[name]
		if !ok {
			t.Errorf("%s: flag %s is no setting of %s", svc.Name, a, svc.Name)
			continue
		}
		switch {
		case hasValue:
		case s.bool:
			value = "true"
		case i+1 < len(args):
			i++
			value = args[i]
		default:
			t.Errorf("%s: flag %s needs a value", svc.Name, a)
		}
		given[name] = value
	}
	return given
}

// checkMounts checks that every bind-mounted host path exists.
func checkMounts(t *testing.T, p *types.Project) {
	t.Helper()
	for _, svc := range p.Services {
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind mount source: %v", svc.Name, err)
			}
		}
	}
}

// checkGrafana checks Grafana's provisioning as the container sees it:
// both provisioning directories are mounted, every dashboard provider's
// path is a mounted directory holding dashboards (JSON), and every
// Prometheus datasource points at the prometheus service, assuming the
// scrape interval Prometheus has.
func checkGrafana(t *testing.T, p *types.Project, scrapeInterval time.Duration) {
	t.Helper()
	svc := p.Services["grafana"]
	prov, ok := hostPath(svc, "/etc/grafana/provisioning")
	if !ok {
		t.Fatal("grafana: /etc/grafana/provisioning is not a bind mount")
	}
	var providers struct {
		Providers []struct {
			Name    string
			Options struct{ Path string }
		}
	}
	var datasources struct {
		Datasources []struct {
			Name     string
			Type     string
			URL      string
			JSONData struct {
				TimeInterval string `yaml:"timeInterval"`
			} `yaml:"jsonData"`
		}
	}
	for dir, dst := range map[string]any{"dashboards": &providers, "datasources": &datasources} {
		files, _ := filepath.Glob(filepath.Join(prov, dir, "*.yml"))
		if len(files) == 0 {
			t.Errorf("grafana: no provisioning files %s/%s/*.yml", prov, dir)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err == nil {
				err = yaml.Unmarshal(data, dst)
			}
			if err != nil {
				t.Errorf("grafana provisioning: %v", err)
			}
		}
	}
	for _, pr := range providers.Providers {
		dir, ok := hostPath(svc, pr.Options.Path)
		if !ok {
			t.Errorf("grafana dashboard provider %q: path %s is not mounted", pr.Name, pr.Options.Path)
			continue
		}
		if json, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(json) == 0 {
			t.Errorf("grafana dashboard provider %q: no dashboards (*.json) in %s", pr.Name, dir)
		}
	}
	for _, ds := range datasources.Datasources {
		if ds.Type != "prometheus" {
			continue
		}
		if want := "http://" + prometheusListen(p.Services["prometheus"]); ds.URL != want {
			t.Errorf("grafana datasource %q: url %q, want where the prometheus service listens, %s", ds.Name, ds.URL, want)
		}
		if ti := ds.JSONData.TimeInterval; ti != "" {
			if d, err := time.ParseDuration(ti); err != nil || d != scrapeInterval {
				t.Errorf("grafana datasource %q: timeInterval %s, but Prometheus scrapes every %v", ds.Name, ti, scrapeInterval)
			}
		}
	}
}

// prometheusListen returns the address the prometheus service listens on.
func prometheusListen(svc types.ServiceConfig) string {
	for _, a := range svc.Command {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			return v
		}
	}
	return "0.0.0.0:9090"
}

// hostPath maps a path inside svc's container to the host through its bind
// mounts.
func hostPath(svc types.ServiceConfig, path string) (string, bool) {
	for _, v := range svc.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		if rel, err := filepath.Rel(v.Target, path); err == nil && filepath.IsLocal(rel) {
			return filepath.Join(v.Source, rel), true
		}
	}
	return "", false
}

// checkPrometheus loads the configuration Prometheus is started with and
// checks its rule files and scrape targets. It returns the global scrape
// interval.
func checkPrometheus(t *testing.T, p *types.Project, given map[string]map[string]string) time.Duration {
	t.Helper()
	svc := p.Services["prometheus"]
	checkImageVersion(t, svc.Image)
	inContainer := ""
	for _, a := range svc.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			inContainer = v
		}
	}
	if inContainer == "" {
		t.Fatalf("prometheus: no --config.file=PATH in command %q", svc.Command)
	}
	file, ok := hostPath(svc, inContainer)
	if !ok {
		t.Fatalf("prometheus: --config.file %s is not in a bind mount", inContainer)
	}
	if want, _ := filepath.Abs("prometheus/prometheus.yml"); file != want {
		t.Errorf("prometheus loads %s, want %s", file, want)
	}
	// Prometheus's own checker validates the file (and the rule files it
	// names); the fields checked below are read with a small YAML model.
	// Without promtool (Debian package prometheus) that one check is left
	// out, and said so; TICKCAST_REQUIRE=prometheus makes it a failure.
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "config", file).CombinedOutput(); err != nil {
			t.Fatalf("promtool check config %s: %v\n%s", file, err, out)
		}
	} else if testenv.Required("prometheus") {
		t.Fatal("TICKCAST_REQUIRE includes prometheus but promtool is not installed")
	} else {
		t.Log("promtool is not installed (Debian package prometheus): prometheus.yml not checked by promtool")
	}
	cfg, err := loadPromConfig(file)
	if err != nil {
		t.Fatalf("prometheus config: %v", err)
	}

	// Rule files: relative to the config file, inside the same mount.
	if len(cfg.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no rule files")
	}
	for _, rf := range cfg.RuleFiles {
		if !filepath.IsAbs(rf) {
			rf = filepath.Join(filepath.Dir(file), rf)
		}
		if _, err := os.Stat(rf); err != nil {
			t.Errorf("rule file: %v", err)
		}
	}
	if !slices.ContainsFunc(cfg.RuleFiles, func(rf string) bool { return filepath.Base(rf) == "alerts.yml" }) {
		t.Errorf("rule files %q: alerts.yml missing", cfg.RuleFiles)
	}

	// Scrape targets: job J scrapes program J at its --metrics-addr (every
	// service is on the host's network).
	scraped := map[string]bool{}
	for i := range cfg.ScrapeConfigs {
		sc := &cfg.ScrapeConfigs[i]
		prog := sc.JobName
		if !slices.Contains(programs, prog) {
			t.Errorf("scrape job %q: no tickcast program of that name", prog)
			continue
		}
		scraped[prog] = true
		addr := given[prog]["metrics-addr"]
		if _, _, err := net.SplitHostPort(addr); err != nil {
			t.Errorf("%s metrics-addr %q: %v", prog, addr, err)
			continue
		}
		n := 0
		for _, tg := range staticTargets(t, sc) {
			n++
			if tg != addr {
				t.Errorf("job %s target %s, but %s serves metrics at %s", prog, tg, prog, addr)
			}
		}
		if n == 0 {
			t.Errorf("job %s has no static targets", prog)
		}
	}
	for _, prog := range programs {
		if !scraped[prog] {
			t.Errorf("prometheus does not scrape %s", prog)
		}
	}
	return cfg.Global.ScrapeInterval
}

// promConfig is the part of prometheus.yml this test reads.
type promConfig struct {
	Global struct {
		ScrapeInterval time.Duration `yaml:"-"`
		Raw            string        `yaml:"scrape_interval"`
	} `yaml:"global"`
	RuleFiles     []string           `yaml:"rule_files"`
	ScrapeConfigs []promScrapeConfig `yaml:"scrape_configs"`
}

type promScrapeConfig struct {
	JobName       string `yaml:"job_name"`
	StaticConfigs []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
	Other map[string]any `yaml:",inline"`
}

func loadPromConfig(file string) (*promConfig, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var c promConfig
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if c.Global.Raw != "" {
		d, err := model.ParseDuration(c.Global.Raw)
		if err != nil {
			return nil, fmt.Errorf("global.scrape_interval %q: %v", c.Global.Raw, err)
		}
		c.Global.ScrapeInterval = time.Duration(d)
	}
	return &c, nil
}

// staticTargets returns the addresses of a scrape job's static_configs and
// fails the test for any other kind of service discovery but file_sd, whose
// targets the subscribers write at run time (--metrics-sd-dir).
func staticTargets(t *testing.T, sc *promScrapeConfig) []string {
	t.Helper()
	for k := range sc.Other {
		if strings.HasSuffix(k, "_sd_configs") && k != "file_sd_configs" {
			t.Errorf("job %s: %s; only static_configs can be checked here", sc.JobName, k)
		}
	}
	var addrs []string
	for _, g := range sc.StaticConfigs {
		addrs = append(addrs, g.Targets...)
	}
	return addrs
}

// checkImageVersion checks that the Prometheus image runs the version whose
// config package loaded prometheus.yml here: module v0.3MM.P is
// Prometheus v3.MM.P.
func checkImageVersion(t *testing.T, image string) {
	t.Helper()
	mod := requiredVersion(t, "github.com/prometheus/prometheus")
	m := regexp.MustCompile(`^v0\.3(\d\d)\.(\d+)$`).FindStringSubmatch(mod)
	if m == nil {
		t.Fatalf("github.com/prometheus/prometheus %s: not a v0.3MM.P version", mod)
	}
	want := "prom/prometheus:v3." + strings.TrimLeft(m[1], "0") + "." + m[2]
	if m[1] == "00" {
		want = "prom/prometheus:v3.0." + m[2]
	}
	if image != want {
		t.Errorf("prometheus image %s; go.mod's github.com/prometheus/prometheus %s is %s", image, mod, want)
	}
}

// requiredVersion returns the version of module path that go.mod requires.
func requiredVersion(t *testing.T, path string) string {
	t.Helper()
	for _, f := range goModLines(t) {
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
		if len(f) >= 3 && f[0] == "require" && f[1] == path {
			return f[2]
		}
	}
	t.Fatalf("go.mod does not require %s", path)
	return ""
}

// goModLines returns go.mod's lines split into fields.
func goModLines(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(goMod)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	for line := range strings.Lines(string(data)) {
		lines = append(lines, strings.Fields(line))
	}
	return lines
}

// TestDockerfileGoVersion checks that the Dockerfile's build stage uses the
// Go release go.mod's go directive names (major.minor).
func TestDockerfileGoVersion(t *testing.T) {
	want := ""
	for _, f := range goModLines(t) {
		if len(f) == 2 && f[0] == "go" {
			want = majorMinor(f[1])
		}
	}
	if want == "" {
		t.Fatal("go.mod has no go directive")
	}
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	from := regexp.MustCompile(`(?im)^FROM\s+(?:--\S+\s+)*golang:([0-9][0-9.]*)\S*\s+AS\s+\S+`).FindAllStringSubmatch(string(data), -1)
	if len(from) != 1 {
		t.Fatalf("want one build stage FROM golang:VERSION AS NAME in the Dockerfile, found %d", len(from))
	}
	if got := majorMinor(from[0][1]); got != want {
		t.Errorf("Dockerfile builds with golang:%s, go.mod says go %s", from[0][1], want)
	}
}

// majorMinor returns "1.26" for "1.26", "1.26.0" and "1.26.3".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// TestPrebuiltRuntimeStage checks that engine/prebuilt.Dockerfile, which CI
// builds from programs built on the host, is the Dockerfile's runtime
// stage: the same instructions in the same order, each COPY to the same
// destination (its sources are the host's files instead of the builder
// stage's).
func TestPrebuiltRuntimeStage(t *testing.T) {
	stage := func(path, from string) []string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		in := false
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
				in = strings.EqualFold(line, from)
				continue
			}
			if !in {
				continue
			}
			if f := strings.Fields(line); strings.EqualFold(f[0], "COPY") {
				line = "COPY … " + f[len(f)-1]
			}
			lines = append(lines, line)
		}
		if len(lines) == 0 {
			t.Fatalf("%s: no stage %q", path, from)
		}
		return lines
	}
	want := stage(dockerfile, "FROM scratch AS runtime")
	got := stage("engine/prebuilt.Dockerfile", "FROM scratch")
	if !slices.Equal(got, want) {
		t.Errorf("engine/prebuilt.Dockerfile:\n%s\nthe Dockerfile's runtime stage:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The runtime stage is the last, so that a plain docker build (and
	// docker compose up --build) makes it.
	data, _ := os.ReadFile(dockerfile)
	froms := regexp.MustCompile(`(?im)^FROM\s.*$`).FindAllString(string(data), -1)
	if last := froms[len(froms)-1]; !strings.EqualFold(last, "FROM scratch AS runtime") {
		t.Errorf("the Dockerfile's last stage is %q, want the runtime stage (FROM scratch AS runtime)", last)
	}
}
