package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
)

// Classic pcap, written little-endian with nanosecond timestamps
// (the magic a1b23c4d), link type Ethernet.
const (
	pcapMagicNs    = 0xa1b23c4d
	pcapSnapLen    = 262144
	linkEthernet   = 1
	ethHeaderLen   = 14
	ipv4HeaderLen  = 20
	udpHeaderLen   = 8
	frameOverhead  = ethHeaderLen + ipv4HeaderLen + udpHeaderLen
	maxUDPPayload  = 65535 - ipv4HeaderLen - udpHeaderLen
	pcapRecHdrLen  = 16
	pcapFileHdrLen = 24
)

// pcapWriter writes UDP datagrams as Ethernet frames to a classic pcap, from
// src to each datagram's destination, a multicast group.
type pcapWriter struct {
	w     *bufio.Writer
	src   netip.Addr
	frame []byte // one record's header and frame, reused
	ipID  uint16
	n     int64 // bytes written
}

func newPcapWriter(w io.Writer, src netip.Addr) (*pcapWriter, error) {
	p := &pcapWriter{w: bufio.NewWriterSize(w, 1<<20), src: src, frame: make([]byte, 0, pcapRecHdrLen+frameOverhead+2048)}
	h := make([]byte, pcapFileHdrLen)
	binary.LittleEndian.PutUint32(h[0:], pcapMagicNs)
	binary.LittleEndian.PutUint16(h[4:], 2) // version 2.4
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], pcapSnapLen)
	binary.LittleEndian.PutUint32(h[20:], linkEthernet)
	n, err := p.w.Write(h)
	p.n += int64(n)
	return p, err
}

// datagram writes payload, sent at tsNs (Unix ns) to dst, an IPv4
// multicast group, from the writer's address and dst's port.
func (p *pcapWriter) datagram(tsNs int64, dst netip.AddrPort, payload []byte) error {
	if len(payload) > maxUDPPayload {
		return fmt.Errorf("pcap: a datagram of %d bytes, at most %d", len(payload), maxUDPPayload)
	}
	size := frameOverhead + len(payload)
	b := p.frame[:pcapRecHdrLen+frameOverhead]
	binary.LittleEndian.PutUint32(b[0:], uint32(tsNs/1e9))
	binary.LittleEndian.PutUint32(b[4:], uint32(tsNs%1e9))
	binary.LittleEndian.PutUint32(b[8:], uint32(size))
	binary.LittleEndian.PutUint32(b[12:], uint32(size))

	// Ethernet: the group's multicast MAC (01:00:5e and the group's low 23
	// bits), from 00:00:00:00:00:00 as on lo.
	eth := b[pcapRecHdrLen:]
	g := dst.Addr().As4()
	copy(eth[0:6], []byte{0x01, 0x00, 0x5e, g[1] & 0x7f, g[2], g[3]})
	clear(eth[6:12])
	binary.BigEndian.PutUint16(eth[12:], 0x0800)

	ip := eth[ethHeaderLen:]
	p.ipID++
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(ipv4HeaderLen+udpHeaderLen+len(payload)))
	binary.BigEndian.PutUint16(ip[4:], p.ipID)
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // don't fragment
	ip[8], ip[9] = 1, 17                       // TTL 1, UDP
	clear(ip[10:12])
	src := p.src.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], g[:])
	binary.BigEndian.PutUint16(ip[10:], ^onesSum(0, ip[:ipv4HeaderLen]))

	udp := ip[ipv4HeaderLen:]
	binary.BigEndian.PutUint16(udp[0:], dst.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpHeaderLen+len(payload)))
	clear(udp[6:8])
	// The checksum over the pseudo-header, the UDP header and the payload.
	var pseudo [12]byte
	copy(pseudo[0:4], src[:])
	copy(pseudo[4:8], g[:])
	pseudo[9] = 17
	binary.BigEndian.PutUint16(pseudo[10:], uint16(udpHeaderLen+len(payload)))
	sum := onesSum(onesSum(onesSum(0, pseudo[:]), udp[:udpHeaderLen]), payload)
	if c := ^sum; c != 0 {
		binary.BigEndian.PutUint16(udp[6:], c)
	} else {
		binary.BigEndian.PutUint16(udp[6:], 0xffff)
	}
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	_, err := p.w.Write(payload)
	p.n += int64(pcapRecHdrLen + size)
	return err
}

// onesSum adds b, as big-endian 16-bit words, to the ones' complement
// sum s (an odd length is padded with a zero byte). Sums are only chained
// over even lengths but the last.
func onesSum(s uint16, b []byte) uint16 {
	acc := uint32(s)
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// flush writes out what is buffered.
func (p *pcapWriter) flush() error { return p.w.Flush() }
