package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
)

// Wireshark's expert severities (epan/proto.h, PI_SEVERITY_MASK values), as
// tshark prints _ws.expert.severity with -T fields. The contract forbids
// anything from Warning up (tsForbidden).
const (
	tsSevComment = 0x00100000
	tsSevChat    = 0x00200000
	tsSevNote    = 0x00400000
	tsSevWarn    = 0x00600000
	tsSevError   = 0x00800000
)

// tsForbidden reports whether expert info of severity sev breaks the wire
// contract: tshark must decode every packet the project sends "with no
// expert info of severity Warning or higher". The feed handler's packets
// must raise none; the negative control must raise at least one.
func tsForbidden(sev int) bool { return sev >= tsSevWarn }

// MoldUDP64 count values with a special meaning.
const (
	tsHeartbeat    = 0
	tsEndOfSession = 0xFFFF
)

// TestTsharkWireCheck checks the feed handler's packets with a decoder that
// shares no code with tickcast: Wireshark's moldudp64 dissector. It captures
// a run on lo and asserts that
//   - the capture holds exactly the packets the feed handler says it sent
//     (data packets, heartbeats and one end of session, on each line);
//   - on every channel and line, moldudp64.msgseq covers 1..N_c with no hole
//     and no duplicate, and the N_c add up to the messages published;
//   - no packet raises expert info of severity Warning or higher (the
//     Comment-level "request" note tshark puts on end of session is
//     expected: count 0xFFFF with no blocks looks like a re-request to it);
//   - a malformed packet sent to the same port in the same capture does
//     raise one, so the check above is able to fail.
func TestTsharkWireCheck(t *testing.T) {
	tshark := testenv.NeedTool(t, "tshark")
	testenv.NeedRoot(t) // capturing on lo needs root (or capture capabilities)

	const (
		count    = 20000
		channels = 3
		lines    = 2 // A and B
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if v, err := exec.CommandContext(ctx, tshark, "--version").Output(); err == nil {
		t.Logf("%s", bytes.SplitN(v, []byte("\n"), 2)[0])
	}

	ga, gb, port := groups(t)
	bases := [lines]netip.Addr{netip.MustParseAddrPort(ga).Addr(), netip.MustParseAddrPort(gb).Addr()}

	// The probe and the negative control go to 127.0.0.1:port, which is on
	// lo and matches the capture filter, from sockets of their own so that
	// their source ports tell them apart from the feed handler's packets.
	probe, control := tsLoopbackSocket(t), tsLoopbackSocket(t)
	probePort, controlPort := probe.LocalAddr().(*net.UDPAddr).Port, control.LocalAddr().(*net.UDPAddr).Port
	dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}

	pcap := filepath.Join(t.TempDir(), "feed.pcapng")
	c := tsStartCapture(t, tshark, port, pcap)

	// "Capturing on 'Loopback: lo'" is printed before dumpcap has even
	// opened the interface, so it does not prove that packets are being
	// captured. A probe that shows up in tshark's live output does. The
	// probe is a well-formed heartbeat; it stays in the capture and is
	// checked like everything else.
	probePkt := tsMoldHeader("PROBE", 1, tsHeartbeat)
	c.waitFor(t, probePort, 20*time.Second, func() {
		if _, err := probe.WriteToUDP(probePkt, dst); err != nil {
			t.Fatal(err)
		}
	})

	// A heartbeat interval of 100µs makes channels idle long enough to send
	// some heartbeats between messages even at this rate, so count-0
	// packets are part of what tshark checks. Channel 1 is encrypted, the
	// others authenticated only: both kinds of seal are checked.
	fh := start(t, ctx, feedhandlerBin, "--count", strconv.Itoa(count), "--rate", "100000", "--encrypt", "1",
		"--channels", strconv.Itoa(channels), "--group", ga, "--group-b", gb,
		"--instruments", "60", "--seed", "7", "--heartbeat", "100us", "--linger", "0s")
	if code := fh.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	sum := fh.summary(t)
	messages, packets, heartbeats := tsNum(t, sum, "messages"), tsNum(t, sum, "packets"), tsNum(t, sum, "heartbeats")
	t.Logf("feedhandler summary: messages %d, data packets %d (per line), heartbeats %d (per line), %d channels × %d lines",
		messages, packets, heartbeats, channels, lines)

	// Negative control: the count promises 2 blocks, and the only block
	// claims 100 bytes of which 10 follow. tshark's dissector flags this
	// (moldudp64.msglen.invalid, moldudp64.count.invalid; tshark 4.0 says
	// Error for both, and the log shows what it said); the control must
	// show expert info at a severity the contract forbids, Warning or
	// higher (tsForbidden, the same test every feed handler packet must
	// pass), so that the check is able to fail.
	bad := binary.BigEndian.AppendUint16(tsMoldHeader("NEGCTRL", 1, 2), 100)
	bad = append(bad, make([]byte, 10)...)
	if _, err := control.WriteToUDP(bad, dst); err != nil {
		t.Fatal(err)
	}
	// On lo the capture tap runs in the sending thread as each packet is
	// sent, so packets are captured in the order they were sent: once
	// tshark has seen the control packet, it has seen every packet of the
	// feed handler, which had exited before. (The same ordering is why each
	// stream's sequence numbers can be checked in capture order below.)
	c.waitFor(t, controlPort, 20*time.Second, nil)
	c.stop(t, 15*time.Second)

	pkts := tsDissect(t, ctx, tshark, pcap, port)

	// Classify and check every captured packet.
	type stream struct {
		session              string
		data, hb, eos        uint64
		next                 uint64 // expected next sequence number
		seen                 []bool // seen[s] is whether msgseq s was captured
		highest              uint64
		dups, outOfOrder     []string
		afterEOS, badSession []string
	}
	var (
		streams       [lines][channels]stream
		probes, ctrl  int
		ctrlWarn      []string
		warn, unknown []string
		undecoded     []string
		lowExpert     = map[string]int{}
	)
	for l := range lines {
		for ch := range channels {
			streams[l][ch].next = 1
			streams[l][ch].seen = make([]bool, count+1)
		}
	}
	for _, p := range pkts {
		fromProbe := p.dst == "127.0.0.1" && p.srcPort == probePort
		fromControl := p.dst == "127.0.0.1" && p.srcPort == controlPort
		if fromControl {
			ctrl++
			var forbidden []string
			for i, sev := range p.expertSevs {
				if tsForbidden(sev) {
					forbidden = append(forbidden, fmt.Sprintf("severity %s: %s", tsSevName(sev), p.expertMsgs[i]))
				}
			}
			if len(forbidden) > 0 {
				ctrlWarn = append(ctrlWarn, fmt.Sprintf("frame %d: %s", p.frame, strings.Join(forbidden, "; ")))
			}
			continue
		}
		for i, sev := range p.expertSevs {
			if tsForbidden(sev) {
				warn = append(warn, fmt.Sprintf("frame %d to %s (session %q, sequence %d, count %d): severity %s: %s",
					p.frame, p.dst, p.session, p.sequence, p.count, tsSevName(sev), p.expertMsgs[i]))
			} else {
				lowExpert[tsSevName(sev)+": "+p.expertMsgs[i]]++
			}
		}
		if fromProbe {
			probes++
			continue
		}
		l, ch, ok := tsStreamOf(p.dst, bases[:], channels)
		if !ok {
			unknown = append(unknown, fmt.Sprintf("frame %d: %s:%d → %s", p.frame, p.src, p.srcPort, p.dst))
			continue
		}
		s := &streams[l][ch]
		where := fmt.Sprintf("frame %d (%s, channel %d, sequence %d, count %d)", p.frame, p.dst, ch, p.sequence, p.count)
		if !p.isMold {
			// The dissector declines anything shorter than a header; such
			// a packet raises no expert info, so it must be caught here.
			undecoded = append(undecoded, where+": not decoded as MoldUDP64")
			continue
		}
		if s.session == "" {
			s.session = p.session
		} else if p.session != s.session {
			s.badSession = append(s.badSession, fmt.Sprintf("%s: session %q, stream began with %q", where, p.session, s.session))
		}
		if s.eos > 0 {
			s.afterEOS = append(s.afterEOS, where)
		}
		// Heartbeat and end of session carry the next sequence number,
		// a data packet the first one it holds: all equal s.next when the
		// stream is in order.
		if p.sequence != s.next {
			s.outOfOrder = append(s.outOfOrder, fmt.Sprintf("%s: want sequence %d", where, s.next))
		}
		switch p.count {
		case tsHeartbeat:
			s.hb++
		case tsEndOfSession:
			s.eos++
		default:
			s.data++
			if len(p.msgseq) != int(p.count) {
				undecoded = append(undecoded, fmt.Sprintf("%s: %d msgseq values", where, len(p.msgseq)))
			}
			for _, q := range p.msgseq {
				if q == 0 || q > count {
					s.outOfOrder = append(s.outOfOrder, fmt.Sprintf("%s: msgseq %d outside 1..--count", where, q))
					continue
				}
				if s.seen[q] {
					s.dups = append(s.dups, fmt.Sprintf("%s: msgseq %d again", where, q))
				}
				s.seen[q] = true
				s.highest = max(s.highest, q)
			}
			if n := len(p.msgseq); n > 0 {
				s.next = max(s.next, p.msgseq[n-1]+1)
			}
		}
	}

	// Numbers first, so that a failure below comes with the full picture.
	var fhPackets uint64
	var fhData, fhHB, fhEOS [lines]uint64
	for l := range lines {
		for ch := range channels {
			s := &streams[l][ch]
			fhData[l] += s.data
			fhHB[l] += s.hb
			fhEOS[l] += s.eos
			fhPackets += s.data + s.hb + s.eos
		}
	}
	t.Logf("captured %d packets: %d from the feed handler, %d probe, %d negative control, %d unexpected",
		len(pkts), fhPackets, probes, ctrl, len(unknown))
	lineName := [lines]string{"A", "B"}
	for l := range lines {
		t.Logf("line %s: %d data packets, %d heartbeats, %d end of session", lineName[l], fhData[l], fhHB[l], fhEOS[l])
	}
	// N_c is the highest msgseq of channel c on either line; the coverage
	// check below then finds any line that lacks part of 1..N_c.
	var highest [channels]uint64
	var msgTotal uint64
	for ch := range channels {
		for l := range lines {
			highest[ch] = max(highest[ch], streams[l][ch].highest)
		}
		msgTotal += highest[ch]
		s := &streams[0][ch]
		t.Logf("channel %d: session %s, msgseq 1..%d, %d data packets and %d heartbeats per line", ch, s.session, highest[ch], s.data, s.hb)
	}
	for _, k := range slices.Sorted(maps.Keys(lowExpert)) {
		t.Logf("expert info below Warning (allowed): %d × %s", lowExpert[k], k)
	}

	// Captured packets equal packets sent. The summary counts data packets
	// and heartbeats once per line (a send goes to every line), and end of
	// session is one packet per channel and line.
	want := lines * (packets + heartbeats + channels)
	if fhPackets != want {
		t.Errorf("captured %d feed handler packets, want %d = %d lines × (%d data + %d heartbeats + %d end of session)\ncapture stderr:\n%s",
			fhPackets, want, lines, packets, heartbeats, channels, c.stderr.String())
	}
	for l := range lines {
		if fhData[l] != packets || fhHB[l] != heartbeats || fhEOS[l] != channels {
			t.Errorf("line %s: captured %d data packets, %d heartbeats, %d end of session; want %d, %d, %d",
				lineName[l], fhData[l], fhHB[l], fhEOS[l], packets, heartbeats, channels)
		}
	}
	if messages != count || msgTotal != messages {
		t.Errorf("channels' highest msgseq add up to %d; feed handler published %d messages of --count %d", msgTotal, messages, count)
	}

	// msgseq coverage, per channel and line.
	sessions := map[string]int{}
	for ch := range channels {
		n := highest[ch]
		if prev, dup := sessions[streams[0][ch].session]; dup {
			t.Errorf("channels %d and %d share session %q", prev, ch, streams[0][ch].session)
		}
		sessions[streams[0][ch].session] = ch
		for l := range lines {
			s := &streams[l][ch]
			name := fmt.Sprintf("line %s channel %d", lineName[l], ch)
			if s.session != streams[0][ch].session {
				t.Errorf("%s: session %q, line A has %q", name, s.session, streams[0][ch].session)
			}
			var holes []uint64
			for q := uint64(1); q <= n; q++ {
				if !s.seen[q] {
					holes = append(holes, q)
				}
			}
			tsReport(t, name+": missing msgseq", tsUints(holes))
			tsReport(t, name+": duplicate msgseq", s.dups)
			tsReport(t, name+": out of order", s.outOfOrder)
			tsReport(t, name+": packets after end of session", s.afterEOS)
			tsReport(t, name+": session changed", s.badSession)
			if s.eos != 1 {
				t.Errorf("%s: %d end-of-session packets, want 1", name, s.eos)
			}
		}
	}

	tsReport(t, "expert info of severity Warning or higher", warn)
	tsReport(t, "packets tshark did not decode as the feed handler sent them", undecoded)
	tsReport(t, "unexpected packets on the test's port", unknown)
	if probes == 0 {
		t.Errorf("no probe packet in the capture, though the live capture showed one")
	}

	// The negative control proves the check above is able to fail.
	if ctrl != 1 || len(ctrlWarn) != 1 {
		t.Errorf("negative control: captured %d, with expert info of severity Warning or higher %d; want 1 and 1", ctrl, len(ctrlWarn))
	} else {
		t.Logf("negative control raised, as it must: %s", ctrlWarn[0])
	}
}

