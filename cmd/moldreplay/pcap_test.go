package main

import (
	"bytes"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/internal/testenv"
)

// tsharkMessages decodes a capture's MoldUDP64 messages with tshark, an
// independent decoder: each message, and the capture time (Unix ns) of
// the frame that carried it, in frame order.
func tsharkMessages(t *testing.T, path string) (msgs [][]byte, stamps []int64) {
	t.Helper()
	bin := testenv.NeedTool(t, "tshark")
	out, err := exec.Command(bin, "-r", path, "-d", "udp.port==26477,moldudp64", "-T", "fields",
		"-e", "frame.time_epoch", "-e", "moldudp64.msgdata").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	for _, row := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(row, "\t")
		if len(f) != 2 {
			t.Fatalf("tshark row %q: want 2 fields", row)
		}
		secs, frac, _ := strings.Cut(f[0], ".")
		s, err1 := strconv.ParseInt(secs, 10, 64)
		frac = (frac + "000000000")[:9]
		ns, err2 := strconv.ParseInt(frac, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("tshark time %q", f[0])
		}
		for _, h := range strings.Split(f[1], ",") {
			b, err := hex.DecodeString(strings.ReplaceAll(h, ":", ""))
			if err != nil {
				t.Fatalf("tshark message %q: %v", h, err)
			}
			msgs = append(msgs, b)
			stamps = append(stamps, s*1e9+ns)
		}
	}
	return msgs, stamps
}

