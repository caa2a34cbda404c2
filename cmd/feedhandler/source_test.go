package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const snippet = "../../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50"

// TestDryRunSnippet: --dry-run on the real snippet reports the counts per
// ITCH type and the unknown-order references per type, exactly.
func TestDryRunSnippet(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--source", "itch:" + snippet, "--dry-run"}, env(nil), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		Messages     uint64            `json:"messages"`
		ITCH         map[string]uint64 `json:"itch"`
		UnknownOrder map[string]uint64 `json:"unknown_order"`
		Normalized   map[string]uint64 `json:"normalized"`
		Provisional  int               `json:"provisional"`
		MidDay       bool              `json:"mid_day"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	t.Logf("%s", out.String())
	wantTypes := map[string]uint64{"A": 367, "U": 225, "F": 193, "D": 167, "E": 28, "X": 6, "I": 4, "P": 4, "Q": 4, "S": 1, "C": 1}
	wantUnknown := map[string]uint64{"E": 28, "X": 6, "C": 1, "U": 225, "D": 139}
	if !equal(r.ITCH, wantTypes) {
		t.Errorf("itch counts %v, want %v", r.ITCH, wantTypes)
	}
	if !equal(r.UnknownOrder, wantUnknown) {
		t.Errorf("unknown-order counts %v, want %v", r.UnknownOrder, wantUnknown)
	}
	if r.Messages != 1000 || r.Normalized["definition"] != 190 || r.Provisional != 190 || r.Normalized["quote"] == 0 ||
		r.Normalized["trade"] != 6 || !r.MidDay {
		t.Errorf("report %+v", r)
	}
}

func equal(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestITCHSettings: bad ITCH settings exit 2 naming the setting.
func TestITCHSettings(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--source", "itch:"}, "source"},
		{[]string{"--source", "itch:/no/such/file", "--dry-run"}, "source"},
		{[]string{"--source", "itch:" + snippet, "--demo"}, "demo"},
		{[]string{"--dry-run"}, "dry-run"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(c.args, env(nil), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestDryRunDepth: with the default --depth the snippet's book changes
// publish level deltas, at least one per quote (a quote changes the top
// level); --depth 0 publishes none and the same quotes.
func TestDryRunDepth(t *testing.T) {
	normalized := func(args ...string) map[string]uint64 {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"--source", "itch:" + snippet, "--dry-run"}, args...), env(nil), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var r struct {
			Normalized map[string]uint64 `json:"normalized"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return r.Normalized
	}
	on, off := normalized(), normalized("--depth", "0")
	if on["level-delta"] < on["quote"] || on["quote"] == 0 {
		t.Errorf("default depth: %v, want at least a level delta per quote", on)
	}
	if _, ok := off["level-delta"]; ok || off["quote"] != on["quote"] || off["trade"] != on["trade"] {
		t.Errorf("--depth 0: %v, want the default's %v without level deltas", off, on)
	}
}
