package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Link types (LINKTYPE_* of tcpdump.org) the decoder understands.
const (
	LinkEthernet  = 1   // Ethernet II, with 802.1Q / 802.1ad VLAN tags
	LinkRaw       = 101 // raw IP: the packet starts with the IP header
	LinkLinuxSLL  = 113 // Linux cooked capture v1 (tcpdump -i any)
	LinkIPv4      = 228 // raw IPv4
	LinkLinuxSLL2 = 276 // Linux cooked capture v2
)

// linkNames names the link types an error message is most likely to meet.
var linkNames = map[uint32]string{
	0: "BSD loopback", 1: "Ethernet", 6: "Token Ring", 9: "PPP", 101: "raw IP", 105: "IEEE 802.11",
	113: "Linux cooked v1", 127: "IEEE 802.11 radiotap", 147: "user 0", 228: "raw IPv4", 229: "raw IPv6",
	276: "Linux cooked v2",
}

// LinkName returns the name of link type lt, or "unknown".
func LinkName(lt uint32) string {
	if n, ok := linkNames[lt]; ok {
		return n
	}
	return "unknown"
}

func linkSupported(lt uint32) bool {
	switch lt {
	case LinkEthernet, LinkRaw, LinkLinuxSLL, LinkIPv4, LinkLinuxSLL2:
		return true
	}
	return false
}

// MaxRecordLen is the largest captured record the Reader accepts. A record
// claiming more cannot be real (no link carries such frames) and means the
// file's framing is lost, which ends the input.
const MaxRecordLen = 256 << 10

// Sentinel errors a *FormatError wraps; test with errors.Is.
var (
	// ErrNotCapture: the input starts with neither pcap's nor pcapng's magic.
	ErrNotCapture = errors.New("not a pcap or pcapng file")
	// ErrLinkType: the capture's link type is not one the decoder reads.
	ErrLinkType = errors.New("unsupported link type")
	// ErrMalformed: one record is wrong and was skipped; reading goes on.
	ErrMalformed = errors.New("malformed record")
	// ErrFraming: the file's framing is lost; reading stops.
	ErrFraming = errors.New("broken file framing")
)

// FormatError says what is wrong with a capture and where: the 1-based
// record (packet or pcapng block) number, the byte offset of the record in
// the file, and the field. A FormatError wrapping ErrMalformed is about one
// record, which was skipped; any other ends the input.
type FormatError struct {
	Record int    // 1-based record number; 0 for the file header
	Offset int64  // byte offset of the record (or header) in the file
	Field  string // the wrong field
	Reason string
	Err    error // a sentinel above, or io.ErrUnexpectedEOF, or a read error
}

