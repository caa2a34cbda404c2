package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
)

// The tests' multicast groups use the prefixes 91 (line A) and 92 (line B),
// on different ports: a socket bound to a port hears every group joined on
// it.
const snippet = "../../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50"

// fileMessages splits an uncompressed ITCH file into its messages by the
// format's own rule (2-byte big-endian length, message), without package
// itch, so that the test does not check the exchange's reader with itself.
func fileMessages(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(b) > 0 {
		n := int(binary.BigEndian.Uint16(b))
		out = append(out, b[2:2+n])
		b = b[2+n:]
	}
	return out
}

// lineGroups returns the groups of lines A and B, on different ports.
func lineGroups(t *testing.T) []netip.AddrPort {
	return []netip.AddrPort{testenv.MulticastGroups(t, 91)[0], testenv.MulticastGroups(t, 92)[0]}
}

// gzipped writes a gzip copy of path with the gzip tool and returns its path.
func gzipped(t *testing.T, path string) string {
	t.Helper()
	gz := testenv.NeedTool(t, "gzip")
	out := filepath.Join(t.TempDir(), filepath.Base(path)+".gz")
	data, err := exec.Command(gz, "-c", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// lineRecorder receives one multicast line on loopback and keeps every
// MoldUDP64 packet until end of session.
type lineRecorder struct {
	conn    *net.UDPConn
	mu      sync.Mutex
	packets []mold.Packet
	bad     []error
	ended   chan struct{}
}

func listenLine(t *testing.T, g netip.AddrPort) *lineRecorder {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	c, err := net.ListenMulticastUDP("udp4", lo, net.UDPAddrFromAddrPort(g))
	if err != nil {
		t.Fatalf("join %s: %v", g, err)
	}
	c.SetReadBuffer(4 << 20)
	r := &lineRecorder{conn: c, ended: make(chan struct{})}
	t.Cleanup(func() { c.Close() })
	go func() {
		for {
			buf := make([]byte, 65536)
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			p, err := mold.Parse(buf[:n])
			r.mu.Lock()
			if err != nil {
				r.bad = append(r.bad, err)
			} else {
				r.packets = append(r.packets, p)
			}
			r.mu.Unlock()
			if err == nil && p.IsEndOfSession() {
				select {
				case <-r.ended:
				default:
					close(r.ended)
				}
			}
		}
	}()
	return r
}

// wait waits for end of session and returns the data packets by first
// sequence number.
func (r *lineRecorder) wait(t *testing.T) map[uint64]mold.Packet {
	t.Helper()
	select {
	case <-r.ended:
	case <-time.After(20 * time.Second):
		t.Fatal("no end of session")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Fatalf("malformed packets on the line: %v", r.bad)
	}
	out := map[uint64]mold.Packet{}
	for _, p := range r.packets {
		if p.Messages() > 0 {
			out[p.Seq] = p
		}
	}
	return out
}

// messagesBySeq flattens packets into a map of sequence number to message.
func messagesBySeq(t *testing.T, session string, pkts map[uint64]mold.Packet) map[uint64][]byte {
	t.Helper()
	out := map[uint64][]byte{}
	for _, p := range pkts {
		if p.Session.String() != session {
			t.Fatalf("packet of session %q, want %q", p.Session, session)
		}
		it := p.Iter()
		for m, seq, ok := it.Next(); ok; m, seq, ok = it.Next() {
			if _, dup := out[seq]; dup {
				t.Fatalf("message %d sent twice on one line", seq)
			}
			out[seq] = m
		}
	}
	return out
}

// replay runs the program with args in the background; the returned
// function stops it (ending any linger) and returns its exit code and
// summary.
type replayRun struct {
	cancel context.CancelFunc
	done   chan int
	out    bytes.Buffer
	errb   bytes.Buffer
	srv    netip.AddrPort
}

func startReplay(t *testing.T, args ...string) *replayRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replayRun{cancel: cancel, done: make(chan int, 1)}
	ready := make(chan netip.AddrPort, 1)
	go func() {
		r.done <- run(ctx, append(args, "--log-format", "json"), &r.out, &r.errb, func(a netip.AddrPort) { ready <- a })
	}()
	select {
	case r.srv = <-ready:
	case code := <-r.done:
		t.Fatalf("exit %d before serving: %s", code, r.errb.String())
	}
	t.Cleanup(cancel)
	return r
}

func (r *replayRun) stop(t *testing.T) (int, Summary) {
	t.Helper()
	r.cancel()
	var code int
	select {
	case code = <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("moldreplay did not stop")
	}
	var s Summary
	if err := json.Unmarshal(r.out.Bytes(), &s); err != nil {
		t.Fatalf("summary %q: %v (stderr %s)", r.out.String(), err, r.errb.String())
	}
	return code, s
}

// lineStats reads a line's counters back from the summary.
func lineStats(t *testing.T, s Summary, line string) LineStats {
	t.Helper()
	b, _ := json.Marshal(s.Lines[line])
	var ls LineStats
	if err := json.Unmarshal(b, &ls); err != nil {
		t.Fatal(err)
	}
	return ls
}

// TestServesTheFile: both lines carry exactly the file's messages, in order,
// numbered from 1 in the session derived from the file name, plain and
// gzip, and end with end of session at the next sequence.
func TestServesTheFile(t *testing.T) {
	want := fileMessages(t, snippet)
	for _, path := range []string{snippet, gzipped(t, snippet)} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := lineGroups(t)
			a, b := listenLine(t, g[0]), listenLine(t, g[1])
			r := startReplay(t, "--itch", path, "--speed", "0", "--group", g[0].String(), "--group-b", g[1].String())
			for name, rec := range map[string]*lineRecorder{"A": a, "B": b} {
				got := messagesBySeq(t, "12302019SN", rec.wait(t))
				if len(got) != len(want) {
					t.Fatalf("line %s: %d messages, want the file's %d", name, len(got), len(want))
				}
				for i, m := range want {
					if !bytes.Equal(got[uint64(i+1)], m) {
						t.Fatalf("line %s: message %d is %x, want the file's %x", name, i+1, got[uint64(i+1)], m)
					}
				}
				rec.mu.Lock()
				last := rec.packets[len(rec.packets)-1]
				rec.mu.Unlock()
				if !last.IsEndOfSession() || last.Seq != uint64(len(want)+1) {
					t.Errorf("line %s: last packet %+v, want end of session at %d", name, last.Header, len(want)+1)
				}
			}
			code, s := r.stop(t)
			if code != 0 || s.Messages != uint64(len(want)) || s.Session != "12302019SN" {
				t.Errorf("exit %d, summary %+v; want 0 and %d messages", code, s, len(want))
			}
		})
	}
}

