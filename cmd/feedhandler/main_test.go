package main

import (
	"bytes"
	"github.com/tickcast/tickcast/internal/testenv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestBadSettingsExit2 checks that every kind of bad setting exits 2 with a
// message naming the setting, before anything is sent.
func TestBadSettingsExit2(t *testing.T) {
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badYAML, []byte("channels: 4\nrate: fast\n"), 0o644)
	unknownKey := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknownKey, []byte("chanels: 4\n"), 0o644)
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--rate", "abc"}, nil, "rate"},
		{[]string{"--encrypt", "0", "--auth=false"}, nil, "encrypt: [0]: needs the packets sealed"},
		{[]string{"--encrypt", "4"}, nil, "encrypt: [4]: channel 4: the feed has 4"},
		{[]string{"--encrypt", "x"}, nil, `encrypt: channels "x"`},
		{[]string{"--rate", "-5"}, nil, "rate"},
		{[]string{"--channels", "0"}, nil, "channels"},
		{[]string{"--instruments", "0"}, nil, "instruments"},
		{[]string{"--source", "itch-magic"}, nil, "source"},
		{[]string{"--group", "10.1.2.3:5000"}, nil, "group"},
		{[]string{"--group", "239.1.1.1"}, nil, "group"},
		{[]string{"--group-b", "nonsense"}, nil, "group-b"},
		{[]string{"--iface", "lo"}, nil, "iface"},
		{[]string{"--ttl", "300"}, nil, "ttl"},
		{[]string{"--max-datagram", "50"}, nil, "max-datagram"},
		{[]string{"--max-delay", "0s"}, nil, "max-delay"},
		{[]string{"--heartbeat", "soon"}, nil, "heartbeat"},
		{[]string{"--log-format", "xml"}, nil, "log-format"},
		{[]string{"--demo", "--count", "0"}, nil, "count"},
		{[]string{"--metrics-addr", "9464"}, nil, "metrics-addr"},
		{[]string{"--duration", "-1s"}, nil, "duration"},
		{[]string{"--pregenerate", "--count", "0"}, nil, "pregenerate"},
		{[]string{"--pregenerate", "--count", "20000000"}, nil, "pregenerate"},
		{[]string{"--pregenerate", "--source", "itch:x.gz"}, nil, "pregenerate"},
		{[]string{"--pace-spin", "soon"}, nil, "pace-spin"},
		{[]string{"--speed", "2"}, nil, "synthetic source has no recorded timestamps"},
		{[]string{"--speed", "-1", "--source", "itch:x"}, nil, "speed"},
		{[]string{"--speed", "2", "--rate", "1000", "--source", "itch:x"}, nil, "cannot be combined with --rate"},
		{[]string{"--speed", "2", "--source", "itch:x"}, map[string]string{"TICKCAST_RATE": "1000"}, "cannot be combined with --rate"},
		{[]string{"--depth", "65"}, nil, "depth"},
		{[]string{"--line", "b"}, nil, "line: b publishes the B line, which needs --group-b"},
		{[]string{"--line", "c", "--group-b", "239.78.0.1:31001"}, nil, "want a, b or both"},
		{[]string{"--session-record", "on"}, nil, "session-record: on needs --nats-url"},
		{[]string{"--session-record", "maybe"}, nil, "want auto, on or off"},
		{[]string{"--peer-timeout", "0s"}, nil, "peer-timeout"},
		{[]string{"--depth", "-1"}, nil, "depth"},
		{[]string{"--repair-window", "0s"}, nil, "repair-window"},
		{[]string{"--repair-window", "2m"}, nil, "repair-window"},
		{[]string{"--recovery-queue", "two words"}, nil, "recovery-queue"},
		{[]string{"--nats-live=false", "--nats-live-always"}, nil, "nats-live-always"},
		{[]string{"--no-such-flag"}, nil, "no-such-flag"},
		{[]string{"stray"}, nil, "stray"},
		{nil, map[string]string{"TICKCAST_CHANNELS": "many"}, "TICKCAST_CHANNELS"},
		{[]string{"--config", badYAML}, nil, "rate"},
		{[]string{"--config", unknownKey}, nil, "chanels"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, nil, "missing.yaml"},
	}
	for _, c := range cases {
		wantExit2(t, c.args, c.env, c.want)
	}
}