func (e *FormatError) Error() string {
	what := "file header"
	if e.Record > 0 {
		what = fmt.Sprintf("record %d", e.Record)
	}
	msg := fmt.Sprintf("pcap: %s at offset %d: %s: %s", what, e.Offset, e.Field, e.Reason)
	if e.Err != nil && e.Err != ErrMalformed {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *FormatError) Unwrap() error { return e.Err }

// Record is one captured packet. Data shares the Reader's buffer: it is
// valid until the next call to Next.
type Record struct {
	Num      int    // 1-based number among the file's records (pcapng: blocks)
	Offset   int64  // byte offset of the record in the file
	LinkType uint32 // the link type of Data
	TsNs     int64  // capture time, Unix ns (0 when the file has none)
	OrigLen  int    // the packet's length on the wire
	Data     []byte // the captured bytes (at most OrigLen)
}

// Format is a capture file's format.
type Format uint8

// Formats.
const (
	FormatPcap   Format = iota + 1 // classic libpcap, micro- or nanosecond
	FormatPcapNG                   // pcapng
)

// Classic pcap magic numbers as read little-endian.
const (
	magicMicro   = 0xa1b2c3d4
	magicNano    = 0xa1b23c4d
	magicNG      = 0x0a0d0d0a // pcapng section header block type
	byteOrderNG  = 0x1a2b3c4d
	pcapHdrLen   = 24
	pcapRecHdr   = 16
	ngBlockMin   = 12
	ngMaxIfaces  = 64
	ngMaxBlock   = MaxRecordLen + 1<<16 // a packet and generous options
	defaultTsRes = 6                    // microseconds
)

// iface is a pcapng interface (or the one link of a classic pcap).
type iface struct {
	link    uint32
	snapLen uint32
	tsMul   int64 // ns per unit, when the resolution is a power of ten ≥ 1 ns
	tsDiv   int64 // units per ns (finer resolutions), else 1
}

// Reader reads the records of a classic pcap or pcapng file. It does not
// allocate per record once its buffer has grown to the largest record.
type Reader struct {
	r      *bufio.Reader
	format Format
	order  binary.ByteOrder
	ifaces []iface
	off    int64 // bytes consumed
	num    int   // records (blocks) read
	buf    []byte
	err    error // sticky
}

// NewReader reads the file header of r and returns a Reader of its records.
// It fails with a *FormatError if r is neither pcap nor pcapng, if the
// header is cut short, or if the (classic) link type is not supported.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 64<<10), buf: make([]byte, 2048)}
	head, err := rd.r.Peek(4)
	if err != nil {
		return nil, rd.headerErr("magic", "input ends before the magic number", err)
	}
	switch binary.LittleEndian.Uint32(head) {
	case magicMicro, magicNano:
		rd.order = binary.LittleEndian
	case swap32(magicMicro), swap32(magicNano):
		rd.order = binary.BigEndian
	case magicNG:
		rd.format = FormatPcapNG
		return rd, nil // the section header is read as the first block
	default:
		return nil, &FormatError{Field: "magic", Reason: fmt.Sprintf("0x%08x", binary.BigEndian.Uint32(head)), Err: ErrNotCapture}
	}
	rd.format = FormatPcap
	h := rd.buf[:pcapHdrLen]
	if _, err := io.ReadFull(rd.r, h); err != nil {
		return nil, rd.headerErr("header", "input ends inside the 24-byte file header", err)
	}
	rd.off = pcapHdrLen
	in := iface{link: rd.order.Uint32(h[20:]) & 0x0fffffff, snapLen: rd.order.Uint32(h[16:]), tsMul: 1000, tsDiv: 1}
	if rd.order.Uint32(h) == magicNano {
		in.tsMul = 1
	}
	if !linkSupported(in.link) {
		return nil, &FormatError{Field: "link type", Reason: fmt.Sprintf("%d (%s)", in.link, LinkName(in.link)), Err: ErrLinkType}
	}
	rd.ifaces = append(rd.ifaces, in)
	return rd, nil
}

func swap32(v uint32) uint32 {
	return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24
}

func (r *Reader) headerErr(field, reason string, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &FormatError{Field: field, Reason: reason, Err: err}
}

// Format returns the file's format.
func (r *Reader) Format() Format { return r.format }

// Offset returns the bytes of the file consumed so far.
func (r *Reader) Offset() int64 { return r.off }

// Records returns the number of records (pcapng: blocks) read so far.
func (r *Reader) Records() int { return r.num }

// grow returns the Reader's buffer with at least n bytes.
func (r *Reader) grow(n int) []byte {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	return r.buf[:n]
}

// read reads len(b) bytes of record num at off, or returns a *FormatError
// saying the file ends inside field.
func (r *Reader) read(b []byte, num int, off int64, field string) error {
	n, err := io.ReadFull(r.r, b)
	r.off += int64(n)
	if err == nil {
		return nil
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &FormatError{Record: num, Offset: off, Field: field,
			Reason: fmt.Sprintf("file ends after %d of %d bytes", n, len(b)), Err: io.ErrUnexpectedEOF}
	}
	return &FormatError{Record: num, Offset: off, Field: field, Reason: "read failed", Err: err}
}

// Next returns the next packet record. It returns io.EOF at the clean end of
// the file. A *FormatError wrapping ErrMalformed reports a record that was
// skipped: call Next again for the next one. Any other error is sticky: the
// file is truncated (io.ErrUnexpectedEOF), its framing is lost, its link
// type is not supported, or reading failed.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	var rec Record
	var err error
	if r.format == FormatPcap {
		rec, err = r.nextPcap()
	} else {
		rec, err = r.nextNG()
	}
	if err != nil && !errors.Is(err, ErrMalformed) {
		r.err = err
	}
	return rec, err
}