// TestLossInjection: line A loses, in bursts of 3, what the summary says,
// and nothing else; line B loses nothing; the same seed loses the same
// packets again, and another seed others.
func TestLossInjection(t *testing.T) {
	want := fileMessages(t, snippet)
	lost := func(seed string) []uint64 {
		g := lineGroups(t)
		a, b := listenLine(t, g[0]), listenLine(t, g[1])
		r := startReplay(t, "--itch", snippet, "--speed", "0", "--group", g[0].String(), "--group-b", g[1].String(),
			"--max-datagram", "200", "--loss-a", "0.1", "--burst-a", "3", "--seed", seed)
		pa, pb := a.wait(t), b.wait(t)
		code, s := r.stop(t)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, r.errb.String())
		}
		if got := messagesBySeq(t, s.Session, pb); len(got) != len(want) {
			t.Errorf("line B (no loss): %d messages, want %d", len(got), len(want))
		}
		if len(pb) != int(s.Packets) {
			t.Errorf("line B: %d data packets, summary says %d published", len(pb), s.Packets)
		}
		// Walk the published packets in order through B's copy: which did
		// A not get?
		var missing []uint64
		missingMsgs, run, runs := 0, 0, []int{}
		for seq := uint64(1); seq <= uint64(len(want)); {
			p, ok := pb[seq]
			if !ok {
				t.Fatalf("line B has no packet starting at %d", seq)
			}
			if _, got := pa[seq]; !got {
				missing = append(missing, seq)
				missingMsgs += p.Messages()
				run++
			} else if run > 0 {
				runs, run = append(runs, run), 0
			}
			seq += uint64(p.Messages())
		}
		la := lineStats(t, s, "a")
		if uint64(len(missing)) != la.DroppedPackets || uint64(missingMsgs) != la.DroppedMessages || len(missing) == 0 {
			t.Errorf("line A missed %d packets (%d messages); summary says %d dropped (%d messages); want equal and some",
				len(missing), missingMsgs, la.DroppedPackets, la.DroppedMessages)
		}
		for _, n := range runs {
			if n%3 != 0 {
				t.Errorf("line A lost a run of %d packets, want bursts of 3 (runs %v)", n, runs)
			}
		}
		if lb := lineStats(t, s, "b"); lb.DroppedPackets != 0 || lb.SilencedPackets != 0 {
			t.Errorf("line B: %+v, want nothing lost", lb)
		}
		return missing
	}
	first, again, other := lost("7"), lost("7"), lost("8")
	if !slices.Equal(first, again) {
		t.Errorf("seed 7 lost %v, then %v", first, again)
	}
	if slices.Equal(first, other) {
		t.Errorf("seeds 7 and 8 lost the same packets %v", first)
	}
}

