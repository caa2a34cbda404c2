package pcap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/internal/testenv"
)

// realCounts are the ITCH counts the README of the captures gives per file.
var realCounts = map[string]map[string]uint64{
	"AddOrderNoMpidAttributionMessage.pcap":  {"A": 1},
	"MarketParticipantPositionMessage.pcap":  {"L": 1},
	"Multiple.Packets.pcap":                  {"A": 36, "F": 2, "D": 1},
	"NetOrderImbalanceIndicatorMessage.pcap": {"I": 1},
	"OrderDeleteMessage.pcap":                {"D": 1},
	"OrderExecutedMessage.pcap":              {"E": 1},
	"OrderReplaceMessage.pcap":               {"U": 1},
	"StockTradingActionMessage.pcap":         {"H": 1},
}

// result is what reading a capture through the ITCH normalizer gave.
type result struct {
	itch      map[string]uint64
	counts    Counts
	mold      MoldCounts
	err       error // what ended the source (nil: io.EOF)
	malformed []error
	published uint64
}

// readCapture reads the capture at path through Messages and itch's
// normalizer, to the end.
func readCapture(t testing.TB, path string, cfg Config) (result, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r result
	cfg.OnMalformed = func(err error) { r.malformed = append(r.malformed, err) }
	msgs, err := NewMessages(f, cfg)
	if err != nil {
		return r, err
	}
	src, err := itch.NewMessageSource(msgs, itch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var m feed.Msg
	for {
		err = src.Next(&m)
		if err != nil {
			break
		}
		r.published++
	}
	if err != io.EOF {
		r.err = err
	}
	r.itch = map[string]uint64{}
	for typ, n := range src.Stats().ByType {
		if n > 0 {
			r.itch[string(rune(typ))] = n
		}
	}
	r.counts, r.mold = *msgs.Counts(), *msgs.MoldCounts()
	return r, nil
}

// tshark runs tshark on path and returns its fields, one slice per packet.
func tshark(t *testing.T, path string, fields ...string) [][]string {
	t.Helper()
	bin := testenv.NeedTool(t, "tshark")
	args := []string{"-r", path, "-d", "udp.port==26477,moldudp64", "-T", "fields"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows
}

// TestRealCaptures: every real capture gives the ITCH counts its README
// states, in one MoldUDP64 packet per record of the session the README
// names; Multiple.Packets has the gap between its two packets.
func TestRealCaptures(t *testing.T) {
	for name, want := range realCounts {
		t.Run(name, func(t *testing.T) {
			path := testenv.RealCapture(t, name)
			r, err := readCapture(t, path, Config{})
			if err != nil || r.err != nil {
				t.Fatalf("%v %v", err, r.err)
			}
			if !maps.Equal(r.itch, want) {
				t.Errorf("ITCH counts %v, want %v", r.itch, want)
			}
			frames := uint64(len(tshark(t, path, "frame.number")))
			if r.counts.Records != frames || r.counts.Datagrams != frames || r.mold.Packets != frames ||
				r.counts.Malformed != 0 || r.mold.Session != "000010059B" {
				t.Errorf("counts %+v %+v, want %d records, datagrams and packets of session 000010059B", r.counts, r.mold, frames)
			}
		})
	}
}

// TestGap: Multiple.Packets holds sequences 14764496 (1 message) and
// 19009117 (38): one gap of the messages between, counted, reported and not
// mistaken for the start of the capture.
func TestGap(t *testing.T) {
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	rows := tshark(t, path, "moldudp64.sequence", "moldudp64.count")
	if len(rows) != 2 {
		t.Fatalf("tshark: %v", rows)
	}
	seq1, _ := strconv.ParseUint(rows[0][0], 10, 64)
	n1, _ := strconv.ParseUint(rows[0][1], 10, 64)
	seq2, _ := strconv.ParseUint(rows[1][0], 10, 64)
	r, err := readCapture(t, path, Config{})
	if err != nil || r.err != nil {
		t.Fatalf("%v %v", err, r.err)
	}
	if seq1 != 14764496 || seq2 != 19009117 {
		t.Fatalf("tshark reads sequences %d and %d; the README says 14764496 and 19009117", seq1, seq2)
	}
	if r.mold.FirstSeq != seq1 || r.mold.Gaps != 1 || r.mold.Missing != seq2-seq1-n1 || r.mold.Messages != 39 {
		t.Errorf("mold counts %+v, want first %d, 1 gap of %d missing, 39 messages", r.mold, seq1, seq2-seq1-n1)
	}
}

// TestFilter: a GROUP:PORT filter keeps the feed's datagrams and drops the
// others.
func TestFilter(t *testing.T) {
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	r, err := readCapture(t, path, Config{Dst: mustAddrPort("233.54.12.111:26477")})
	if err != nil || r.err != nil || r.mold.Messages != 39 {
		t.Fatalf("feed's group: %v %v %+v", err, r.err, r.mold)
	}
	r, err = readCapture(t, path, Config{Dst: mustAddrPort("233.54.12.111:26478")})
	if err != nil || r.err != nil || r.mold.Messages != 0 || r.counts.Filtered != 2 {
		t.Fatalf("another port: %v %v %+v %+v", err, r.err, r.counts, r.mold)
	}
}

// editcap runs editcap with args and returns the path it wrote.
func editcap(t *testing.T, in string, args ...string) string {
	t.Helper()
	bin := testenv.NeedTool(t, "editcap")
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(bin, append(append(args, in), out)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("editcap %v: %v: %s", args, err, b)
	}
	return out
}

// TestVariants: the same capture rewritten by editcap (pcapng, microsecond
// pcap, raw IPv4 with the Ethernet and VLAN headers cut off) and
// mergecap (every packet twice, as A and B lines) gives the same messages,
// and each record's timestamp is the one tshark reads.
func TestVariants(t *testing.T) {
	orig := testenv.RealCapture(t, "Multiple.Packets.pcap")
	want := realCounts["Multiple.Packets.pcap"]
	merge := testenv.NeedTool(t, "mergecap")
	twice := filepath.Join(t.TempDir(), "twice.pcap")
	if b, err := exec.Command(merge, "-F", "pcap", "-w", twice, orig, orig).CombinedOutput(); err != nil {
		t.Fatalf("mergecap: %v: %s", err, b)
	}
	cases := []struct {
		name   string
		path   string
		format Format
		dups   uint64
	}{
		{"nanosecond pcap", orig, FormatPcap, 0},
		{"pcapng", editcap(t, orig, "-F", "pcapng"), FormatPcapNG, 0},
		{"microsecond pcap", editcap(t, orig, "-F", "pcap"), FormatPcap, 0},
		{"raw IPv4", editcap(t, orig, "-F", "pcap", "-C", "18", "-T", "rawip"), FormatPcap, 0},
		{"raw IPv4 pcapng", editcap(t, orig, "-F", "pcapng", "-C", "18", "-T", "rawip4"), FormatPcapNG, 0},
		{"A and B lines", twice, FormatPcap, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := readCapture(t, c.path, Config{})
			if err != nil || r.err != nil {
				t.Fatalf("%v %v", err, r.err)
			}
			if !maps.Equal(r.itch, want) || r.mold.DuplicatePackets != c.dups || r.mold.Gaps != 1 || r.counts.Malformed != 0 {
				t.Errorf("ITCH %v, mold %+v, counts %+v; want %v, %d duplicate packets, 1 gap", r.itch, r.mold, r.counts, want, c.dups)
			}
			checkTimes(t, c.path, c.format)
		})
	}
}

// checkTimes compares each datagram's timestamp with tshark's reading.
func checkTimes(t *testing.T, path string, format Format) {
	t.Helper()
	rows := tshark(t, path, "frame.time_epoch")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if rd.Format() != format {
		t.Errorf("format %d, want %d", rd.Format(), format)
	}
	dr := NewDatagramReader(rd, mustAddrPort("233.54.12.111:26477"))
	for i, row := range rows {
		dg, err := dr.Next()
		if err != nil {
			t.Fatalf("datagram %d: %v", i+1, err)
		}
		sec, frac, _ := strings.Cut(row[0], ".")
		frac = (frac + "000000000")[:9]
		s, _ := strconv.ParseInt(sec, 10, 64)
		ns, _ := strconv.ParseInt(frac, 10, 64)
		if want := s*1e9 + ns; dg.TsNs != want {
			t.Errorf("datagram %d at %d ns, tshark says %s", i+1, dg.TsNs, row[0])
		}
	}
}

// TestTruncated: a capture cut short (head -c) ends with an error naming
// the record and saying the file ends, after every message before it.
func TestTruncated(t *testing.T) {
	orig := testenv.RealCapture(t, "Multiple.Packets.pcap")
	head := testenv.NeedTool(t, "head")
	fi, err := os.Stat(orig)
	if err != nil {
		t.Fatal(err)
	}
	// The first record is 24 + 16 + its length bytes: cut inside the
	// second's header, and inside its data.
	rows := tshark(t, orig, "frame.cap_len")
	first, _ := strconv.Atoi(rows[0][0])
	for _, cut := range []int64{24 + 16 + int64(first) + 10, fi.Size() - 1} {
		out := filepath.Join(t.TempDir(), "cut.pcap")
		b, err := exec.Command(head, "-c", strconv.FormatInt(cut, 10), orig).Output()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := readCapture(t, out, Config{})
		if err != nil {
			t.Fatal(err)
		}
		var fe *FormatError
		if !errors.Is(r.err, io.ErrUnexpectedEOF) || !errors.As(r.err, &fe) || fe.Record != 2 || !strings.Contains(r.err.Error(), "record 2") {
			t.Errorf("cut at %d: error %v, want one naming record 2 and the end of the file", cut, r.err)
		}
		if n := sum(r.itch); r.mold.Messages != 1 || n != 1 {
			t.Errorf("cut at %d: %d messages, %d decoded; want the first packet's one message", cut, r.mold.Messages, n)
		}
	}
}

// TestWrongLinkType: a capture of a link type the decoder does not read is
// an error naming it.
func TestWrongLinkType(t *testing.T) {
	orig := testenv.RealCapture(t, "Multiple.Packets.pcap")
	for _, format := range []string{"pcap", "pcapng"} {
		r, err := readCapture(t, editcap(t, orig, "-F", format, "-T", "ieee-802-11"), Config{})
		if err == nil {
			err = r.err // pcapng: the interface block follows the file header
		}
		if !errors.Is(err, ErrLinkType) || !strings.Contains(err.Error(), "105 (IEEE 802.11)") {
			t.Errorf("%s: error %v, want ErrLinkType naming 105 (IEEE 802.11)", format, err)
		}
	}
}

// TestMalformed: Ethernet frames labelled raw IPv4 are malformed records,
// each counted and reported with its number and what was wrong, and
// skipped.
func TestMalformed(t *testing.T) {
	orig := testenv.RealCapture(t, "Multiple.Packets.pcap")
	r, err := readCapture(t, editcap(t, orig, "-F", "pcap", "-T", "rawip"), Config{})
	if err != nil || r.err != nil {
		t.Fatalf("%v %v", err, r.err)
	}
	if r.counts.Malformed != 2 || len(r.malformed) != 2 || r.mold.Messages != 0 {
		t.Fatalf("counts %+v, reported %v; want 2 malformed records, nothing else", r.counts, r.malformed)
	}
	for i, err := range r.malformed {
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), fmt.Sprintf("record %d at offset", i+1)) ||
			!strings.Contains(err.Error(), "IPv4 version") {
			t.Errorf("report %v: want ErrMalformed naming record %d and the IPv4 version", err, i+1)
		}
	}
}

