package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Datagram is one UDP datagram of a capture. Payload shares the reader's
// buffers: it is valid until the next call to Next.
type Datagram struct {
	Record  int   // number of the record that completed it
	Offset  int64 // file offset of that record
	TsNs    int64 // its capture time, Unix ns
	Src     netip.AddrPort
	Dst     netip.AddrPort
	Payload []byte
}

// Counts are what a DatagramReader read and skipped.
type Counts struct {
	Records     uint64 `json:"records"`     // packet records read
	Datagrams   uint64 `json:"datagrams"`   // UDP datagrams, whole
	Filtered    uint64 `json:"filtered"`    // UDP datagrams to another destination than the filter's
	NotUDP      uint64 `json:"not_udp"`     // records that are not IPv4 UDP (ARP, IPv6, TCP, ...), skipped
	Fragments   uint64 `json:"fragments"`   // IPv4 fragments read
	Reassembled uint64 `json:"reassembled"` // datagrams reassembled from fragments
	// Incomplete counts fragmented datagrams given up: a fragment never
	// came within FragmentTimeout, the reassembly table was full, or the
	// capture ended first.
	Incomplete uint64 `json:"incomplete"`
	Malformed  uint64 `json:"malformed"` // records skipped as malformed
}

// MaxPending bounds the fragmented datagrams reassembled at once; a new one
// beyond it evicts the oldest (counted in Counts.Incomplete). Each takes
// 65 KiB at most.
const MaxPending = 64

// FragmentTimeout is how long, in capture time, a fragmented datagram waits
// for its other fragments.
const FragmentTimeout = 30e9 // ns

// DatagramReader reads the UDP datagrams of a capture: it decodes the link
// layer (Ethernet with VLAN tags, Linux cooked, raw IP), IPv4, reassembles
// fragments, and checks the UDP header. Malformed records are counted,
// reported to OnMalformed and skipped. It does not allocate per record
// once its buffers have grown.
type DatagramReader struct {
	rd     *Reader
	filter netip.AddrPort // zero: every datagram
	counts Counts
	frags  [MaxPending]fragBuf
	used   int // frags[:used] have been allocated
	// OnMalformed, when set, is called with each record skipped as
	// malformed (a *FormatError wrapping ErrMalformed).
	OnMalformed func(error)
}

// NewDatagramReader returns a reader of rd's UDP datagrams, only those to
// dst if it is valid.
func NewDatagramReader(rd *Reader, dst netip.AddrPort) *DatagramReader {
	return &DatagramReader{rd: rd, filter: dst}
}

// Counts returns the counters so far.
func (d *DatagramReader) Counts() *Counts { return &d.counts }

// Offset returns the bytes of the file consumed so far.
func (d *DatagramReader) Offset() int64 { return d.rd.Offset() }

// Next returns the next UDP datagram. At the end of the file it counts the
// datagrams still incomplete and returns io.EOF, or the error that ended
// the file (see Reader.Next).
func (d *DatagramReader) Next() (Datagram, error) {
	for {
		rec, err := d.rd.Next()
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				d.malformed(err)
				continue
			}
			d.dropPending()
			return Datagram{}, err
		}
		d.counts.Records++
		dg, ok, err := d.decode(&rec)
		if err != nil {
			d.malformed(err)
			continue
		}
		if !ok {
			continue
		}
		if d.filter.IsValid() && dg.Dst != d.filter {
			d.counts.Filtered++
			continue
		}
		d.counts.Datagrams++
		return dg, nil
	}
}

func (d *DatagramReader) malformed(err error) {
	d.counts.Malformed++
	if d.OnMalformed != nil {
		d.OnMalformed(err)
	}
}

func bad(rec *Record, field, format string, args ...any) error {
	return &FormatError{Record: rec.Num, Offset: rec.Offset, Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrMalformed}
}

// Ether types.
const (
	etherIPv4  = 0x0800
	etherVLAN  = 0x8100
	etherQinQ  = 0x88a8
	etherQinQ9 = 0x9100
)

// decode returns the record's UDP datagram; ok is false (with no error) for
// a record that is not IPv4 UDP, or a fragment of a datagram not yet whole.
func (d *DatagramReader) decode(rec *Record) (Datagram, bool, error) {
	b := rec.Data
	var etype uint16
	switch rec.LinkType {
	case LinkEthernet:
		if len(b) < 14 {
			return Datagram{}, false, bad(rec, "Ethernet header", "%d bytes, want 14", len(b))
		}
		etype, b = binary.BigEndian.Uint16(b[12:]), b[14:]
		for etype == etherVLAN || etype == etherQinQ || etype == etherQinQ9 {
			if len(b) < 4 {
				return Datagram{}, false, bad(rec, "VLAN tag", "%d bytes, want 4", len(b))
			}
			etype, b = binary.BigEndian.Uint16(b[2:]), b[4:]
		}
	case LinkLinuxSLL:
		if len(b) < 16 {
			return Datagram{}, false, bad(rec, "Linux cooked header", "%d bytes, want 16", len(b))
		}
		etype, b = binary.BigEndian.Uint16(b[14:]), b[16:]
	case LinkLinuxSLL2:
		if len(b) < 20 {
			return Datagram{}, false, bad(rec, "Linux cooked v2 header", "%d bytes, want 20", len(b))
		}
		etype, b = binary.BigEndian.Uint16(b), b[20:]
	case LinkRaw, LinkIPv4:
		if len(b) < 1 {
			return Datagram{}, false, bad(rec, "IP header", "empty packet")
		}
		if b[0]>>4 == 6 && rec.LinkType == LinkRaw {
			d.counts.NotUDP++ // IPv6 over raw IP
			return Datagram{}, false, nil
		}
		etype = etherIPv4
	default:
		return Datagram{}, false, bad(rec, "link type", "%d (%s)", rec.LinkType, LinkName(rec.LinkType))
	}
	if etype != etherIPv4 {
		d.counts.NotUDP++
		return Datagram{}, false, nil
	}
	return d.ipv4(rec, b)
}

