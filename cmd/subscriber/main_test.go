package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/internal/testenv"
)

func TestBadSettingsExit2(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--mode", "spin"}, nil, "mode"},
		{[]string{"--format", "xml"}, nil, "format"},
		{[]string{"--channels", "0"}, nil, "channels"},
		{[]string{"--join-channels", "7"}, nil, "join-channels"},
		{[]string{"--symbols", "WAYTOOLONGSYMBOL"}, nil, "symbols"},
		{[]string{"--group", "127.0.0.1:5"}, nil, "group"},
		{[]string{"--iface", "eth0"}, nil, "iface"},
		{[]string{"--idle-timeout", "-1s"}, nil, "idle-timeout"},
		{[]string{"--expect", "-3"}, nil, "expect"},
		{[]string{"--recovery-backoff", "2s"}, nil, "recovery-backoff"},
		{[]string{"--recovery-backoff", "-1"}, nil, "recovery-backoff"},
		{[]string{"--metrics-addr", "localhost:metrics"}, nil, "metrics-addr"},
		{nil, map[string]string{"TICKCAST_VERIFY": "maybe"}, "TICKCAST_VERIFY"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(c.args, env(c.env), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want exit 2 naming %q", c.args, c.env, code, errb.String(), c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, env(nil), &out, &errb); code != 0 || !strings.Contains(out.String(), "--expect") || !strings.Contains(out.String(), "TICKCAST_IDLE_TIMEOUT") {
		t.Fatalf("--help: exit %d\n%s", code, out.String())
	}
}

// TestBadSettingsSayWhere checks that an error found by checking the
// settings, as one found by parsing them, says where the value came from:
// the flag, the environment variable, or the config file and line.
func TestBadSettingsSayWhere(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		name, value string
		want        string // the message, without its origin
	}{
		{"channels", "0", "channels: 0: want 1..1296"},
		{"group", "notanaddress", `group: group "notanaddress": want IPv4-multicast-address:port`},
		{"idle-timeout", "-1s", "idle-timeout: -1s: must be positive"},
		{"mode", "spin", `mode: "spin": want blocking, busy-poll, direct or direct-spin`},
		{"log-level", "loud", `log-level: "loud": want debug, info, warn or error`},
		{"join-channels", "7", `join-channels: "7": want channel numbers 0..3`},
		{"inject-loss", "2", "inject-loss: 2: not a probability in [0, 1]"},
		{"metrics-addr", "localhost:metrics", `metrics-addr: "localhost:metrics": port "metrics"`},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, c.name+".yaml")
		yaml := "# settings\nverify: true\n\n" + c.name + ": \"" + c.value + "\"\n"
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, src := range testenv.SettingSources(c.name, c.value, path, "4") {
			var out, errb bytes.Buffer
			code := run(src.Args, env(src.Env), &out, &errb)
			msg := errb.String()
			if code != 2 || !strings.HasPrefix(msg, "subscriber: "+c.want) || !strings.HasSuffix(msg, " "+src.From+"\n") ||
				strings.Count(msg, "\n") != 1 {
				t.Errorf("%v %v: exit %d, stderr %q; want exit 2 and one line %q ... %s", src.Args, src.Env, code, msg, c.want, src.From)
			}
		}
	}
}

// TestNoFeedSaysWhereItWaited runs a subscriber on free groups with no feed
// handler: it ends by the idle timeout, exits 1, and its last log line
// names the groups it waited on, per line.
func TestNoFeedSaysWhereItWaited(t *testing.T) {
	g := testenv.MulticastGroups(t, 93, 94)
	var out, errb bytes.Buffer
	// Without recovery and authentication: no NATS at all, so the last
	// line is the multicast wait's.
	code := run([]string{"--group", g[0].String(), "--group-b", g[1].String(), "--idle-timeout", "200ms",
		"--recovery=false", "--auth=false", "--metrics-addr=", "--log-format", "json", "--format", "none"},
		func(string) string { return "" }, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d, want 1\nstderr %s", code, errb.String())
	}
	var sum struct {
		ExitReason string `json:"exit_reason"`
		Packets    uint64 `json:"packets"`
		Channels   []int  `json:"channels"`
	}
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	if sum.ExitReason != "idle-timeout" || sum.Packets != 0 || len(sum.Channels) != 4 {
		t.Errorf("summary %+v, want exit_reason idle-timeout, no packets, 4 channels", sum)
	}
	last := func(base int) string {
		c, err := tickcast.ChannelGroup(g[base], 3)
		if err != nil {
			t.Fatal(err)
		}
		return c.String()
	}
	want := "no packet on line A " + g[0].String() + ".." + last(0) + " and line B " + g[1].String() + ".." + last(1) +
		" (interface 127.0.0.1) in 200ms — is a feed handler publishing there?"
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	var entry struct{ Level, Message string }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &entry); err != nil {
		t.Fatalf("last log line %q: %v", lines[len(lines)-1], err)
	}
	if entry.Level != "warn" || entry.Message != want {
		t.Errorf("last log line %q (%s), want warn %q", entry.Message, entry.Level, want)
	}
}