// TestBigEndian: a classic pcap written on a big-endian host (the real
// capture with its header fields byte-swapped, the packet bytes unchanged)
// reads the same.
func TestBigEndian(t *testing.T) {
	orig, err := os.ReadFile(testenv.RealCapture(t, "Multiple.Packets.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(orig)
	swap := func(p []byte) { p[0], p[1], p[2], p[3] = p[3], p[2], p[1], p[0] }
	swap(b[0:])
	b[4], b[5], b[6], b[7] = b[5], b[4], b[7], b[6]
	for _, o := range []int{8, 12, 16, 20} {
		swap(b[o:])
	}
	for off := 24; off < len(b); {
		capLen := int(b[off+8]) | int(b[off+9])<<8 | int(b[off+10])<<16 | int(b[off+11])<<24
		for o := 0; o < 16; o += 4 {
			swap(b[off+o:])
		}
		off += 16 + capLen
	}
	path := filepath.Join(t.TempDir(), "be.pcap")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	le, err1 := readCapture(t, testenv.RealCapture(t, "Multiple.Packets.pcap"), Config{})
	be, err2 := readCapture(t, path, Config{})
	if err1 != nil || err2 != nil || be.err != nil || !maps.Equal(be.itch, le.itch) || be.mold != le.mold {
		t.Errorf("big-endian %v %v %+v, little-endian %+v", err2, be.err, be.mold, le.mold)
	}
}

func TestNotCapture(t *testing.T) {
	_, err := NewMessages(strings.NewReader("\x00\x0bhello world"), Config{})
	if !errors.Is(err, ErrNotCapture) || !strings.Contains(err.Error(), "magic") {
		t.Errorf("error %v, want ErrNotCapture naming the magic", err)
	}
	_, err = NewMessages(strings.NewReader("\xd4\xc3\xb2\xa1\x02\x00"), Config{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v, want io.ErrUnexpectedEOF for a cut header", err)
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}
