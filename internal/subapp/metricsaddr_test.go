package subapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/internal/cliconf"
)

// load loads the subscriber's settings from args and env, as cmd/subscriber
// does.
func load(t *testing.T, args []string, env map[string]string) Settings {
	t.Helper()
	var s Settings
	if err := cliconf.Load("subscriber", args, func(k string) string { return env[k] }, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMetricsPortsToTry: only --metrics-addr left at its default moves on
// to the range; the same address given by flag, environment or config file
// is that one port.
func TestMetricsPortsToTry(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sub.yml")
	if err := os.WriteFile(cfg, []byte("metrics-addr: "+DefaultMetricsAddr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"default", nil, nil, metricsPorts},
		{"flag", []string{"--metrics-addr", DefaultMetricsAddr}, nil, 1},
		{"env", nil, map[string]string{"TICKCAST_METRICS_ADDR": DefaultMetricsAddr}, 1},
		{"config file", []string{"--config", cfg}, nil, 1},
		{"other address", []string{"--metrics-addr", "127.0.0.1:9600"}, nil, 1},
	} {
		s := load(t, c.args, c.env)
		if got := s.metricsPortsToTry(); got != c.want {
			t.Errorf("%s: metrics-addr %s (origins %v): %d ports to try, want %d", c.name, s.MetricsAddr, s.Origins, got, c.want)
		}
	}
}

// TestMetricsDefaults: the flag's default is the address the range starts
// at, and its help states the range.
func TestMetricsDefaults(t *testing.T) {
	var s Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	if s.MetricsAddr != DefaultMetricsAddr {
		t.Errorf("--metrics-addr defaults to %q, the range starts at %q", s.MetricsAddr, DefaultMetricsAddr)
	}
	_, port, _ := net.SplitHostPort(DefaultMetricsAddr)
	var first int
	fmt.Sscan(port, &first)
	f, _ := reflect.TypeFor[Settings]().FieldByName("MetricsAddr")
	if r := fmt.Sprintf("%d..%d", first, first+metricsPorts-1); !strings.Contains(f.Tag.Get("help"), r) {
		t.Errorf("--metrics-addr help %q does not state the range %s", f.Tag.Get("help"), r)
	}
}

// TestCheckMetrics: --metrics-sd-dir must name a directory, with metrics on.
func TestCheckMetrics(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		args []string
		want string // the setting the error names; "" for none
	}{
		{[]string{"--metrics-sd-dir", dir}, ""},
		{[]string{"--metrics-sd-dir", filepath.Join(dir, "none")}, "metrics-sd-dir"},
		{[]string{"--metrics-sd-dir", file}, "metrics-sd-dir"},
		{[]string{"--metrics-sd-dir", dir, "--metrics-addr="}, "metrics-sd-dir"},
		{[]string{"--metrics-addr", "9465"}, "metrics-addr"},
	} {
		s := load(t, c.args, nil)
		err := s.checkMetrics()
		var ce *cliconf.Error
		if c.want == "" && err != nil || c.want != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// TestMetricsAddrInUse runs New and Run: an explicit address in use is an
// error naming --metrics-addr; a free one with --metrics-sd-dir registers
// the address in a file that the end of Run removes.
func TestMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := []string{"--recovery=false", "--group", "239.77.3.1:31001", "--channels", "1"}
	s := load(t, append(base, "--metrics-addr", ln.Addr().String()), nil)
	if _, err := New(s, zerolog.Nop(), io.Discard); err == nil || !strings.Contains(err.Error(), "--metrics-addr") || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("--metrics-addr %s in use: %v, want an error naming --metrics-addr", ln.Addr(), err)
	}

	dir := t.TempDir()
	s = load(t, append(base, "--metrics-addr", "127.0.0.1:0", "--metrics-sd-dir", dir), nil)
	a, err := New(s, zerolog.Nop(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Errorf("%s holds %v, want one .json file", dir, files)
	} else if b, _ := os.ReadFile(files[0]); !strings.Contains(string(b), `"`+a.met.srv.Addr()+`"`) {
		t.Errorf("%s: %s, want the target %s", files[0], b, a.met.srv.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.Run(ctx)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("after Run: %s holds %v, want nothing", dir, left)
	}
}
