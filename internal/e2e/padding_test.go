package e2e

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud/udp"
	"golang.org/x/sys/unix"
)

// TestTsharkPaddedPackets checks the packets of a feed handler sending with
// --gso, padded for segmentation offload (docs/wire-format.md, "Padding"),
// with Wireshark's moldudp64 dissector, as receivers get them: the
// datagrams a subscriber's sockets receive (the kernel's cut of each run),
// written to a capture file. A capture on lo would show the runs before the
// cut, which is what the docs warn of. tshark must decode every packet with
// the messages its count says and no expert info of Warning or higher; a
// packet padded after its last block instead must raise some, so the check
// is able to fail.
func TestTsharkPaddedPackets(t *testing.T) {
	tshark := testenv.NeedTool(t, "tshark")
	if !hasUDPGSO(t) {
		t.Skip("this kernel has no UDP GSO (getsockopt UDP_SEGMENT refused): the feed handler pads nothing")
	}
	const (
		count    = 20000
		channels = 2
		maxDG    = 300
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ga, _, port := groups(t)
	base := netip.MustParseAddrPort(ga).Addr()

	var mu sync.Mutex
	var got [][]byte
	stop := make(chan struct{})
	var wg sync.WaitGroup
	group := base
	for ch := 0; ch < channels; ch++ {
		r, err := udp.NewReceiver(udp.Config{Group: group, Port: port, MaxDatagram: 9000, CPU: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		group = group.Next()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := 0
				for s := r.Peek(n); s != nil; s = r.Peek(n) {
					mu.Lock()
					got = append(got, append([]byte(nil), s.Data()...))
					mu.Unlock()
					n++
				}
				r.Release(n)
				if n == 0 {
					select {
					case <-stop:
						return
					default:
					}
					r.Wait(10 * time.Millisecond)
				}
			}
		}()
	}

	fh := start(t, ctx, feedhandlerBin, "--count", strconv.Itoa(count), "--rate", "0", "--gso",
		"--channels", strconv.Itoa(channels), "--group", ga, "--max-datagram", strconv.Itoa(maxDG),
		"--instruments", "60", "--seed", "7", "--linger", "0s")
	if code := fh.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	sum := fh.summary(t)
	packets, pad := tsNum(t, sum, "packets"), tsNum(t, sum, "pad_bytes")
	time.Sleep(200 * time.Millisecond) // the last datagrams reach the rings
	close(stop)
	wg.Wait()

	var data, full int
	for _, d := range got {
		if p, err := mold.Parse(d); err == nil && p.Messages() > 0 {
			data++
			if len(d) == maxDG {
				full++
			}
		}
	}
	t.Logf("received %d datagrams, %d data packets (%d full, %d bytes of padding in all); the feed handler sent %d data packets",
		len(got), data, full, pad, packets)
	if uint64(data) != packets || pad == 0 || full == 0 {
		t.Fatalf("received %d of %d data packets, %d of them full, padding %d bytes: want all, and full padded ones", data, packets, full, pad)
	}
	// The negative control: 12 zero bytes after the last block, which the
	// wire format forbids.
	var control []byte
	for i := len(got) - 1; i >= 0; i-- {
		if p, err := mold.Parse(got[i]); err == nil && p.Messages() > 0 {
			control = append(append([]byte(nil), got[i]...), make([]byte, 12)...)
			break
		}
	}
	pcap := filepath.Join(t.TempDir(), "received.pcap")
	writeRawPcap(t, pcap, base, port, append(got, control))

	pkts := tsDissect(t, ctx, tshark, pcap, port)
	if len(pkts) != len(got)+1 {
		t.Fatalf("tshark read %d packets of %d", len(pkts), len(got)+1)
	}
	for i, p := range pkts[:len(got)] {
		if !p.isMold {
			t.Fatalf("frame %d: not decoded as MoldUDP64", p.frame)
		}
		for j, sev := range p.expertSevs {
			if tsForbidden(sev) {
				t.Fatalf("frame %d (%d bytes, count %d): expert info %q at severity %#x", p.frame, len(got[i]), p.count, p.expertMsgs[j], sev)
			}
		}
		if p.count > 0 && p.count != mold.EndOfSession && uint64(len(p.msgseq)) != p.count {
			t.Fatalf("frame %d (%d bytes): tshark found %d messages, the count says %d", p.frame, len(got[i]), len(p.msgseq), p.count)
		}
	}
	last := pkts[len(got)]
	raised := false
	for _, sev := range last.expertSevs {
		raised = raised || tsForbidden(sev)
	}
	if !raised {
		t.Fatalf("the negative control (bytes after the last block) raised no expert info of Warning or higher: %v", last.expertMsgs)
	}
	t.Logf("tshark decoded all %d datagrams cleanly; the control raised %v", len(got), last.expertMsgs)
}

// writeRawPcap writes the datagrams as a pcap file of raw IPv4 packets
// (LINKTYPE_IPV4), each sent from 127.0.0.1 to dst:port.
func writeRawPcap(t *testing.T, path string, dst netip.Addr, port int, datagrams [][]byte) {
	t.Helper()
	b := binary.LittleEndian.AppendUint32(nil, 0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = binary.LittleEndian.AppendUint32(b, 0) // thiszone
	b = binary.LittleEndian.AppendUint32(b, 0) // sigfigs
	b = binary.LittleEndian.AppendUint32(b, 65535)
	b = binary.LittleEndian.AppendUint32(b, 228) // LINKTYPE_IPV4
	src, d4 := [4]byte{127, 0, 0, 1}, dst.As4()
	for i, d := range datagrams {
		ip := make([]byte, 28, 28+len(d))
		ip[0], ip[8], ip[9] = 0x45, 1, 17 // IPv4, TTL 1, UDP
		binary.BigEndian.PutUint16(ip[2:], uint16(28+len(d)))
		binary.BigEndian.PutUint16(ip[4:], uint16(i))
		copy(ip[12:], src[:])
		copy(ip[16:], d4[:])
		var sum uint32
		for j := 0; j < 20; j += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[j:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
		binary.BigEndian.PutUint16(ip[20:], 40000)
		binary.BigEndian.PutUint16(ip[22:], uint16(port))
		binary.BigEndian.PutUint16(ip[24:], uint16(8+len(d))) // checksum 0: none
		pkt := append(ip, d...)
		b = binary.LittleEndian.AppendUint32(b, uint32(1+i/1000))
		b = binary.LittleEndian.AppendUint32(b, uint32(i%1000*1000))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(pkt)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(pkt)))
		b = append(b, pkt...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// hasUDPGSO reports whether this kernel knows UDP_SEGMENT, so that a feed
// handler with --gso sends runs of full packets by segmentation offload and
// pads them.
func hasUDPGSO(t *testing.T) bool {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	_, err = unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	return err == nil
}