// request sends a re-request from c and returns the answer packets that
// arrive within wait.
func request(t *testing.T, c *net.UDPConn, srv netip.AddrPort, b []byte, wait time.Duration) [][]byte {
	t.Helper()
	if _, err := c.WriteToUDPAddrPort(b, srv); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 65536)
		n, err := c.Read(buf)
		if err != nil {
			return out
		}
		out = append(out, buf[:n])
		wait = 100 * time.Millisecond // the rest of a multi-packet answer
	}
}

// TestRerequest: every message A lost comes back, byte for byte, in
// ordinary downstream packets sent to the requester; an answer holds one
// packet's worth; requests for another session, beyond the end, and
// malformed ones are not answered and are counted.
func TestRerequest(t *testing.T) {
	want := fileMessages(t, snippet)
	g := testenv.MulticastGroups(t, 91)
	a := listenLine(t, g[0])
	r := startReplay(t, "--itch", snippet, "--speed", "0", "--group", g[0].String(), "--max-datagram", "300",
		"--loss-a", "0.3", "--seed", "3", "--rerequest", "127.0.0.1:0", "--linger", "1m")
	got := messagesBySeq(t, "12302019SN", a.wait(t))
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	session, _ := mold.ParseSession("12302019SN")
	recovered, answers := 0, 0
	for seq := uint64(1); seq <= uint64(len(want)); seq++ {
		if _, ok := got[seq]; ok {
			continue
		}
		pkts := request(t, c, r.srv, mold.Request{Session: session, Seq: seq, Count: 1000}.Append(nil), 2*time.Second)
		if len(pkts) != 1 {
			t.Fatalf("request for %d: %d answer packets, want one packet's worth", seq, len(pkts))
		}
		answers++
		p, err := mold.Parse(pkts[0])
		if err != nil || p.Seq != seq || p.Session != session || p.Messages() == 0 || len(pkts[0]) > 300 {
			t.Fatalf("answer to %d: %v, header %+v, %d bytes", seq, err, p.Header, len(pkts[0]))
		}
		it := p.Iter()
		for m, s, ok := it.Next(); ok; m, s, ok = it.Next() {
			if !bytes.Equal(m, want[s-1]) {
				t.Fatalf("answer: message %d is %x, want the file's %x", s, m, want[s-1])
			}
			if _, had := got[s]; !had {
				got[s] = m
				recovered++
			}
		}
	}
	if len(got) != len(want) || recovered == 0 {
		t.Errorf("after re-requests %d of %d messages (%d recovered)", len(got), len(want), recovered)
	}
	other, _ := mold.ParseSession("OTHER")
	for _, req := range [][]byte{
		mold.Request{Session: other, Seq: 1, Count: 5}.Append(nil),
		mold.Request{Session: session, Seq: uint64(len(want)) + 1, Count: 5}.Append(nil),
		[]byte("not a request"),
		append(mold.Request{Session: session, Seq: 1, Count: 5}.Append(nil), 0),
	} {
		if pkts := request(t, c, r.srv, req, 300*time.Millisecond); len(pkts) != 0 {
			t.Errorf("request %x answered with %d packets, want none", req, len(pkts))
		}
	}
	code, s := r.stop(t)
	rs := s.Rerequest
	if code != 0 || rs == nil {
		t.Fatalf("exit %d, summary %+v", code, s)
	}
	if rs.Answered != uint64(answers) || rs.AnswerPackets != uint64(answers) || rs.OtherSession != 1 || rs.Beyond != 1 ||
		rs.Rejected != 2 || rs.Requests != uint64(answers)+4 {
		t.Errorf("re-request counters %+v; want %d answered in as many packets, 1 other session, 1 beyond, 2 rejected", *rs, answers)
	}
	if !strings.Contains(r.errb.String(), "malformed re-request") {
		t.Errorf("malformed requests not logged: %s", r.errb.String())
	}
}