// wantExit2 checks that the feed handler run with args and environment e
// exits 2 with a message naming want.
func wantExit2(t *testing.T, args []string, e map[string]string, want string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, env(e), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), want) {
		t.Errorf("%v %v: exit %d, stderr %q; want exit 2 naming %q", args, e, code, errb.String(), want)
	}
}

func TestHelpTellsTheTruth(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, env(nil), &out, &errb); code != 0 {
		t.Fatalf("--help exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"--source", "--count", "--rate", "--instruments", "--seed", "--channels",
		"--group", "--group-b", "--iface", "--max-datagram", "--demo", "TICKCAST_RATE", "overrides an environment variable",
		"itch-mold:GROUP:PORT[,GROUP_B:PORT_B]", "--rerequest", "--rerequest-max", "--rerequest-timeout", "--rerequest-retries",
		"--gap-deadline", "--start-from"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
}

// TestBadSettingsSayWhere checks that an error found by checking the
// settings, as one found by parsing them, says where the value came from:
// the flag, the environment variable, or the config file and line.
func TestBadSettingsSayWhere(t *testing.T) {
	cases := []struct {
		name, value string
		want        string // the message, without its origin
	}{
		{"rate", "-5", "rate: -5: must not be negative"},                                           // fh.Config
		{"channels", "0", "channels: 0: want 1..1296"},                                             // validate
		{"group", "notanaddress", `group: group "notanaddress": want IPv4-multicast-address:port`}, // config
		{"depth", "65", "depth: 65: want 0..64"},                                                   // validate
		{"log-format", "xml", `log-format: "xml": want auto, console or json`},                     // logging
		{"metrics-addr", "9464", `metrics-addr: "9464"`},                                           // fh.Config
		{"line", "b", "line: b publishes the B line, which needs --group-b"},                       // a rule of two settings
		{"source", "itch-magic", `source: "itch-magic": want synthetic`},                           // validateSource
		{"session-record", "maybe", "session-record: "},                                            // fh.Config
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, c.name+".yaml")
		yaml := "# settings\ncount: 10\n" + c.name + ": " + c.value + "\n"
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, src := range testenv.SettingSources(c.name, c.value, path, "3") {
			var out, errb bytes.Buffer
			code := run(src.Args, env(src.Env), &out, &errb)
			msg := errb.String()
			if code != 2 || !strings.HasPrefix(msg, "feedhandler: "+c.want) || !strings.HasSuffix(msg, " "+src.From+"\n") ||
				strings.Count(msg, "\n") != 1 {
				t.Errorf("%v %v: exit %d, stderr %q; want exit 2 and one line %q ... %s", src.Args, src.Env, code, msg, c.want, src.From)
			}
		}
	}
}

// TestUsageReportFlag: --usage-report prints the report of an audit file
// and exits 0; a missing file exits 1 naming it; a bad entitlement in
// --nats-users exits 2 naming the user.
func TestUsageReportFlag(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	line := `{"time":"2026-12-04T13:54:09Z","user":"alice","channel":1,"session":"002SEICD0H","epochs":[7,8],"answered":true}` + "\n"
	if err := os.WriteFile(audit, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--usage-report", audit}, env(nil), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "day,user,channel,first_key,last_key,keys,sessions,replies,refused\n2026-12-04,alice,1,2026-12-04T13:54:09Z,2026-12-04T13:54:09Z,2,1,1,0\n"
	if out.String() != want {
		t.Errorf("report %q, want %q", out.String(), want)
	}
	out.Reset()
	errb.Reset()
	missing := filepath.Join(dir, "none.jsonl")
	if code := run([]string{"--usage-report", missing}, env(nil), &out, &errb); code != 1 || !strings.Contains(errb.String(), "none.jsonl") {
		t.Errorf("missing file: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"--nats-users", "fh:pw:feedhandler,alice:pw:subscriber:0-x"}, env(nil), &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), `user "alice": channels "0-x"`) {
		t.Errorf("bad entitlement: exit %d, %q", code, errb.String())
	}
}
