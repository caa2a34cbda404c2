package metricsrv

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestCheckAddr(t *testing.T) {
	for addr, ok := range map[string]bool{"": true, "127.0.0.1:9464": true, ":0": true, "[::1]:80": true,
		"127.0.0.1": false, "localhost:http": false, "1.2.3.4:70000": false, "nonsense": false} {
		if err := CheckAddr(addr); (err == nil) != ok {
			t.Errorf("CheckAddr(%q) = %v", addr, err)
		}
	}
}

func TestServe(t *testing.T) {
	s, err := Start("127.0.0.1:0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("status %d\n%s", resp.StatusCode, body)
	}
	// The same address again: in use, and said so, naming the setting.
	if _, err := Start(s.Addr(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("second listener on %s: %v", s.Addr(), err)
	}
	off, err := Start("", zerolog.Nop())
	if err != nil || off.Addr() != "" || off.Registry == nil {
		t.Fatalf("metrics off: %v %q", err, off.Addr())
	}
	off.Close()
	if _, err := Start("192.0.2.1:9464", zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Fatalf("listening on an address that is not local: %v", err)
	}
}

// takenPorts listens on n consecutive loopback ports and returns the first;
// the listeners close at the end of the test.
func takenPorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{first}
		for i := 1; i < n; i++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+i))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == n {
			t.Cleanup(func() {
				for _, ln := range lns {
					ln.Close()
				}
			})
			return port
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestStartDefault: a default address in use moves to the next free port
// of the range; a range all in use, or an error other than in use, is an
// error naming --metrics-addr.
func TestStartDefault(t *testing.T) {
	port := takenPorts(t, 2)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s, err := StartDefault(addr, 10, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, got, _ := net.SplitHostPort(s.Addr())
	if p, _ := strconv.Atoi(got); p < port+2 || p >= port+10 {
		t.Errorf("default %s and the port after it in use: serving on %s, want a port in %d..%d", addr, s.Addr(), port+2, port+9)
	}
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics on the fallback port: %v %v", resp, err)
	}
	resp.Body.Close()

	if _, err := StartDefault(addr, 2, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "every port") || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Errorf("range of 2 ports, both in use: %v", err)
	}
	if _, err := StartDefault("192.0.2.1:9464", 10, zerolog.Nop()); err == nil || strings.Contains(err.Error(), "every port") || !strings.Contains(err.Error(), "--metrics-addr 192.0.2.1:9464") {
		t.Errorf("an address that is not local: %v, want the first listen error", err)
	}
}

// TestRegister: the service discovery file holds the scrape target and the
// labels, nothing else is left in the directory, and Close removes it.
func TestRegister(t *testing.T) {
	dir := t.TempDir()
	s, err := Start("127.0.0.1:0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"program": "subscriber", "feed": "tickcast"}
	path, err := s.Register(dir, "subscriber", labels)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var groups []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(b, &groups); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	if len(groups) != 1 || !reflect.DeepEqual(groups[0].Targets, []string{s.Addr()}) || !reflect.DeepEqual(groups[0].Labels, labels) {
		t.Errorf("%s: %s, want target %s with labels %v", path, b, s.Addr(), labels)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".json") {
		t.Errorf("directory holds %v, want the one .json file", entries)
	}
	s.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after Close: %s: %v, want it removed", path, err)
	}

	// On every interface, the target is the host name.
	all, err := Start(":0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	path, err = all.Register(dir, "subscriber", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(all.Addr())
	if want := net.JoinHostPort(host, port); !strings.Contains(string(b), `"`+want+`"`) || filepath.Base(path) != "subscriber-"+host+"-"+port+".json" {
		t.Errorf("listening on every interface: %s: %s, want target %s", path, b, want)
	}

	off, _ := Start("", zerolog.Nop())
	if _, err := off.Register(dir, "subscriber", nil); err == nil {
		t.Error("Register with metrics off: no error")
	}
}
