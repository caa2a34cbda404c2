package metricsrv

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestHealthArg(t *testing.T) {
	cases := []struct {
		args []string
		url  string
		ok   bool
	}{
		{[]string{"--health", "http://x/healthz"}, "http://x/healthz", true},
		{[]string{"-health=http://x/healthz"}, "http://x/healthz", true},
		{[]string{"--health"}, "", true},                            // no URL: CheckHealth says what it wants
		{[]string{"--health", "http://x", "--rate", "5"}, "", true}, // not alone
		{[]string{"--rate", "5"}, "", false},
		{[]string{"health", "http://x"}, "", false},
		{nil, "", false},
	}
	for _, c := range cases {
		if url, ok := HealthArg(c.args); url != c.url || ok != c.ok {
			t.Errorf("HealthArg(%q) = %q, %v; want %q, %v", c.args, url, ok, c.url, c.ok)
		}
	}
}

// TestHealthEndpoint: starting until SetHealth, then what the function
// says, with its reason.
func TestHealthEndpoint(t *testing.T) {
	s, err := Start("127.0.0.1:0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := "http://" + s.Addr() + HealthPath
	if err := CheckHealth(url, time.Second); err == nil || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("before SetHealth: %v, want unhealthy, starting", err)
	}
	var bad error
	s.SetHealth(func() error { return bad })
	if err := CheckHealth(url, time.Second); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	bad = errors.New("channel 3 stale")
	if err := CheckHealth(url, time.Second); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "channel 3 stale") {
		t.Fatalf("unhealthy: %v, want 503 with the reason", err)
	}
	if err := CheckHealth("127.0.0.1:1", time.Second); err == nil || !strings.Contains(err.Error(), "want the URL") {
		t.Fatalf("no URL: %v", err)
	}
}