// tsNum reads a numeric field of a JSON summary.
func tsNum(t *testing.T, m map[string]any, k string) uint64 {
	t.Helper()
	v, ok := m[k].(float64)
	if !ok {
		t.Fatalf("summary has no number %q: %v", k, m)
	}
	return uint64(v)
}

// tsLoopbackSocket opens an unconnected UDP socket on 127.0.0.1. Unconnected,
// because nothing listens on the test's port on 127.0.0.1, and a connected
// socket would turn the resulting ICMP port unreachable into errors on later
// sends.
func tsLoopbackSocket(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tsMoldHeader returns a 20-byte MoldUDP64 header.
func tsMoldHeader(session string, seq uint64, count uint16) []byte {
	b := fmt.Appendf(nil, "%-10s", session)
	b = binary.BigEndian.AppendUint64(b, seq)
	return binary.BigEndian.AppendUint16(b, count)
}

// tsStreamOf maps a destination address to its line and channel: channel c
// of a line is sent to the line's base group plus c.
func tsStreamOf(dst string, bases []netip.Addr, channels int) (line, ch int, ok bool) {
	a, err := netip.ParseAddr(dst)
	if err != nil || !a.Is4() {
		return 0, 0, false
	}
	for l, base := range bases {
		g := base
		for c := range channels {
			if a == g {
				return l, c, true
			}
			g = g.Next()
		}
	}
	return 0, 0, false
}

// tsReport fails the test with the first few of a list of problems.
func tsReport(t *testing.T, what string, list []string) {
	t.Helper()
	if len(list) == 0 {
		return
	}
	const show = 10
	n, more := len(list), ""
	if n > show {
		more = fmt.Sprintf("\n\t... and %d more", n-show)
		list = list[:show]
	}
	t.Errorf("%s (%d):\n\t%s%s", what, n, strings.Join(list, "\n\t"), more)
}

// tsUints formats numbers, merging runs into ranges.
func tsUints(v []uint64) []string {
	var out []string
	for i := 0; i < len(v); {
		j := i
		for j+1 < len(v) && v[j+1] == v[j]+1 {
			j++
		}
		if i == j {
			out = append(out, strconv.FormatUint(v[i], 10))
		} else {
			out = append(out, fmt.Sprintf("%d..%d", v[i], v[j]))
		}
		i = j + 1
	}
	return out
}

// tsCapture is a running tshark capture on lo.
type tsCapture struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr syncBuffer

	mu      sync.Mutex
	partial []byte
	ports   map[int]int   // source port → packets seen live
	seen    chan struct{} // signalled after each line of live output
}