func (r *Reader) nextPcap() (Record, error) {
	off := r.off
	num := r.num + 1
	h := r.grow(pcapRecHdr)
	// The first byte decides between a clean end and a cut header.
	if _, err := r.r.Peek(1); err == io.EOF {
		return Record{}, io.EOF
	}
	r.num = num
	if err := r.read(h, num, off, "record header"); err != nil {
		return Record{}, err
	}
	in := &r.ifaces[0]
	sec, frac := int64(r.order.Uint32(h)), int64(r.order.Uint32(h[4:]))
	capLen, origLen := r.order.Uint32(h[8:]), r.order.Uint32(h[12:])
	if capLen > MaxRecordLen {
		return Record{}, &FormatError{Record: num, Offset: off, Field: "captured length",
			Reason: fmt.Sprintf("%d exceeds %d", capLen, MaxRecordLen), Err: ErrFraming}
	}
	rec := Record{Num: num, Offset: off, LinkType: in.link, TsNs: sec*1e9 + frac*in.tsMul, OrigLen: int(origLen)}
	data := r.grow(int(capLen))
	if err := r.read(data, num, off, "packet data"); err != nil {
		return Record{}, err
	}
	rec.Data = data
	if capLen > origLen {
		return rec, &FormatError{Record: num, Offset: off, Field: "captured length",
			Reason: fmt.Sprintf("%d exceeds the original length %d", capLen, origLen), Err: ErrMalformed}
	}
	return rec, nil
}

// pcapng block types.
const (
	blockIDB = 1
	blockSPB = 3
	blockEPB = 6
)

func (r *Reader) nextNG() (Record, error) {
	for {
		off := r.off
		num := r.num + 1
		if _, err := r.r.Peek(1); err == io.EOF {
			return Record{}, io.EOF
		}
		r.num = num
		h := r.grow(8)
		if err := r.read(h, num, off, "block header"); err != nil {
			return Record{}, err
		}
		typ := binary.LittleEndian.Uint32(h)
		if typ == magicNG {
			if err := r.sectionHeader(num, off, h); err != nil {
				return Record{}, err
			}
			continue
		}
		if r.order == nil {
			return Record{}, &FormatError{Record: num, Offset: off, Field: "block type",
				Reason: "the file does not start with a section header block", Err: ErrFraming}
		}
		typ = r.order.Uint32(h)
		total := r.order.Uint32(h[4:])
		if total < ngBlockMin || total%4 != 0 || total > ngMaxBlock {
			return Record{}, &FormatError{Record: num, Offset: off, Field: "block length",
				Reason: fmt.Sprintf("%d: want a multiple of 4 in %d..%d", total, ngBlockMin, ngMaxBlock), Err: ErrFraming}
		}
		body := r.grow(int(total) - 8)
		if err := r.read(body, num, off, "block body"); err != nil {
			return Record{}, err
		}
		if trail := r.order.Uint32(body[len(body)-4:]); trail != total {
			return Record{}, &FormatError{Record: num, Offset: off, Field: "trailing block length",
				Reason: fmt.Sprintf("%d, the block began with %d", trail, total), Err: ErrFraming}
		}
		body = body[:len(body)-4]
		switch typ {
		case blockIDB:
			if err := r.interfaceBlock(num, off, body); err != nil {
				return Record{}, err
			}
		case blockEPB:
			return r.enhancedPacket(num, off, body)
		case blockSPB:
			return r.simplePacket(num, off, body)
		}
		// Other blocks (name resolution, statistics, ...) carry no packets.
	}
}

// sectionHeader reads a section header block whose first 8 bytes are h: it
// sets the byte order and forgets the previous section's interfaces.
func (r *Reader) sectionHeader(num int, off int64, h []byte) error {
	bom := r.grow(12)[8:]
	if err := r.read(bom, num, off, "byte-order magic"); err != nil {
		return err
	}
	switch binary.LittleEndian.Uint32(bom) {
	case byteOrderNG:
		r.order = binary.LittleEndian
	case swap32(byteOrderNG):
		r.order = binary.BigEndian
	default:
		return &FormatError{Record: num, Offset: off, Field: "byte-order magic",
			Reason: fmt.Sprintf("0x%08x", binary.BigEndian.Uint32(bom)), Err: ErrFraming}
	}
	total := r.order.Uint32(h[4:])
	if total < 28 || total%4 != 0 || total > ngMaxBlock {
		return &FormatError{Record: num, Offset: off, Field: "block length",
			Reason: fmt.Sprintf("section header of %d bytes", total), Err: ErrFraming}
	}
	rest := r.grow(int(total) - 12)
	if err := r.read(rest, num, off, "section header"); err != nil {
		return err
	}
	if trail := r.order.Uint32(rest[len(rest)-4:]); trail != total {
		return &FormatError{Record: num, Offset: off, Field: "trailing block length",
			Reason: fmt.Sprintf("%d, the block began with %d", trail, total), Err: ErrFraming}
	}
	r.ifaces = r.ifaces[:0]
	return nil
}

