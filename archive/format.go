package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/tickcast/tickcast/mold"
)

// Record kinds.
const (
	// KindPackets is a record of packets exactly as sent.
	KindPackets = 1
	// KindLoss is a record of messages the archive does not hold: the
	// recorder could not keep up or JetStream refused their record.
	KindLoss = 2
)

// Record layout: a header of HeaderLen bytes, big-endian like MoldUDP64,
// then for KindPackets the packets, each a 2-byte length and its bytes.
//
//	 0  4  magic "TCA1"
//	 4  1  kind (KindPackets or KindLoss)
//	 5  1  reserved, 0
//	 6  2  channel
//	 8 10  session
//	18  8  first: the first message sequence the record covers
//	26  8  next: one past the last
//	34  4  packets (0 for a loss record)
//	38  8  first recorded: wall clock, Unix ns, when the recorder took the first packet
//	46  8  last recorded: the same for the last packet
//	54  4  CRC-32C (Castagnoli) of the record with these 4 bytes zero
const (
	HeaderLen = 58
	magic     = "TCA1"
	crcOff    = 54
	// MaxPacketLen is the largest packet a record holds (a UDP payload).
	MaxPacketLen = 65507
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is matched (errors.Is) by every error Decode returns.
var ErrCorrupt = errors.New("archive: corrupt record")

// Record is one stored message of the archive: a channel's packets of one
// session, covering messages First..Next-1, or a loss record saying the
// archive holds none of those messages.
type Record struct {
	Kind     uint8
	Channel  int
	Session  mold.Session
	First    uint64 // first message sequence covered
	Next     uint64 // one past the last
	FirstNs  int64  // when the recorder took the first packet (Unix ns)
	LastNs   int64  // when it took the last one
	nPackets int
	body     []byte // the packets, length-prefixed
	raw      []byte // the whole record as stored
}

// Packets returns the number of packets the record holds.
func (r *Record) Packets() int { return r.nPackets }

// EachPacket calls fn with each packet, in order; pkt aliases the record's
// bytes. Decode has validated them all.
func (r *Record) EachPacket(fn func(pkt []byte) error) error {
	b := r.body
	for len(b) > 0 {
		n := int(binary.BigEndian.Uint16(b))
		if err := fn(b[2 : 2+n]); err != nil {
			return err
		}
		b = b[2+n:]
	}
	return nil
}

// String names the record for errors and logs.
func (r *Record) String() string {
	kind := "packets"
	if r.Kind == KindLoss {
		kind = "loss"
	}
	return fmt.Sprintf("%s record of channel %d session %s messages %d..%d", kind, r.Channel, r.Session, r.First, r.Next-1)
}

// DecodeError says what is wrong with a stored record and where.
type DecodeError struct {
	Offset int    // byte offset of the fault in the record
	Detail string // what is wrong
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("archive: corrupt record: at byte %d: %s", e.Offset, e.Detail)
}

// Unwrap returns ErrCorrupt.
func (e *DecodeError) Unwrap() error { return ErrCorrupt }

// Decode validates b as one record and returns it, aliasing b. Every
// field is checked: the magic, kind, checksum, that each packet is a whole
// MoldUDP64 packet of the record's session, that the packets continue
// each other's sequences from First to exactly Next, and that a loss
// record holds no packets.
func Decode(b []byte) (Record, error) {
	bad := func(off int, format string, args ...any) (Record, error) {
		return Record{}, &DecodeError{Offset: off, Detail: fmt.Sprintf(format, args...)}
	}
	if len(b) < HeaderLen {
		return bad(len(b), "%d bytes, a record has at least %d", len(b), HeaderLen)
	}
	if string(b[:4]) != magic {
		return bad(0, "magic %q, want %q", b[:4], magic)
	}
	if want, got := binary.BigEndian.Uint32(b[crcOff:]), checksum(b); want != got {
		return bad(crcOff, "checksum %08x, the bytes give %08x", want, got)
	}
	r := Record{Kind: b[4], Channel: int(binary.BigEndian.Uint16(b[6:])), First: binary.BigEndian.Uint64(b[18:]),
		Next: binary.BigEndian.Uint64(b[26:]), FirstNs: int64(binary.BigEndian.Uint64(b[38:])),
		LastNs: int64(binary.BigEndian.Uint64(b[46:])), body: b[HeaderLen:], raw: b}
	copy(r.Session[:], b[8:18])
	count := binary.BigEndian.Uint32(b[34:])
	switch {
	case r.Kind != KindPackets && r.Kind != KindLoss:
		return bad(4, "kind %d, want %d (packets) or %d (loss)", r.Kind, KindPackets, KindLoss)
	case b[5] != 0:
		return bad(5, "reserved byte %d, want 0", b[5])
	case r.First == 0 || r.Next < r.First:
		return bad(18, "messages %d up to %d: want 1 <= first <= next", r.First, r.Next)
	case r.Kind == KindLoss && (count != 0 || len(r.body) != 0):
		return bad(34, "a loss record with %d packets and %d bytes after its header", count, len(r.body))
	case r.Kind == KindLoss && r.Next == r.First:
		return bad(26, "a loss record of no messages")
	case r.Kind == KindPackets && count == 0:
		return bad(34, "a packets record with no packets")
	}
	next := r.First
	off := HeaderLen
	for i := uint32(0); i < count; i++ {
		if len(b)-off < 2 {
			return bad(off, "packet %d of %d: %d bytes left, its length needs 2", i+1, count, len(b)-off)
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		if len(b)-off-2 < n {
			return bad(off, "packet %d of %d: length %d, %d bytes left", i+1, count, n, len(b)-off-2)
		}
		p, err := mold.Parse(b[off+2 : off+2+n])
		if err != nil {
			return bad(off+2, "packet %d of %d: %v", i+1, count, err)
		}
		if p.Session != r.Session {
			return bad(off+2, "packet %d of %d: session %s in a record of session %s", i+1, count, p.Session, r.Session)
		}
		if p.Seq != next {
			return bad(off+2, "packet %d of %d: sequence %d, the record's stream is at %d", i+1, count, p.Seq, next)
		}
		if p.IsEndOfSession() && i != count-1 {
			return bad(off+2, "packet %d of %d: an end of session before the record's last packet", i+1, count)
		}
		next += uint64(p.Messages())
		off += 2 + n
	}
	if off != len(b) {
		return bad(off, "%d bytes after the last of %d packets", len(b)-off, count)
	}
	if r.Kind == KindPackets && next != r.Next {
		return bad(26, "the packets end at message %d, the header at %d", next-1, r.Next-1)
	}
	r.nPackets = int(count)
	return r, nil
}

// checksum is the CRC-32C of b with its checksum field taken as zero.
func checksum(b []byte) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, b[:crcOff])
	c = crc32.Update(c, castagnoli, zero[:])
	return crc32.Update(c, castagnoli, b[crcOff+4:])
}

