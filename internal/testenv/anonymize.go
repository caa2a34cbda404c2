package testenv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Anonymized is a capture made from real ones as public captures are
// anonymized, and what its packets carried before.
type Anonymized struct {
	Path     string   // the anonymized capture
	Packets  int      // its MoldUDP64 packets
	Messages [][]byte // the messages of its packets, in capture order
}

// AnonymizeCaptures writes one classic pcap of the records of the real
// captures names (CaptureDir; the test skips without them), in that order,
// with every IPv4 address, UDP port and checksum, MoldUDP64 session and
// sequence number set to zero (the IPv4 header checksums are made again),
// and returns it with the messages the packets carry, read by a walk of
// the bytes of its own: Ethernet, 802.1Q tags, IPv4, UDP, MoldUDP64 blocks.
func AnonymizeCaptures(t testing.TB, names ...string) Anonymized {
	t.Helper()
	var out bytes.Buffer
	var a Anonymized
	for i, name := range names {
		b, err := os.ReadFile(RealCapture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b23c4d && binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 {
			t.Fatalf("%s: not a little-endian classic pcap", name)
		}
		if i == 0 {
			out.Write(b[:24])
		} else if !bytes.Equal(b[:24], out.Bytes()[:24]) {
			t.Fatalf("%s: its file header differs from %s's", name, names[0])
		}
		for off := 24; off < len(b); {
			if off+16 > len(b) {
				t.Fatalf("%s: record header cut at %d", name, off)
			}
			n := int(binary.LittleEndian.Uint32(b[off+8:]))
			if off+16+n > len(b) {
				t.Fatalf("%s: record at %d cut", name, off)
			}
			rec := bytes.Clone(b[off : off+16+n])
			msgs, err := anonymizeFrame(rec[16:])
			if err != nil {
				t.Fatalf("%s: record at %d: %v", name, off, err)
			}
			out.Write(rec)
			a.Packets++
			a.Messages = append(a.Messages, msgs...)
			off += 16 + n
		}
	}
	a.Path = filepath.Join(t.TempDir(), "anonymized.pcap")
	if err := os.WriteFile(a.Path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return a
}

// anonymizeFrame zeroes, in place, the addresses, ports, session and
// sequence number of an Ethernet frame of IPv4 UDP MoldUDP64, and returns
// copies of the messages it carries.
func anonymizeFrame(f []byte) ([][]byte, error) {
	if len(f) < 14 {
		return nil, fmt.Errorf("frame of %d bytes", len(f))
	}
	etype, ip := binary.BigEndian.Uint16(f[12:]), f[14:]
	for etype == 0x8100 && len(ip) >= 4 {
		etype, ip = binary.BigEndian.Uint16(ip[2:]), ip[4:]
	}
	if etype != 0x0800 || len(ip) < 20 || ip[9] != 17 {
		return nil, fmt.Errorf("not IPv4 UDP: ether type 0x%04x", etype)
	}
	ihl := int(ip[0]&0x0f) * 4
	clear(ip[12:20])
	clear(ip[10:12])
	var sum uint32
	for i := 0; i < ihl; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := ip[ihl:]
	clear(udp[0:4]) // ports
	clear(udp[6:8]) // checksum: none
	mold := udp[8:binary.BigEndian.Uint16(udp[4:])]
	if len(mold) < 20 {
		return nil, fmt.Errorf("MoldUDP64 header of %d bytes", len(mold))
	}
	clear(mold[:18]) // session and sequence number
	count := int(binary.BigEndian.Uint16(mold[18:]))
	var msgs [][]byte
	for i, off := 0, 20; i < count && count != 0xffff; i++ {
		if off+2 > len(mold) {
			return nil, fmt.Errorf("message %d of %d missing", i+1, count)
		}
		n := int(binary.BigEndian.Uint16(mold[off:]))
		if off+2+n > len(mold) {
			return nil, fmt.Errorf("message %d of %d cut", i+1, count)
		}
		msgs = append(msgs, bytes.Clone(mold[off+2:off+2+n]))
		off += 2 + n
	}
	return msgs, nil
}