// TestRerequestMaxCountAndMisbehaviour: --max-count answers up to that many
// messages in several packets; --rerequest-garbage answers with packets
// mold rejects; --rerequest-off answers nothing.
func TestRerequestMaxCountAndMisbehaviour(t *testing.T) {
	want := fileMessages(t, snippet)
	session, _ := mold.ParseSession("X1")
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	serve := func(extra ...string) *replayRun {
		g := testenv.MulticastGroups(t, 91)
		a := listenLine(t, g[0])
		r := startReplay(t, append([]string{"--itch", snippet, "--speed", "0", "--group", g[0].String(), "--session", "X1",
			"--max-datagram", "300", "--rerequest", "127.0.0.1:0", "--linger", "1m"}, extra...)...)
		a.wait(t)
		return r
	}

	r := serve("--max-count", "100")
	pkts := request(t, c, r.srv, mold.Request{Session: session, Seq: 10, Count: 500}.Append(nil), 2*time.Second)
	next := uint64(10)
	for _, b := range pkts {
		p, err := mold.Parse(b)
		if err != nil || p.Seq != next {
			t.Fatalf("answer packet at %d: %v, header %+v", next, err, p.Header)
		}
		it := p.Iter()
		for m, s, ok := it.Next(); ok; m, s, ok = it.Next() {
			if !bytes.Equal(m, want[s-1]) {
				t.Fatalf("message %d differs from the file's", s)
			}
		}
		next += uint64(p.Messages())
	}
	if next != 110 || len(pkts) < 2 {
		t.Errorf("--max-count 100: answer of %d packets up to %d, want 100 messages (10..109) in several packets", len(pkts), next-1)
	}
	r.stop(t)

	r = serve("--rerequest-garbage")
	for k := range 4 {
		pkts := request(t, c, r.srv, mold.Request{Session: session, Seq: 1, Count: 5}.Append(nil), 2*time.Second)
		if len(pkts) != 1 {
			t.Fatalf("garbage answer %d: %d packets", k, len(pkts))
		}
		if p, err := mold.Parse(pkts[0]); err == nil && !p.IsHeartbeat() {
			t.Errorf("garbage answer %d parses as a packet: %+v", k, p.Header)
		} else if err == nil {
			t.Errorf("garbage answer %d parses as a plain heartbeat", k)
		}
	}
	if _, s := r.stop(t); s.Rerequest.Garbage != 4 {
		t.Errorf("garbage counter %d, want 4", s.Rerequest.Garbage)
	}

	r = serve("--rerequest-off")
	if pkts := request(t, c, r.srv, mold.Request{Session: session, Seq: 1, Count: 5}.Append(nil), 300*time.Millisecond); len(pkts) != 0 {
		t.Errorf("--rerequest-off answered with %d packets", len(pkts))
	}
	if _, s := r.stop(t); s.Rerequest.Unanswered != 1 || s.Rerequest.Answered != 0 {
		t.Errorf("--rerequest-off counters %+v, want 1 unanswered", *s.Rerequest)
	}
}

