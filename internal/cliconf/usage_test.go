package cliconf

import (
	"strings"
	"testing"
	"time"
)

// TestUsage: --help names every flag with its type, environment variable and
// default, and states the precedence rule.
func TestUsage(t *testing.T) {
	u := Usage("feedhandler", &testSettings{})
	flat := strings.Join(strings.Fields(u), " ")
	for _, want := range []string{
		"Usage: feedhandler [flags]",
		"A flag overrides an environment variable, which overrides the config file, which overrides the built-in default.",
		"--source string upstream feed: synthetic env TICKCAST_SOURCE, default \"synthetic\"",
		"--verify check every message env TICKCAST_VERIFY, default false",
		"--workers int decoder goroutines env TICKCAST_WORKERS, default 4",
		"--offset int64 first sequence number (-1 = live) env TICKCAST_OFFSET, default -1",
		"--count uint64 messages to publish (0 = no limit) env TICKCAST_COUNT, default 1000000",
		"--rate float messages per second (0 = as fast as possible) env TICKCAST_RATE, default 100000",
		"--max-delay duration longest a message waits in a batch env TICKCAST_MAX_DELAY, default 50us",
		"--peers list comma-separated host:port list env TICKCAST_PEERS, default a:1,b:2",
		"--config file YAML config file",
		"env TICKCAST_CONFIG, default none",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("usage lacks %q:\n%s", want, u)
		}
	}
	for i, line := range strings.Split(u, "\n") {
		if len(line) > 80 {
			t.Errorf("line %d is %d columns: %q", i+1, len(line), line)
		}
	}
	if strings.Contains(u, "Origins") || strings.Contains(u, "Note") {
		t.Errorf("usage shows untagged fields:\n%s", u)
	}
}

// TestUsageDefaults: a setting without a default tag shows its zero value.
func TestUsageDefaults(t *testing.T) {
	var s struct {
		S string        `flag:"s"`
		B bool          `flag:"b"`
		I int           `flag:"i"`
		F float64       `flag:"f"`
		D time.Duration `flag:"d"`
		L []string      `flag:"l"`
	}
	flat := strings.Join(strings.Fields(Usage("x", &s)), " ")
	for _, want := range []string{
		`--s string env TICKCAST_S, default ""`,
		`--b env TICKCAST_B, default false`,
		`--i int env TICKCAST_I, default 0`,
		`--f float env TICKCAST_F, default 0`,
		`--d duration env TICKCAST_D, default 0s`,
		`--l list env TICKCAST_L, default empty`,
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("usage lacks %q:\n%s", want, flat)
		}
	}
}

func TestUsageBadStruct(t *testing.T) {
	for _, dst := range []any{nil, 5, &struct {
		F float32 `flag:"f"`
	}{}} {
		if u := Usage("x", dst); !strings.Contains(u, "cliconf: ") {
			t.Errorf("Usage(%T) does not report the mistake: %q", dst, u)
		}
	}
}