// tsStartCapture starts tshark writing what it captures of UDP port port on
// lo to file. With -P -T fields it also prints each packet's source port as
// it is written, which is how the test knows what has been captured.
func tsStartCapture(t *testing.T, tshark string, port int, file string) *tsCapture {
	t.Helper()
	c := &tsCapture{done: make(chan struct{}), ports: map[int]int{}, seen: make(chan struct{}, 1)}
	c.cmd = exec.Command(tshark, "-n", "-i", "lo", "-f", fmt.Sprintf("udp port %d", port),
		"-B", "32", // MiB of kernel buffer, so a burst is not dropped while dumpcap writes
		"-a", "duration:180", // dumpcap stops by itself even if every stop below fails
		"-w", file, "-l", "-P", "-T", "fields", "-e", "udp.srcport")
	c.cmd.Stdout, c.cmd.Stderr = c, &c.stderr
	// Own process group, so that a hard kill reaches dumpcap, which tshark
	// runs as its child; SIGINT on the death of the test process, so a
	// killed test run (go test -timeout) does not leave a capture behind.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	})
	return c
}

// Write receives tshark's live output: one source port per line.
func (c *tsCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		if port, err := strconv.Atoi(strings.TrimSpace(string(c.partial[:i]))); err == nil {
			c.ports[port]++
		}
		c.partial = c.partial[i+1:]
	}
	select {
	case c.seen <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor waits until a packet from source port port has been captured,
// calling poke (if not nil) every 50ms meanwhile.
func (c *tsCapture) waitFor(t *testing.T, port int, d time.Duration, poke func()) {
	t.Helper()
	deadline := time.After(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		n := c.ports[port]
		c.mu.Unlock()
		if n > 0 {
			return
		}
		if poke != nil {
			poke()
		}
		select {
		case <-c.seen:
		case <-tick.C:
		case <-c.done:
			t.Fatalf("tshark exited while waiting for a packet from port %d: %v\n%s", port, c.cmd.ProcessState, c.stderr.String())
		case <-deadline:
			c.kill()
			t.Fatalf("tshark did not capture a packet from port %d within %v\n%s", port, d, c.stderr.String())
		}
	}
}

// stop ends the capture the way a user does, with SIGINT, so that tshark
// stops dumpcap and the file is complete.
func (c *tsCapture) stop(t *testing.T, d time.Duration) {
	t.Helper()
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(d):
		c.kill()
		t.Fatalf("tshark did not exit within %v of SIGINT\n%s", d, c.stderr.String())
	}
	if !c.cmd.ProcessState.Success() {
		t.Fatalf("tshark capture: %v\n%s", c.cmd.ProcessState, c.stderr.String())
	}
	// tshark reports "N packets captured" and, if the kernel dropped any,
	// "N packets dropped"; both are worth seeing next to the counts.
	for l := range strings.Lines(c.stderr.String()) {
		if strings.Contains(l, "packets") {
			t.Logf("tshark capture: %s", strings.TrimSpace(l))
		}
	}
}

