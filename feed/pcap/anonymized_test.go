package pcap

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
)

// checkAccounted fails unless every datagram of the capture is counted as
// a MoldUDP64 packet or not, and every packet by what became of it.
func checkAccounted(t testing.TB, c *Counts, m *MoldCounts) {
	t.Helper()
	if m.Packets+m.NotMold != c.Datagrams ||
		m.DataPackets+m.DuplicatePackets+m.Heartbeats+m.EndOfSession+m.Implausible+m.OtherSession != m.Packets {
		t.Errorf("packets not accounted for: %+v %+v", c, m)
	}
}

// TestAnonymized: the real captures with their addresses, ports, session
// and sequence numbers zeroed, as public captures are anonymized, give, in
// capture order, the messages an independent walk of their bytes finds
// (each decoded by itch.Parse), and the counts the captures' README gives;
// the capture is flagged unsequenced, and reported so once.
func TestAnonymized(t *testing.T) {
	names := slices.Sorted(maps.Keys(realCounts))
	a := testenv.AnonymizeCaptures(t, names...)
	want := map[string]uint64{}
	for _, msg := range a.Messages {
		m, err := itch.Parse(msg)
		if err != nil {
			t.Fatalf("original message %x: %v", msg, err)
		}
		want[string(rune(m.Type()))]++
	}
	readme := map[string]uint64{}
	for _, c := range realCounts {
		for typ, n := range c {
			readme[typ] += n
		}
	}
	if !maps.Equal(want, readme) {
		t.Fatalf("the walk of the original captures finds %v, their README says %v", want, readme)
	}

	var sessions []mold.Session
	r, err := readCapture(t, a.Path, Config{OnUnsequenced: func(s mold.Session) { sessions = append(sessions, s) }})
	if err != nil || r.err != nil {
		t.Fatalf("%v %v", err, r.err)
	}
	if !maps.Equal(r.itch, want) {
		t.Errorf("ITCH counts %v, want %v", r.itch, want)
	}
	n := uint64(a.Packets)
	if !r.mold.Unsequenced || r.mold.UnsequencedPackets != n || r.mold.DataPackets != n || r.mold.Packets != n ||
		r.mold.Messages != uint64(len(a.Messages)) || r.mold.Gaps != 0 || r.mold.FirstSeq != 0 ||
		r.mold.Session != strconv.Quote(string(make([]byte, mold.SessionLen))) {
		t.Errorf("mold counts %+v, want %d packets read unsequenced, %d messages", r.mold, n, len(a.Messages))
	}
	if len(sessions) != 1 || sessions[0] != (mold.Session{}) {
		t.Errorf("OnUnsequenced called with %v, want once with the zero session", sessions)
	}
	checkAccounted(t, &r.counts, &r.mold)

	// Capture order: the messages come as the walk found them.
	f, err := os.Open(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := NewMessages(f, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i, orig := range a.Messages {
		got, _, err := msgs.Next()
		if err != nil || string(got) != string(orig) {
			t.Fatalf("message %d: %x %v, want %x", i+1, got, err, orig)
		}
	}
}

// TestAnonymizedTshark: tshark reads, in the original captures, as many
// frames and MoldUDP64 messages as the reader hands on from their
// anonymized copy.
func TestAnonymizedTshark(t *testing.T) {
	names := []string{"Multiple.Packets.pcap", "AddOrderNoMpidAttributionMessage.pcap"}
	a := testenv.AnonymizeCaptures(t, names...)
	// tshark decodes MoldUDP64 only on a port it is told of, and ports
	// zeroed are none: it reads the originals, whose messages the
	// anonymized capture keeps.
	var rows [][]string
	for _, name := range names {
		rows = append(rows, tshark(t, testenv.RealCapture(t, name), "moldudp64.count")...)
	}
	var total uint64
	for _, row := range rows {
		n, err := strconv.ParseUint(row[0], 10, 64)
		if err != nil {
			t.Fatalf("tshark: %v", rows)
		}
		total += n
	}
	r, err := readCapture(t, a.Path, Config{})
	if err != nil || r.err != nil {
		t.Fatalf("%v %v", err, r.err)
	}
	if r.counts.Records != uint64(len(rows)) || r.mold.Messages != total || sum(r.itch) != total {
		t.Errorf("counts %+v %+v, ITCH %v; tshark reads %d frames of %d messages", r.counts, r.mold, r.itch, len(rows), total)
	}
}

// TestSequencedAfterUnsequenced: packets of sequence 0 before the first
// sequenced one are read in capture order; once the stream is sequenced,
// those of sequence 0 are dropped and counted: as of another session (the
// zeroed one), or as implausible (the session followed).
func TestSequencedAfterUnsequenced(t *testing.T) {
	a := testenv.AnonymizeCaptures(t, "AddOrderNoMpidAttributionMessage.pcap")
	path := testenv.RealCapture(t, "Multiple.Packets.pcap")
	// A real packet with its sequence number zeroed, its session kept.
	b, err := os.ReadFile(testenv.RealCapture(t, "OrderDeleteMessage.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("000010059B"))
	if i < 0 {
		t.Fatal("no session in OrderDeleteMessage.pcap")
	}
	clear(b[i+mold.SessionLen : i+mold.SessionLen+8])
	zeroSeq := filepath.Join(t.TempDir(), "zero-seq.pcap")
	if err := os.WriteFile(zeroSeq, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readCapture(t, concatCaptures(t, a.Path, path, a.Path, zeroSeq), Config{})
	if err != nil || r.err != nil {
		t.Fatalf("%v %v", err, r.err)
	}
	if !r.mold.Unsequenced || r.mold.UnsequencedPackets != 1 || r.mold.OtherSession != 1 || r.mold.Implausible != 1 || r.mold.Messages != 40 ||
		r.mold.Session != "000010059B" {
		t.Errorf("mold counts %+v, want 1 unsequenced packet, 1 of another session, 1 implausible, 40 messages", r.mold)
	}
	checkAccounted(t, &r.counts, &r.mold)
}

// TestAccounted: every packet of the real captures is accounted for.
func TestAccounted(t *testing.T) {
	for name := range realCounts {
		r, err := readCapture(t, testenv.RealCapture(t, name), Config{})
		if err != nil || r.err != nil {
			t.Fatalf("%s: %v %v", name, err, r.err)
		}
		if r.mold.Unsequenced || r.mold.DataPackets != r.mold.Packets {
			t.Errorf("%s: %+v", name, r.mold)
		}
		checkAccounted(t, &r.counts, &r.mold)
	}
}

// concatCaptures writes the records of the classic pcaps paths, which
// share a file header, one after the other into one capture.
func concatCaptures(t *testing.T, paths ...string) string {
	t.Helper()
	var out bytes.Buffer
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			out.Write(b[:24])
		} else if !bytes.Equal(b[:24], out.Bytes()[:24]) {
			t.Fatalf("%s: another file header", p)
		}
		out.Write(b[24:])
	}
	path := filepath.Join(t.TempDir(), "concat.pcap")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
