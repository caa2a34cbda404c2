package main

import (
	"net/netip"
	"testing"

	"github.com/tickcast/tickcast/internal/cliconf"
)

// TestLiveSettings: bad settings of --source itch-mold: exit 2 naming the
// setting, and so do its own settings with another source.
func TestLiveSettings(t *testing.T) {
	const src = "itch-mold:239.7.7.7:26400"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--source", "itch-mold:"}, "source"},
		{[]string{"--source", "itch-mold:10.0.0.1:26400"}, "not an IPv4 multicast group"},
		{[]string{"--source", "itch-mold:239.7.7.7"}, "source"},
		{[]string{"--source", "itch-mold:239.7.7.7:0"}, "port 0"},
		{[]string{"--source", "itch-mold:239.7.7.7:26400,239.7.7.7:26400"}, "line B is line A"},
		{[]string{"--source", "itch-mold:239.7.7.7:26400,nonsense"}, "line B"},
		{[]string{"--source", src, "--rate", "1000"}, "rate"},
		{[]string{"--source", src, "--speed", "2"}, "speed"},
		{[]string{"--source", src, "--dry-run"}, "dry-run"},
		{[]string{"--source", src, "--demo"}, "demo"},
		{[]string{"--source", src, "--pregenerate"}, "pregenerate"},
		{[]string{"--source", src, "--rerequest", "somewhere"}, "rerequest"},
		{[]string{"--source", src, "--rerequest-max", "0"}, "rerequest-max"},
		{[]string{"--source", src, "--rerequest-max", "65535"}, "rerequest-max"},
		{[]string{"--source", src, "--rerequest-timeout", "0s"}, "rerequest-timeout"},
		{[]string{"--source", src, "--rerequest-retries", "-1"}, "rerequest-retries"},
		{[]string{"--source", src, "--gap-deadline", "0s"}, "gap-deadline"},
		{[]string{"--source", src, "--upstream-iface", "lo"}, "upstream-iface"},
		{[]string{"--rerequest", "127.0.0.1:5000"}, "rerequest"},
		{[]string{"--source", "itch:" + snippet, "--start-from", "5"}, "start-from"},
	}
	for _, c := range cases {
		wantExit2(t, c.args, nil, c.want)
	}
}

// TestLiveSource: the source's lines, and no pacing.
func TestLiveSource(t *testing.T) {
	a, b, ok, err := parseLiveSource("itch-mold:239.7.7.7:26400,239.7.8.7:26401")
	if !ok || err != nil || a != netip.MustParseAddrPort("239.7.7.7:26400") || b != netip.MustParseAddrPort("239.7.8.7:26401") {
		t.Fatalf("parsed %v %v %v %v", a, b, ok, err)
	}
	if a, b, ok, err = parseLiveSource("itch-mold:239.7.7.7:26400"); !ok || err != nil || b.IsValid() || !a.IsValid() {
		t.Fatalf("A only: %v %v %v %v", a, b, ok, err)
	}
	var s Settings
	if err := cliconf.Load("feedhandler", []string{"--source", "itch-mold:239.7.7.7:26400", "--rerequest", "127.0.0.1:9"}, env(nil), &s); err != nil {
		t.Fatal(err)
	}
	cfg, err := s.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rate != 0 {
		t.Errorf("rate %v: a live source is published as it arrives", cfg.Rate)
	}
}