// kill ends tshark and dumpcap hard and waits for tshark.
func (c *tsCapture) kill() {
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
}

// tsPacket is one captured packet as tshark's dissectors see it.
type tsPacket struct {
	frame      int
	src, dst   string
	srcPort    int
	isMold     bool // decoded as MoldUDP64
	session    string
	sequence   uint64
	count      uint64
	msgseq     []uint64
	expertSevs []int
	expertMsgs []string
}

// tsFields are the fields tsDissect asks tshark for, in column order.
var tsFields = []string{
	"frame.number", "ip.src", "ip.dst", "udp.srcport",
	"moldudp64.session", "moldudp64.sequence", "moldudp64.count", "moldudp64.msgseq",
	"_ws.expert.severity", "_ws.expert.message",
}

// tsDissect reads the capture with the moldudp64 dissector on port.
// Repeated fields (msgseq, one per message; expert info) come aggregated
// with '|', which no field value here contains.
func tsDissect(t *testing.T, ctx context.Context, tshark, file string, port int) []tsPacket {
	t.Helper()
	args := []string{"-n", "-r", file, "-d", fmt.Sprintf("udp.port==%d,moldudp64", port),
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=|", "-E", "quote=n"}
	for _, f := range tsFields {
		args = append(args, "-e", f)
	}
	cmd := exec.CommandContext(ctx, tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkts []tsPacket
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\r\n")
		f := strings.Split(line, "\t")
		if len(f) != len(tsFields) {
			t.Fatalf("tshark line has %d fields, want %d: %q", len(f), len(tsFields), line)
		}
		get := func(name string) string { return f[slices.Index(tsFields, name)] }
		bad := func(name, v string, err error) {
			t.Fatalf("tshark %s %q in line %q: %v", name, v, line, err)
		}
		p := tsPacket{src: get("ip.src"), dst: get("ip.dst"), session: strings.TrimRight(get("moldudp64.session"), " ")}
		for _, n := range []struct {
			name string
			dst  *int
		}{{"frame.number", &p.frame}, {"udp.srcport", &p.srcPort}} {
			if *n.dst, err = strconv.Atoi(get(n.name)); err != nil {
				bad(n.name, get(n.name), err)
			}
		}
		// The dissector declines packets shorter than a header; those have
		// no moldudp64 fields at all.
		if c := get("moldudp64.count"); c != "" {
			p.isMold = true
			if p.count, err = strconv.ParseUint(c, 10, 16); err != nil {
				bad("moldudp64.count", c, err)
			}
			if p.sequence, err = strconv.ParseUint(get("moldudp64.sequence"), 10, 64); err != nil {
				bad("moldudp64.sequence", get("moldudp64.sequence"), err)
			}
		}
		for v := range tsSplit(get("moldudp64.msgseq")) {
			q, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				bad("moldudp64.msgseq", v, err)
			}
			p.msgseq = append(p.msgseq, q)
		}
		for v := range tsSplit(get("_ws.expert.severity")) {
			s, err := tsParseSeverity(v)
			if err != nil {
				bad("_ws.expert.severity", v, err)
			}
			p.expertSevs = append(p.expertSevs, s)
		}
		p.expertMsgs = slices.Collect(tsSplit(get("_ws.expert.message")))
		for len(p.expertMsgs) < len(p.expertSevs) {
			p.expertMsgs = append(p.expertMsgs, "(no message)")
		}
		pkts = append(pkts, p)
	}
	return pkts
}

// tsSplit yields the values of an aggregated field; none for an empty one.
func tsSplit(s string) func(func(string) bool) {
	return func(yield func(string) bool) {
		if s == "" {
			return
		}
		for v := range strings.SplitSeq(s, "|") {
			if !yield(v) {
				return
			}
		}
	}
}

// tsSeverityNames are the severities' names, for tshark versions that print
// the name instead of the number, and for messages.
var tsSeverityNames = map[string]int{
	"Comment": tsSevComment, "Chat": tsSevChat, "Note": tsSevNote,
	"Warning": tsSevWarn, "Warn": tsSevWarn, "Error": tsSevError,
}

func tsParseSeverity(v string) (int, error) {
	if n, ok := tsSeverityNames[v]; ok {
		return n, nil
	}
	n, err := strconv.ParseInt(v, 0, 64)
	return int(n), err
}

func tsSevName(s int) string {
	for name, v := range tsSeverityNames {
		if v == s && name != "Warn" {
			return name
		}
	}
	return fmt.Sprintf("0x%08x", s)
}