// interfaceBlock reads an interface description block's body.
func (r *Reader) interfaceBlock(num int, off int64, b []byte) error {
	if len(b) < 8 {
		return &FormatError{Record: num, Offset: off, Field: "interface block", Reason: "shorter than 8 bytes", Err: ErrFraming}
	}
	in := iface{link: uint32(r.order.Uint16(b)), snapLen: r.order.Uint32(b[4:]), tsMul: 1000, tsDiv: 1}
	if !linkSupported(in.link) {
		return &FormatError{Record: num, Offset: off, Field: "link type",
			Reason: fmt.Sprintf("%d (%s) of interface %d", in.link, LinkName(in.link), len(r.ifaces)), Err: ErrLinkType}
	}
	if len(r.ifaces) == ngMaxIfaces {
		return &FormatError{Record: num, Offset: off, Field: "interface block",
			Reason: fmt.Sprintf("more than %d interfaces", ngMaxIfaces), Err: ErrFraming}
	}
	// Options: code, length, value padded to 4. if_tsresol (9) sets the
	// timestamp unit: 10^-n s, or 2^-n s with the high bit set.
	for o := b[8:]; len(o) >= 4; {
		code, n := r.order.Uint16(o), int(r.order.Uint16(o[2:]))
		if code == 0 || 4+n > len(o) {
			break
		}
		if code == 9 && n >= 1 {
			res := o[4]
			if res&0x80 != 0 || res > 18 {
				return &FormatError{Record: num, Offset: off, Field: "if_tsresol",
					Reason: fmt.Sprintf("0x%02x: only powers of ten down to 10^-18 s are supported", res), Err: ErrFraming}
			}
			in.tsMul, in.tsDiv = 1, 1
			for e := int(res); e < 9; e++ {
				in.tsMul *= 10
			}
			for e := 9; e < int(res); e++ {
				in.tsDiv *= 10
			}
		}
		if adv := 4 + (n+3)&^3; adv < len(o) {
			o = o[adv:]
		} else {
			break
		}
	}
	r.ifaces = append(r.ifaces, in)
	return nil
}

// enhancedPacket reads an enhanced packet block's body.
func (r *Reader) enhancedPacket(num int, off int64, b []byte) (Record, error) {
	if len(b) < 20 {
		return Record{}, &FormatError{Record: num, Offset: off, Field: "enhanced packet block", Reason: "shorter than 20 bytes", Err: ErrMalformed}
	}
	id := r.order.Uint32(b)
	if int(id) >= len(r.ifaces) {
		return Record{}, &FormatError{Record: num, Offset: off, Field: "interface ID",
			Reason: fmt.Sprintf("%d, but the section described %d interfaces", id, len(r.ifaces)), Err: ErrMalformed}
	}
	in := &r.ifaces[id]
	ts := int64(r.order.Uint32(b[4:]))<<32 | int64(r.order.Uint32(b[8:]))
	capLen, origLen := r.order.Uint32(b[12:]), r.order.Uint32(b[16:])
	if uint64(capLen) > uint64(len(b)-20) {
		return Record{}, &FormatError{Record: num, Offset: off, Field: "captured length",
			Reason: fmt.Sprintf("%d, but the block holds %d", capLen, len(b)-20), Err: ErrMalformed}
	}
	rec := Record{Num: num, Offset: off, LinkType: in.link, TsNs: ts * in.tsMul / in.tsDiv, OrigLen: int(origLen), Data: b[20 : 20+capLen]}
	if capLen > origLen {
		return rec, &FormatError{Record: num, Offset: off, Field: "captured length",
			Reason: fmt.Sprintf("%d exceeds the original length %d", capLen, origLen), Err: ErrMalformed}
	}
	return rec, nil
}

// simplePacket reads a simple packet block's body: interface 0, no time.
func (r *Reader) simplePacket(num int, off int64, b []byte) (Record, error) {
	if len(b) < 4 || len(r.ifaces) == 0 {
		return Record{}, &FormatError{Record: num, Offset: off, Field: "simple packet block",
			Reason: "too short, or no interface described", Err: ErrMalformed}
	}
	in := &r.ifaces[0]
	origLen := int(r.order.Uint32(b))
	data := b[4:]
	if in.snapLen > 0 && len(data) > int(in.snapLen) {
		data = data[:in.snapLen]
	}
	if len(data) > origLen {
		data = data[:origLen] // the rest is padding
	}
	return Record{Num: num, Offset: off, LinkType: in.link, OrigLen: origLen, Data: data}, nil
}
