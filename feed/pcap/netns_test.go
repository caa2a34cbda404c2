package pcap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
)

// sendEnv names the file of datagrams the test binary, started again inside
// a network namespace, sends (see TestMain).
const sendEnv = "TICKCAST_PCAP_SEND"

// captureEnv names the capture files tcpdump writes, comma-separated, for
// the sender.
const captureEnv = "TICKCAST_PCAP_CAPTURE"

// TestMain lets the test binary serve as the sender inside a network
// namespace: with sendEnv set it sends the datagrams of that file and exits.
func TestMain(m *testing.M) {
	if path := os.Getenv(sendEnv); path != "" {
		if err := sendDatagrams(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A datagram file holds records of (uint16 port, uint32 length, payload).
func appendDatagram(b []byte, port uint16, payload []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, port)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// probePort receives the probes that tell when tcpdump captures.
const probePort = 9

// sendDatagrams sends each datagram of the file to 127.0.0.1:port, where a
// socket of its own receives them (so that no ICMP error comes back). It
// starts once tcpdump is capturing: it sends probes to probePort until the
// capture files (captureEnv) hold more than their headers.
func sendDatagrams(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	recv := map[uint16]*net.UDPConn{}
	out, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	if recv[probePort], err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: probePort}); err != nil {
		return err
	}
	for i := 0; ; i++ {
		capturing := true
		for _, c := range strings.Split(os.Getenv(captureEnv), ",") {
			if fi, err := os.Stat(c); err != nil || fi.Size() <= pcapHdrLen {
				capturing = false
			}
		}
		if capturing {
			break
		}
		if i == 500 {
			return fmt.Errorf("tcpdump captured none of %d probes", i)
		}
		out.WriteToUDP([]byte("probe"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: probePort})
		time.Sleep(20 * time.Millisecond)
	}
	for len(b) > 0 {
		port, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint32(b[2:]))
		payload := b[6 : 6+n]
		b = b[6+n:]
		if recv[port] == nil {
			if recv[port], err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)}); err != nil {
				return err
			}
		}
		if _, err := out.WriteToUDP(payload, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)}); err != nil {
			return err
		}
	}
	return nil
}

// netnsCapture sends the datagrams of the file at send inside a new network
// namespace whose loopback has the given MTU, captures them with tcpdump on
// each of ifaces at once ("lo": Ethernet; "any": Linux cooked), and returns
// the captures' paths. The kernel fragments every datagram larger than the
// MTU.
func netnsCapture(t *testing.T, send []byte, mtu int, ifaces ...string) []string {
	t.Helper()
	testenv.NeedRoot(t)
	ipBin := testenv.NeedTool(t, "ip")
	tcpdump := testenv.NeedTool(t, "tcpdump")
	ns := fmt.Sprintf("tickcast-pcap-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if b, err := exec.Command(ipBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, b)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { exec.Command(ipBin, "netns", "del", ns).Run() })
	run("-n", ns, "link", "set", "lo", "mtu", fmt.Sprint(mtu), "up")

	dir := t.TempDir()
	var captures []string
	var dumps []*exec.Cmd
	var tails []chan string
	stop := func() {
		for i, d := range dumps {
			d.Process.Signal(os.Interrupt)
			t.Logf("tcpdump -i %s: %s", ifaces[i], strings.TrimSpace(<-tails[i]))
			d.Wait()
		}
	}
	for _, iface := range ifaces {
		capture := filepath.Join(dir, iface+".pcap")
		dump := exec.Command(ipBin, "netns", "exec", ns, tcpdump, "-i", iface, "-n", "-U", "--immediate-mode",
			"-s", "2048", "-B", "16384", "-Z", "root", "-w", capture, "udp")
		stderr, err := dump.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := dump.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stderr)
		for lines.Scan() && !strings.Contains(lines.Text(), "listening on") {
			t.Logf("tcpdump: %s", lines.Text())
		}
		// "listening on" comes before the capture does: the sender waits
		// for its probes to show in the file.
		tail := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(stderr)
			tail <- string(b)
		}()
		captures, dumps, tails = append(captures, capture), append(dumps, dump), append(tails, tail)
	}

	sendFile := filepath.Join(dir, "send")
	if err := os.WriteFile(sendFile, send, 0o644); err != nil {
		t.Fatal(err)
	}
	sender := exec.Command(ipBin, "netns", "exec", ns, os.Args[0])
	sender.Env = append(os.Environ(), sendEnv+"="+sendFile, captureEnv+"="+strings.Join(captures, ","))
	if b, err := sender.CombinedOutput(); err != nil {
		stop()
		t.Fatalf("sender: %v: %s", err, b)
	}
	// tcpdump writes each packet as it comes (-U): stop once the files
	// have stopped growing.
	for size, still := int64(-1), 0; still < 5; time.Sleep(50 * time.Millisecond) {
		var total int64
		for _, c := range captures {
			fi, err := os.Stat(c)
			if err != nil {
				t.Fatal(err)
			}
			total += fi.Size()
		}
		if total == size {
			still++
		} else {
			size, still = total, 0
		}
	}
	stop()
	return captures
}