// TestBadFlagsExit2: each bad flag exits 2 naming it, before anything is
// sent.
func TestBadFlagsExit2(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--itch"},
		{[]string{"--itch", snippet, "--speed", "2", "--rate", "1000"}, "--speed: cannot be combined with --rate"},
		{[]string{"--itch", snippet, "--pcap", snippet}, "--pcap: cannot be combined with --itch"},
		{[]string{"--itch", snippet, "--speed", "-1"}, "--speed"},
		{[]string{"--itch", snippet, "--rate", "-1"}, "--rate"},
		{[]string{"--itch", snippet, "--speed", "fast"}, "-speed"},
		{[]string{"--itch", snippet, "--group", "10.0.0.1:5"}, "--group"},
		{[]string{"--itch", snippet, "--group-b", "239.1.1.1"}, "--group-b"},
		{[]string{"--itch", snippet, "--loss-a", "1.5"}, "--loss-a"},
		{[]string{"--itch", snippet, "--loss-b", "0.1"}, "--group-b"},
		{[]string{"--itch", snippet, "--burst-a", "0"}, "--burst-a"},
		{[]string{"--itch", snippet, "--group-b", "239.1.1.1:5", "--silence-b", "5s:2s"}, "--silence-b"},
		{[]string{"--itch", snippet, "--silence-a", "soon"}, "--silence-a"},
		{[]string{"--itch", snippet, "--session", "ELEVENCHARS"}, "--session"},
		{[]string{"--itch", snippet, "--rerequest", "localhost"}, "--rerequest"},
		{[]string{"--itch", snippet, "--rerequest-off"}, "--rerequest"},
		{[]string{"--itch", snippet, "--max-datagram", "30"}, "--max-datagram"},
		{[]string{"--itch", snippet, "--heartbeat", "0s"}, "--heartbeat"},
		{[]string{"--itch", snippet, "--iface", "lo"}, "--iface"},
		{[]string{"--itch", filepath.Join(t.TempDir(), "missing")}, "--itch"},
		{[]string{"--itch", snippet, "--no-such-flag"}, "no-such-flag"},
		{[]string{"--itch", snippet, "stray"}, "stray"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb, func(netip.AddrPort) { t.Errorf("%v: started serving", c.args) })
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestHelpTellsTheTruth: --help exits 0 and lists every flag the program
// has, with what each does.
func TestHelpTellsTheTruth(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &errb, nil); code != 0 {
		t.Fatalf("--help exit %d: %s", code, errb.String())
	}
	var s settings
	newFlagSet(&s, &errb).VisitAll(func(f *flag.Flag) {
		if !regexp.MustCompile(`\n  -`+f.Name+`[ \n]`).MatchString(out.String()) || !strings.Contains(out.String(), f.Usage[:20]) {
			t.Errorf("--help does not describe --%s", f.Name)
		}
	})
}

// TestGzipCutShort: a gzipped file cut short is served up to where it can
// be read, then the exchange ends the session and exits 1 with an error
// saying the gzip stream ended early.
func TestGzipCutShort(t *testing.T) {
	data, err := os.ReadFile(gzipped(t, snippet))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.gz")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	want := fileMessages(t, snippet)
	g := lineGroups(t)
	a := listenLine(t, g[0])
	r := startReplay(t, "--itch", cut, "--speed", "0", "--group", g[0].String())
	got := messagesBySeq(t, "CUTGZ", a.wait(t))
	code, s := r.stop(t)
	if code != 1 || !strings.Contains(s.Error, "gzip") || !strings.Contains(s.Error, "unexpected EOF") || len(got) == 0 || len(got) >= len(want) {
		t.Fatalf("exit %d, error %q, %d messages served: want exit 1 saying the gzip stream ended early, after some of the %d", code, s.Error, len(got), len(want))
	}
	for i := range len(got) {
		if !bytes.Equal(got[uint64(i+1)], want[i]) {
			t.Fatalf("message %d is %x, the file's is %x", i+1, got[uint64(i+1)], want[i])
		}
	}
}