// ipv4 decodes an IPv4 packet, reassembling fragments.
func (d *DatagramReader) ipv4(rec *Record, b []byte) (Datagram, bool, error) {
	if len(b) < 20 {
		return Datagram{}, false, bad(rec, "IPv4 header", "%d bytes, want 20", len(b))
	}
	if v := b[0] >> 4; v != 4 {
		return Datagram{}, false, bad(rec, "IPv4 version", "%d", v)
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	switch {
	case ihl < 20 || ihl > len(b):
		return Datagram{}, false, bad(rec, "IPv4 header length", "%d bytes, with %d captured", ihl, len(b))
	case total < ihl:
		return Datagram{}, false, bad(rec, "IPv4 total length", "%d, less than the header's %d", total, ihl)
	case total > len(b):
		return Datagram{}, false, bad(rec, "IPv4 total length", "%d, but %d bytes were captured (snap length?)", total, len(b))
	}
	if b[9] != 17 {
		d.counts.NotUDP++
		return Datagram{}, false, nil
	}
	src := netip.AddrFrom4([4]byte(b[12:16]))
	dst := netip.AddrFrom4([4]byte(b[16:20]))
	flags := binary.BigEndian.Uint16(b[6:])
	fragOff := int(flags&0x1fff) * 8
	more := flags&0x2000 != 0
	body := b[ihl:total]
	if fragOff != 0 || more {
		d.counts.Fragments++
		key := fragKey{src: src, dst: dst, id: binary.BigEndian.Uint16(b[4:])}
		whole, err := d.fragment(rec, key, fragOff, more, body)
		if whole == nil || err != nil {
			return Datagram{}, false, err
		}
		d.counts.Reassembled++
		body = whole
	}
	if len(body) < 8 {
		return Datagram{}, false, bad(rec, "UDP header", "%d bytes, want 8", len(body))
	}
	ulen := int(binary.BigEndian.Uint16(body[4:]))
	if ulen < 8 || ulen > len(body) {
		return Datagram{}, false, bad(rec, "UDP length", "%d, with %d bytes of IP payload", ulen, len(body))
	}
	return Datagram{
		Record: rec.Num, Offset: rec.Offset, TsNs: rec.TsNs,
		Src:     netip.AddrPortFrom(src, binary.BigEndian.Uint16(body)),
		Dst:     netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[2:])),
		Payload: body[8:ulen],
	}, true, nil
}

// fragKey identifies a fragmented datagram (the protocol is always UDP).
type fragKey struct {
	src, dst netip.Addr
	id       uint16
}

// maxIPPayload is the largest IPv4 payload: 65535 minus the 20-byte header.
const maxIPPayload = 65535 - 20

// fragBuf collects the fragments of one datagram.
type fragBuf struct {
	live    bool
	key     fragKey
	firstNs int64
	size    int // payload size, known from the last fragment; -1 until then
	have    [maxIPPayload/8/64 + 1]uint64
	data    []byte
}

// fragment adds one fragment and returns the whole datagram's IP payload
// when it is complete.
func (d *DatagramReader) fragment(rec *Record, key fragKey, off int, more bool, b []byte) ([]byte, error) {
	if more && len(b)%8 != 0 {
		return nil, bad(rec, "IPv4 fragment", "%d bytes in a fragment with more to come, not a multiple of 8", len(b))
	}
	if off+len(b) > maxIPPayload {
		return nil, bad(rec, "IPv4 fragment offset", "%d + %d bytes exceeds the largest datagram", off, len(b))
	}
	f := d.frag(key, rec.TsNs)
	copy(f.data[off:], b)
	for blk := off / 8; blk < (off+len(b)+7)/8; blk++ {
		f.have[blk/64] |= 1 << (blk % 64)
	}
	if !more {
		f.size = off + len(b)
	}
	if f.size < 0 {
		return nil, nil
	}
	for blk := 0; blk < (f.size+7)/8; blk++ {
		if f.have[blk/64]&(1<<(blk%64)) == 0 {
			return nil, nil
		}
	}
	f.live = false
	return f.data[:f.size], nil
}

// frag returns the buffer of key, starting one if there is none: in a free
// slot, else in place of one past FragmentTimeout, else of the oldest.
func (d *DatagramReader) frag(key fragKey, ts int64) *fragBuf {
	var free, oldest *fragBuf
	for i := range d.used {
		f := &d.frags[i]
		if f.live && ts-f.firstNs > FragmentTimeout {
			f.live = false
			d.counts.Incomplete++
		}
		if f.live && f.key == key {
			return f
		}
		if !f.live && free == nil {
			free = f
		}
		if f.live && (oldest == nil || f.firstNs < oldest.firstNs) {
			oldest = f
		}
	}
	if free == nil && d.used < len(d.frags) {
		free = &d.frags[d.used]
		free.data = make([]byte, maxIPPayload)
		d.used++
	}
	if free == nil {
		free = oldest
		d.counts.Incomplete++
	}
	data := free.data
	*free = fragBuf{live: true, key: key, firstNs: ts, size: -1, data: data}
	return free
}

// dropPending counts the datagrams still incomplete at the end.
func (d *DatagramReader) dropPending() {
	for i := range d.used {
		if d.frags[i].live {
			d.frags[i].live = false
			d.counts.Incomplete++
		}
	}
}
