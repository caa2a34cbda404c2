package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/feed/itch/itchgen"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/testenv"
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

// TestDryRunGenerated: --dry-run on a generated day (itchgen) finds
// nothing wrong with it, and reports the live orders the generator left,
// its high water, and the peak RSS.
func TestDryRunGenerated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "day.itch.gz")
	g, err := itchgen.New(itchgen.Config{Seed: 3, Stocks: 40, Orders: 2000, Messages: 40_000})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WriteGzip(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"--source", "itch:" + path, "--dry-run", "--itch-orders", "4096"}, env(nil), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		Messages     uint64            `json:"messages"`
		UnknownOrder map[string]uint64 `json:"unknown_order"`
		Anomalies    map[string]uint64 `json:"anomalies"`
		MidDay       bool              `json:"mid_day"`
		OrdersLive   int               `json:"orders_live"`
		OrdersHigh   int               `json:"orders_high_water"`
		OrdersCap    int               `json:"orders_capacity"`
		PeakRSS      int64             `json:"peak_rss_bytes"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for k, v := range r.Anomalies {
		if v != 0 && k != "not_printable" { // the generator makes some non-printable executions
			t.Errorf("anomaly %s: %d", k, v)
		}
	}
	if r.Messages != 40_000 || len(r.UnknownOrder) != 0 || r.MidDay || r.OrdersLive != g.Live() || r.OrdersHigh != g.HighWater() ||
		r.OrdersCap != 4096 || r.PeakRSS < 1<<20 {
		t.Errorf("report %s; the generator left %d live orders, %d at most", out.String(), g.Live(), g.HighWater())
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
		{[]string{"--source", "pcap:"}, "source"},
		{[]string{"--source", "pcap:/no/such/file", "--dry-run"}, "source"},
		{[]string{"--source", "pcap:x.pcap", "--demo"}, "demo"},
		{[]string{"--source", "pcap:x.pcap", "--pregenerate"}, "pregenerate"},
	}
	for _, c := range cases {
		wantExit2(t, c.args, nil, c.want)
	}
}

// TestSpeedReplacesRate: --speed on an ITCH file paces by the recorded times,
// so the feed handler's configuration has no rate (the --rate default is for
// the synthetic source).
func TestSpeedReplacesRate(t *testing.T) {
	var s Settings
	if err := cliconf.Load("feedhandler", []string{"--source", "itch:" + snippet, "--speed", "2.5"}, env(nil), &s); err != nil {
		t.Fatal(err)
	}
	cfg, err := s.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Speed != 2.5 || cfg.Rate != 0 {
		t.Errorf("--speed 2.5: fh.Config Speed %v Rate %v, want 2.5 and 0", cfg.Speed, cfg.Rate)
	}
}

// pcapDryRun is the part of --dry-run's report a capture adds.
type pcapDryRun struct {
	Messages uint64            `json:"messages"`
	ITCH     map[string]uint64 `json:"itch"`
	Error    string            `json:"error"`
	Pcap     struct {
		Records   uint64 `json:"records"`
		Datagrams uint64 `json:"datagrams"`
		Filtered  uint64 `json:"filtered"`
		Packets   uint64 `json:"mold_packets"`
		Gaps      uint64 `json:"gaps"`
		Missing   uint64 `json:"missing"`
		FirstSeq  uint64 `json:"first_seq"`
		Malformed uint64 `json:"malformed"`
		Session   string `json:"session"`
	} `json:"pcap"`
}

// TestDryRunPcap: --dry-run on a real capture reports the README's ITCH
// counts and the capture's: two records and packets, and the gap between
// sequences 14764496 (one message) and 19009117. A filter on another port
// keeps nothing.
func TestDryRunPcap(t *testing.T) {
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	for _, c := range []struct {
		source   string
		messages uint64
	}{
		{"pcap:" + path, 39},
		{"pcap:" + path + ":233.54.12.111:26477", 39},
		{"pcap:" + path + ":233.54.12.111:26478", 0},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"--source", c.source, "--dry-run", "--log-format", "json"}, env(nil), &out, &errb)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.source, code, errb.String())
		}
		var r pcapDryRun
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if r.Messages != c.messages || r.Pcap.Records != 2 {
			t.Errorf("%s: %s", c.source, out.String())
		}
		if c.messages == 0 {
			if r.Pcap.Filtered != 2 || r.Pcap.Datagrams != 0 {
				t.Errorf("%s: %s, want both datagrams filtered", c.source, out.String())
			}
			continue
		}
		if want := map[string]uint64{"A": 36, "F": 2, "D": 1}; !equal(r.ITCH, want) || r.Pcap.Datagrams != 2 ||
			r.Pcap.Packets != 2 || r.Pcap.Gaps != 1 || r.Pcap.FirstSeq != 14764496 || r.Pcap.Missing != 19009117-14764497 ||
			r.Pcap.Session != "000010059B" {
			t.Errorf("%s: %s", c.source, out.String())
		}
		if !strings.Contains(errb.String(), `"range":"14764497..19009116"`) {
			t.Errorf("%s: the gap is not logged: %s", c.source, errb.String())
		}
	}
}

// TestDryRunPcapTruncated: a capture cut short (head -c) prints the counts
// of what was readable and the error naming the record, and exits 1; a
// capture of another link type exits 2 naming it.
func TestDryRunPcapTruncated(t *testing.T) {
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	head := testenv.NeedTool(t, "head")
	b, err := exec.Command(head, "-c", "1600", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(cut, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"--source", "pcap:" + cut, "--dry-run", "--log-format", "json"}, env(nil), &out, &errb)
	var r pcapDryRun
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if code != 1 || r.Messages != 1 || !strings.Contains(r.Error, "record 2") || !strings.Contains(r.Error, "file ends") {
		t.Errorf("exit %d, report %s; want exit 1, one message and an error naming record 2", code, out.String())
	}

	editcap := testenv.NeedTool(t, "editcap")
	wifi := filepath.Join(t.TempDir(), "wifi.pcap")
	if b, err := exec.Command(editcap, "-T", "ieee-802-11", "-F", "pcap", path, wifi).CombinedOutput(); err != nil {
		t.Fatalf("editcap: %v: %s", err, b)
	}
	out.Reset()
	errb.Reset()
	code = run([]string{"--source", "pcap:" + wifi, "--dry-run"}, env(nil), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "link type") || !strings.Contains(errb.String(), "IEEE 802.11") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming the link type", code, errb.String())
	}
}

func TestParseFileSource(t *testing.T) {
	cases := []struct {
		source, path, dst string
		pcap, ok          bool
	}{
		{"synthetic", "", "invalid AddrPort", false, false},
		{"itch:a:b", "a:b", "invalid AddrPort", false, true},
		{"pcap:day.pcap", "day.pcap", "invalid AddrPort", true, true},
		{"pcap:day.pcap:233.54.12.111:26477", "day.pcap", "233.54.12.111:26477", true, true},
		{"pcap:c:/x.pcap:233.54.12.111:26477", "c:/x.pcap", "233.54.12.111:26477", true, true},
		{"pcap:a:b:c", "a:b:c", "invalid AddrPort", true, true},
		{"pcap:x:233.54.12.111:port", "x:233.54.12.111:port", "invalid AddrPort", true, true},
	}
	for _, c := range cases {
		fs, ok := parseFileSource(c.source)
		if ok != c.ok || fs.pcap != c.pcap || fs.path != c.path || fs.dst.String() != c.dst {
			t.Errorf("%q: %+v %v, want path %q dst %s pcap %v ok %v", c.source, fs, ok, c.path, c.dst, c.pcap, c.ok)
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

// TestDryRunGzipCutShort: an ITCH file gzipped (by the gzip tool) and cut
// short prints the counts of what was readable and an error saying the
// gzip stream ended early, and exits 1.
func TestDryRunGzipCutShort(t *testing.T) {
	gz := testenv.NeedTool(t, "gzip")
	b, err := exec.Command(gz, "-c", snippet).Output()
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.gz")
	if err := os.WriteFile(cut, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"--source", "itch:" + cut, "--dry-run", "--log-format", "json"}, env(nil), &out, &errb)
	var r struct {
		Messages uint64 `json:"messages"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if code != 1 || r.Messages == 0 || r.Messages >= 1000 || !strings.Contains(r.Error, "gzip") || !strings.Contains(r.Error, "unexpected EOF") {
		t.Errorf("exit %d, report %s; want exit 1, some of the 1,000 messages and an error saying the gzip stream ended early", code, out.String())
	}
}