// builder accumulates one record in a buffer it owns.
type builder struct {
	buf      []byte
	count    uint32
	next     uint64
	session  mold.Session
	channel  int
	firstNs  int64
	lastNs   int64
	kind     uint8
	first    uint64
	capBytes int
}

// reset starts a packets record of channel ch in session s at first.
func (b *builder) reset(ch int, s mold.Session, first uint64, nowNs int64) {
	b.buf = b.buf[:HeaderLen]
	b.kind, b.channel, b.session, b.first, b.next = KindPackets, ch, s, first, first
	b.count, b.firstNs, b.lastNs = 0, nowNs, nowNs
}

// fits reports whether a packet of n bytes fits.
func (b *builder) fits(n int) bool { return len(b.buf)+2+n <= b.capBytes }

// add appends a packet of messages messages (0 for an end of session).
func (b *builder) add(pkt []byte, messages int, nowNs int64) {
	b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(len(pkt)))
	b.buf = append(b.buf, pkt...)
	b.count++
	b.next += uint64(messages)
	b.lastNs = nowNs
}

// loss makes the builder a loss record of messages first..next-1.
func (b *builder) loss(ch int, s mold.Session, first, next uint64, nowNs int64) {
	b.buf = b.buf[:HeaderLen]
	b.kind, b.channel, b.session, b.first, b.next = KindLoss, ch, s, first, next
	b.count, b.firstNs, b.lastNs = 0, nowNs, nowNs
}

// finish writes the header and checksum and returns the record's bytes.
func (b *builder) finish() []byte {
	h := b.buf[:HeaderLen]
	copy(h, magic)
	h[4], h[5] = b.kind, 0
	binary.BigEndian.PutUint16(h[6:], uint16(b.channel))
	copy(h[8:18], b.session[:])
	binary.BigEndian.PutUint64(h[18:], b.first)
	binary.BigEndian.PutUint64(h[26:], b.next)
	binary.BigEndian.PutUint32(h[34:], b.count)
	binary.BigEndian.PutUint64(h[38:], uint64(b.firstNs))
	binary.BigEndian.PutUint64(h[46:], uint64(b.lastNs))
	binary.BigEndian.PutUint32(h[crcOff:], checksum(b.buf))
	return b.buf
}
