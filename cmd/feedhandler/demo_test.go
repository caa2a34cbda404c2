package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
)

// TestDemo runs --demo end to end on loopback (embedded NATS on a free
// port, a short synthetic feed) and checks its stdout, the subscriber's
// summary with "ok":true, and that the log says the latency percentiles and
// what to expect of them, and has no warning or error line.
func TestDemo(t *testing.T) {
	group := testenv.MulticastGroups(t, 77)[0]
	var stdout, stderr testenv.SyncBuffer // written by the demo's goroutines
	code := run([]string{"--demo", "--count", "20000", "--rate", "20000", "--group", group.String(),
		"--nats-listen", "127.0.0.1:0", "--metrics-addr=", "--linger", "0s", "--log-format", "json"}, env(nil), &stdout, &stderr)
	var sum struct {
		OK       bool    `json:"ok"`
		Received uint64  `json:"received"`
		P999     float64 `json:"latency_p999_us"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &sum); err != nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	if code != 0 || !sum.OK || sum.Received != 20000 {
		t.Fatalf("exit %d, summary %+v\n%s", code, sum, stderr.String())
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var l struct {
			Level   string  `json:"level"`
			Message string  `json:"message"`
			P999    float64 `json:"p999_us"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Level == "warn" || l.Level == "error" {
			t.Errorf("a clean demo run logged at %s: %s", l.Level, line)
		}
		if strings.HasPrefix(l.Message, "demo latency") {
			found = true
			if l.P999 != sum.P999 || !strings.Contains(l.Message, "p99.9") || !strings.Contains(l.Message, "idle host") {
				t.Errorf("latency line %q (p99.9 %v), summary's p99.9 %v", l.Message, l.P999, sum.P999)
			}
		}
	}
	if !found {
		t.Errorf("no demo latency line in the log:\n%s", stderr.String())
	}
}