// snippetPackets frames the real ITCH snippet in MoldUDP64 packets of at
// most maxDatagram bytes, sequence 1 on.
func snippetPackets(t *testing.T, maxDatagram int) [][]byte {
	t.Helper()
	f, err := os.Open("../../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := itch.NewReader(f)
	b, err := mold.NewBuilder(maxDatagram)
	if err != nil {
		t.Fatal(err)
	}
	session, _ := mold.ParseSession("SNIPPET")
	var packets [][]byte
	b.Start(session, 1)
	for {
		msg, _, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !b.Add(msg) {
			next := b.NextSeq()
			packets = append(packets, bytes.Clone(b.Finish()))
			b.Start(session, next)
			b.Add(msg)
		}
	}
	return append(packets, bytes.Clone(b.Finish()))
}

// TestFragmented: real MoldUDP64 packets sent through a loopback of MTU 576
// in a network namespace arrive fragmented, and tcpdump's capture of them
// reads as the original capture does once the fragments are reassembled:
// the README's counts for Multiple.Packets, and the snippet's documented
// counts for the whole ITCH snippet framed 1,400 bytes a packet, every
// packet sent twice (lines A and B), two of them out of order.
func TestFragmented(t *testing.T) {
	orig := testenv.RealCapture(t, "Multiple.Packets.pcap")
	// The datagrams the kernel must fragment: payload, UDP and IP headers
	// beyond the MTU.
	const mtu = 576
	fragmented := 0
	var send []byte
	for _, row := range tshark(t, orig, "udp.payload") {
		p, err := hex.DecodeString(strings.ReplaceAll(row[0], ":", ""))
		if err != nil {
			t.Fatal(err)
		}
		send = appendDatagram(send, 26477, p)
		if len(p)+28 > mtu {
			fragmented++
		}
	}
	snippet := snippetPackets(t, 1400)
	// The fourth packet is sent before the third: a gap, filled a packet
	// later.
	order := make([][]byte, len(snippet))
	copy(order, snippet)
	order[2], order[3] = order[3], order[2]
	early, err := mold.Parse(snippet[3])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range order {
		send = appendDatagram(send, 26478, p)
		send = appendDatagram(send, 26478, p)
		if len(p)+28 > mtu {
			fragmented += 2
		}
	}
	for i, path := range netnsCapture(t, send, mtu, "lo", "any") {
		t.Run([]string{"Ethernet", "Linux cooked"}[i], func(t *testing.T) {
			checkFragmented(t, path, fragmented, snippet, early)
		})
	}
}

// checkFragmented checks a capture TestFragmented made.
func checkFragmented(t *testing.T, path string, fragmented int, snippet [][]byte, early mold.Packet) {
	r, err := readCapture(t, path, Config{Dst: mustAddrPort("127.0.0.1:26477")})
	if err != nil || r.err != nil {
		t.Fatalf("%v %v", err, r.err)
	}
	if want := realCounts["Multiple.Packets.pcap"]; !maps.Equal(r.itch, want) || r.mold.Gaps != 1 {
		t.Errorf("ITCH %v, mold %+v; want %v and the one gap", r.itch, r.mold, want)
	}
	if r.counts.Reassembled != uint64(fragmented) || r.counts.Incomplete != 0 || r.counts.Malformed != 0 {
		t.Errorf("counts %+v: want %d datagrams reassembled, none incomplete or malformed", r.counts, fragmented)
	}

	r, err = readCapture(t, path, Config{Dst: mustAddrPort("127.0.0.1:26478")})
	if err != nil || r.err != nil {
		t.Fatalf("%v %v", err, r.err)
	}
	want := map[string]uint64{"A": 367, "U": 225, "F": 193, "D": 167, "E": 28, "X": 6, "I": 4, "P": 4, "Q": 4, "S": 1, "C": 1}
	if !maps.Equal(r.itch, want) {
		t.Errorf("snippet ITCH counts %v, want %v", r.itch, want)
	}
	n := uint64(len(snippet))
	if r.counts.Datagrams != 2*n || r.counts.Reassembled != uint64(fragmented) || r.mold.DuplicatePackets != n ||
		r.mold.Gaps != 1 || r.mold.Missing != 0 || r.mold.Reordered != uint64(early.Messages()) ||
		r.mold.FirstSeq != 1 || r.mold.Messages != 1000 {
		t.Errorf("counts %+v %+v: want %d datagrams, %d reassembled, %d duplicate packets, 1 gap filled by %d reordered messages",
			r.counts, r.mold, 2*n, fragmented, n, early.Messages())
	}
	allocsPerMessage(t, path)
}

// allocsPerMessage: reading the ITCH messages of a capture of fragmented
// datagrams allocates nothing per message once the buffers have grown (the
// normalizer has its own allocation tests; it grows its tables once per
// instrument, which the snippet keeps meeting).
func allocsPerMessage(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := NewMessages(bytes.NewReader(data), Config{Dst: mustAddrPort("127.0.0.1:26478")})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 { // grow the buffers: the first packets
		if _, _, err := msgs.Next(); err != nil {
			t.Fatal(err)
		}
	}
	const perRound = 10
	testenv.NoAllocs(t, "pcap messages", 20, perRound, func() {
		for range perRound {
			if _, _, err := msgs.Next(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