// TestDryRunPcapAnonymized: five real Add Order packets with addresses,
// ports, session and sequence numbers zeroed are read in capture order,
// flagged unsequenced in the report and, once, in the log at warn level. A
// filter that keeps none of them says at warn level where they went.
func TestDryRunPcapAnonymized(t *testing.T) {
	const name = "AddOrderNoMpidAttributionMessage.pcap"
	a := testenv.AnonymizeCaptures(t, name, name, name, name, name)
	var out, errb bytes.Buffer
	if code := run([]string{"--source", "pcap:" + a.Path, "--dry-run", "--log-format", "json"}, env(nil), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		pcapDryRun
		Pcap struct {
			Packets     uint64 `json:"mold_packets"`
			DataPackets uint64 `json:"data_packets"`
			Unsequenced bool   `json:"unsequenced"`
			Unseq       uint64 `json:"unsequenced_packets"`
		} `json:"pcap"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Messages != 5 || !equal(r.ITCH, map[string]uint64{"A": 5}) || r.Pcap.Packets != 5 || r.Pcap.DataPackets != 5 ||
		!r.Pcap.Unsequenced || r.Pcap.Unseq != 5 {
		t.Errorf("report %s; want 5 Add Orders of 5 packets read unsequenced", out.String())
	}
	if n := strings.Count(errb.String(), `"level":"warn"`); n != 1 ||
		!strings.Contains(errb.String(), "pcap capture unsequenced") || !strings.Contains(errb.String(), "sequence number 0") {
		t.Errorf("%d warnings, want one saying the capture is unsequenced and why: %s", n, errb.String())
	}

	out.Reset()
	errb.Reset()
	if code := run([]string{"--source", "pcap:" + a.Path + ":233.54.12.111:26477", "--dry-run", "--log-format", "json"}, env(nil), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), `"level":"warn"`) || !strings.Contains(errb.String(), "gave no ITCH message") ||
		!strings.Contains(errb.String(), "5 filtered") {
		t.Errorf("no warning saying where the packets went: %s", errb.String())
	}
}

// TestMissingSourceSaysWhere: a --source file that cannot be opened exits 2
// with a message naming the setting and where its value came from, with
// and without --dry-run.
func TestMissingSourceSaysWhere(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.itch")
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--source", "itch:" + missing, "--dry-run"}, nil, "(from --source)"},
		{[]string{"--source", "itch:" + missing}, nil, "(from --source)"},
		{[]string{"--dry-run"}, map[string]string{"TICKCAST_SOURCE": "itch:" + missing}, "(from env TICKCAST_SOURCE)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, env(c.env), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || !strings.Contains(msg, "source") || !strings.Contains(msg, missing) || !strings.HasSuffix(msg, c.want) || strings.Count(msg, "\n") != 0 {
			t.Errorf("%v %v: exit %d, %q; want 2 and one line naming source, the file and ending %q", c.args, c.env, code, msg, c.want)
		}
	}
}