// TestCaptureInput: a capture's input gives the messages tshark decodes
// from it, each at the capture time of its frame, with the capture's gap
// counted.
func TestCaptureInput(t *testing.T) {
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	want, stamps := tsharkMessages(t, path)
	if len(want) != 39 {
		t.Fatalf("tshark decodes %d messages; testdata/README.md says 39", len(want))
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, capture, err := openInput(f, path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		m, ns, err := in.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		if !bytes.Equal(m, want[i]) || ns != stamps[i] {
			t.Fatalf("message %d: %x at %d, tshark has %x at %d", i+1, m, ns, want[i], stamps[i])
		}
	}
	if _, _, err := in.Next(); err != io.EOF {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
	if st := capture.Stats(); st.Gaps != 1 || st.Packets != 2 || st.Messages != 39 {
		t.Errorf("capture stats %+v %+v: want 2 packets, 39 messages and the gap between them", *st.Counts, *st.MoldCounts)
	}
}

// TestServesTheCapture: both lines carry the capture's messages (as tshark
// decodes them), numbered from 1 in the session derived from the file
// name, with or without a filter naming the capture's group; the summary
// reports the capture's counts. A filter naming another group serves
// nothing.
func TestServesTheCapture(t *testing.T) {
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	want, _ := tsharkMessages(t, path)
	for _, tc := range []struct{ spec string }{{path}, {path + ":233.54.12.111:26477"}} {
		g := lineGroups(t)
		a, b := listenLine(t, g[0]), listenLine(t, g[1])
		r := startReplay(t, "--pcap", tc.spec, "--speed", "0", "--group", g[0].String(), "--group-b", g[1].String())
		for name, rec := range map[string]*lineRecorder{"A": a, "B": b} {
			got := messagesBySeq(t, "MULTIPLEPA", rec.wait(t))
			if len(got) != len(want) {
				t.Fatalf("%s: line %s: %d messages, want the capture's %d", tc.spec, name, len(got), len(want))
			}
			for i, m := range want {
				if !bytes.Equal(got[uint64(i+1)], m) {
					t.Fatalf("%s: line %s: message %d is %x, tshark decodes %x", tc.spec, name, i+1, got[uint64(i+1)], m)
				}
			}
		}
		code, s := r.stop(t)
		if code != 0 || s.Messages != uint64(len(want)) || s.Capture == nil || s.Capture.Records != 2 || s.Capture.Gaps != 1 {
			t.Errorf("%s: exit %d, summary %+v, capture %+v: want 0, %d messages, 2 records and 1 gap", tc.spec, code, s, s.Capture, len(want))
		}
	}

	g := lineGroups(t)
	a := listenLine(t, g[0])
	r := startReplay(t, "--pcap", path+":233.54.12.112:26477", "--speed", "0", "--group", g[0].String())
	if pkts := a.wait(t); len(pkts) != 0 {
		t.Errorf("a filter naming another group served %d data packets", len(pkts))
	}
	if code, s := r.stop(t); code != 0 || s.Messages != 0 || s.Capture == nil || s.Capture.Filtered != 2 {
		t.Errorf("another group: exit %d, summary %+v, capture %+v: want 0 messages, 2 datagrams filtered", code, s, s.Capture)
	}
}

// TestBadCaptures: a capture cut short is served up to its last whole
// record, then exits 1 naming the record; a link type the reader does not
// decode exits 1 before serving, naming it; a missing file exits 2.
func TestBadCaptures(t *testing.T) {
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, stamps := tsharkMessages(t, path)
	first := 0 // messages of the first frame
	for first < len(stamps) && stamps[first] == stamps[0] {
		first++
	}
	dir := t.TempDir()

	cut := filepath.Join(dir, "cut.pcap")
	if err := os.WriteFile(cut, data[:len(data)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	g := lineGroups(t)
	a := listenLine(t, g[0])
	r := startReplay(t, "--pcap", cut, "--speed", "0", "--group", g[0].String())
	got := messagesBySeq(t, "CUTPCAP", a.wait(t))
	code, s := r.stop(t)
	if code != 1 || !strings.Contains(s.Error, "record 2") || len(got) != first || !bytes.Equal(got[1], want[0]) {
		t.Errorf("cut capture: exit %d, error %q, %d messages served: want exit 1 naming record 2 after the first frame's %d", code, s.Error, len(got), first)
	}

	// The link type is the classic header's last field (bytes 20..23,
	// little-endian in this file): 105 is IEEE 802.11.
	wifi := bytes.Clone(data)
	wifi[20], wifi[21], wifi[22], wifi[23] = 105, 0, 0, 0
	wrong := filepath.Join(dir, "wifi.pcap")
	if err := os.WriteFile(wrong, wifi, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"--pcap", wrong, "--group", g[0].String()}, &out, &errb, nil); code != 1 || !strings.Contains(errb.String(), "link type") {
		t.Errorf("wrong link type: exit %d, stderr %q: want 1 naming the link type", code, errb.String())
	}
	errb.Reset()
	if code := run(t.Context(), []string{"--pcap", filepath.Join(dir, "missing.pcap")}, &out, &errb, nil); code != 2 || !strings.Contains(errb.String(), "--pcap") {
		t.Errorf("missing capture: exit %d, stderr %q: want 2 naming --pcap", code, errb.String())
	}
}

// TestAnonymizedCaptureInput: a capture whose addresses, ports, session and
// sequence numbers are zeroed is served in capture order, with the
// messages a walk of its bytes finds, and said once to be unsequenced.
func TestAnonymizedCaptureInput(t *testing.T) {
	a := testenv.AnonymizeCaptures(t, "Multiple.Packets.pcap", "OrderDeleteMessage.pcap")
	f, err := os.Open(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var logs bytes.Buffer
	in, capture, err := openInput(f, a.Path, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range a.Messages {
		m, _, err := in.Next()
		if err != nil || !bytes.Equal(m, want) {
			t.Fatalf("message %d: %x %v, want %x", i+1, m, err, want)
		}
	}
	if _, _, err := in.Next(); err != io.EOF {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
	if st := capture.Stats(); !st.Unsequenced || st.UnsequencedPackets != 3 || st.Messages != 40 {
		t.Errorf("capture stats %+v: want 3 packets of 40 messages read unsequenced", *st.MoldCounts)
	}
	if n := strings.Count(logs.String(), "capture unsequenced"); n != 1 || strings.Count(logs.String(), `"level":"warn"`) != 1 {
		t.Errorf("log %s: want one warning that the capture is unsequenced", logs.String())
	}
}
