package main

import (
	"bytes"
	"strings"
	"testing"
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
