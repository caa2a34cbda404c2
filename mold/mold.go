// Package mold is the MoldUDP64 packet codec: the 20-byte downstream header,
// message blocks, heartbeats, end-of-session packets, the re-request packet, a
// builder that fills a packet up to the transport's largest datagram, and a
// zero-copy iterator over a received packet.
//
// A downstream packet is
//
//	session   10 bytes  ASCII alphanumeric, right-padded with spaces
//	sequence   8 bytes  big-endian; sequence number of the first message
//	count      2 bytes  big-endian; number of message blocks
//	count × { length 2 bytes big-endian, message `length` bytes }
//
// Sequence numbers count messages, not packets. Count 0 is a heartbeat, whose
// sequence is the next one the stream will use; count 0xFFFF is end of session,
// likewise carrying the next sequence. A re-request has the downstream header's
// shape with count meaning "number of messages requested" and no blocks.
// Zero-length messages are legal.
package mold

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Packet layout constants.
const (
	SessionLen   = 10
	HeaderLen    = SessionLen + 8 + 2
	BlockHdrLen  = 2
	EndOfSession = 0xFFFF
	// MaxCount is the largest message count of a data packet (0xFFFF means
	// end of session).
	MaxCount = 0xFFFE
	// MaxMessageLen is the largest message a block can carry.
	MaxMessageLen = 0xFFFF
)

// Session names a MoldUDP64 stream: 10 ASCII bytes, right-padded with spaces.
type Session [SessionLen]byte

// ParseSession pads s with spaces to a Session. s must be 1 to 10 bytes of
// printable ASCII without spaces.
func ParseSession(s string) (Session, error) {
	var out Session
	if len(s) == 0 || len(s) > SessionLen {
		return out, fmt.Errorf("mold: session %q: length %d, want 1..%d", s, len(s), SessionLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return out, fmt.Errorf("mold: session %q: byte %d (0x%02x) is not printable ASCII", s, i, s[i])
		}
	}
	copy(out[:], s)
	for i := len(s); i < SessionLen; i++ {
		out[i] = ' '
	}
	return out, nil
}

// String returns the session without trailing padding. Bytes outside
// printable ASCII are shown as Go escapes.
func (s Session) String() string {
	n := SessionLen
	for n > 0 && s[n-1] == ' ' {
		n--
	}
	for _, c := range s[:n] {
		if c < ' ' || c > '~' {
			return fmt.Sprintf("%q", string(s[:n]))
		}
	}
	return string(s[:n])
}

// Header is a MoldUDP64 packet header.
type Header struct {
	Session Session
	// Seq is the sequence number of the first message, or for a heartbeat and
	// end of session the next sequence number of the stream, or for a
	// re-request the first sequence requested.
	Seq uint64
	// Count is the number of message blocks, 0 for a heartbeat, EndOfSession,
	// or for a re-request the number of messages requested.
	Count uint16
}

// IsHeartbeat reports whether the header is a heartbeat's.
func (h Header) IsHeartbeat() bool { return h.Count == 0 }

// IsEndOfSession reports whether the header is an end of session's.
func (h Header) IsEndOfSession() bool { return h.Count == EndOfSession }

// Messages returns the number of messages the packet carries: Count, or 0 for
// a heartbeat and end of session.
func (h Header) Messages() int {
	if h.Count == EndOfSession {
		return 0
	}
	return int(h.Count)
}

// MessageCount returns the number of messages packet b carries, from its
// header alone: Count, or 0 for a heartbeat and end of session. ok is false
// when b is too short to hold a header. It never allocates, so a receive
// path can count what it drops (package ud/faults takes it as
// Config.CountMessages).
func MessageCount(b []byte) (n int, ok bool) {
	if len(b) < HeaderLen {
		return 0, false // checked here: DecodeHeader's error would allocate
	}
	h, _ := DecodeHeader(b)
	return h.Messages(), true
}

// Put writes h into b[:HeaderLen].
func (h Header) Put(b []byte) {
	_ = b[HeaderLen-1]
	copy(b[:SessionLen], h.Session[:])
	binary.BigEndian.PutUint64(b[SessionLen:], h.Seq)
	binary.BigEndian.PutUint16(b[SessionLen+8:], h.Count)
}

// Append appends h to b.
func (h Header) Append(b []byte) []byte {
	b = append(b, h.Session[:]...)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	return binary.BigEndian.AppendUint16(b, h.Count)
}

// Sentinel errors that a *PacketError wraps; test with errors.Is.
var (
	// ErrShortHeader: fewer than 20 bytes.
	ErrShortHeader = errors.New("shorter than the 20-byte header")
	// ErrMissingBlock: the count promises a message block whose 2-byte
	// length field is not there (including a count with no payload at all).
	ErrMissingBlock = errors.New("message block missing")
	// ErrBlockPastEnd: a block's length runs past the end of the packet.
	ErrBlockPastEnd = errors.New("message length runs past the end of the packet")
	// ErrTrailingBytes: bytes follow the last message the count promises.
	ErrTrailingBytes = errors.New("trailing bytes after the last message")
	// ErrControlPayload: a heartbeat or end of session carries bytes after
	// its header.
	ErrControlPayload = errors.New("heartbeat or end of session with a payload")
)

// PacketError says what is wrong with a packet and where.
type PacketError struct {
	Err     error  // one of the sentinel errors above
	Len     int    // packet length
	Session string // session, when the header was readable
	Seq     uint64 // header sequence, when readable
	Count   int    // header count, when readable
	Msg     int    // 1-based index of the message at fault, if any
	Offset  int    // byte offset of the fault
	Detail  string
}

func (e *PacketError) Error() string {
	s := fmt.Sprintf("mold: packet of %d bytes", e.Len)
	if e.Err != ErrShortHeader {
		s += fmt.Sprintf(" (session %s, seq %d, count %d)", e.Session, e.Seq, e.Count)
	}
	s += ": " + e.Err.Error()
	if e.Msg > 0 {
		s += fmt.Sprintf(": message %d of %d", e.Msg, e.Count)
	}
	s += fmt.Sprintf(" at offset %d", e.Offset)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the sentinel error.
func (e *PacketError) Unwrap() error { return e.Err }

// DecodeHeader reads a packet's header.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		return h, &PacketError{Err: ErrShortHeader, Len: len(b), Offset: len(b),
			Detail: fmt.Sprintf("%d bytes, need %d", len(b), HeaderLen)}
	}
	copy(h.Session[:], b[:SessionLen])
	h.Seq = binary.BigEndian.Uint64(b[SessionLen:])
	h.Count = binary.BigEndian.Uint16(b[SessionLen+8:])
	return h, nil
}

// Packet is a validated view of a received packet. It refers to the bytes it
// was parsed from and does not copy them.
type Packet struct {
	Header
	buf []byte
}

// Parse validates b as one whole MoldUDP64 downstream packet: a header, then
// exactly the blocks its count promises, each inside b, and nothing after.
// Heartbeats and end of session must be exactly 20 bytes. Parse does not
// allocate unless b is malformed.
func Parse(b []byte) (Packet, error) {
	_, h, err := scan(b, false)
	if err != nil {
		return Packet{}, err
	}
	return Packet{Header: h, buf: b}, nil
}

// PacketLen returns the length of the packet at the start of b, which may be
// followed by more packets (as in a capture file of packets written back to
// back). It validates the packet's blocks as Parse does but allows bytes after
// it.
func PacketLen(b []byte) (int, error) {
	n, _, err := scan(b, true)
	return n, err
}

func scan(b []byte, allowTrailing bool) (int, Header, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return 0, h, err
	}
	fail := func(sentinel error, msg, off int, detail string) (int, Header, error) {
		return 0, h, &PacketError{Err: sentinel, Len: len(b), Session: h.Session.String(), Seq: h.Seq,
			Count: int(h.Count), Msg: msg, Offset: off, Detail: detail}
	}
	off := HeaderLen
	count := h.Messages()
	for i := 0; i < count; i++ {
		if len(b)-off < BlockHdrLen {
			return fail(ErrMissingBlock, i+1, off,
				fmt.Sprintf("%d bytes remain, a block needs at least %d", len(b)-off, BlockHdrLen))
		}
		l := int(binary.BigEndian.Uint16(b[off:]))
		if len(b)-off-BlockHdrLen < l {
			return fail(ErrBlockPastEnd, i+1, off,
				fmt.Sprintf("length %d, %d bytes remain", l, len(b)-off-BlockHdrLen))
		}
		off += BlockHdrLen + l
	}
	if off != len(b) && !allowTrailing {
		if count == 0 {
			return fail(ErrControlPayload, 0, off, fmt.Sprintf("%d bytes after the header", len(b)-off))
		}
		return fail(ErrTrailingBytes, 0, off, fmt.Sprintf("%d bytes after message %d", len(b)-off, count))
	}
	return off, h, nil
}

// Bytes returns the packet's bytes.
func (p Packet) Bytes() []byte { return p.buf }

// Iter returns an iterator over the packet's messages.
func (p Packet) Iter() Iter {
	return Iter{buf: p.buf, off: HeaderLen, left: p.Messages(), seq: p.Seq}
}

// Iter walks the messages of a validated Packet without copying them.
type Iter struct {
	buf  []byte
	off  int
	left int
	seq  uint64
}

// Next returns the next message and its sequence number, or ok == false when
// there are none left. The message aliases the packet's bytes.
func (it *Iter) Next() (msg []byte, seq uint64, ok bool) {
	if it.left == 0 {
		return nil, 0, false
	}
	// Parse checked every block lies inside buf, so no bounds can fail here.
	l := int(binary.BigEndian.Uint16(it.buf[it.off:]))
	start := it.off + BlockHdrLen
	msg = it.buf[start : start+l : start+l]
	seq = it.seq
	it.off = start + l
	it.left--
	it.seq++
	return msg, seq, true
}

// Remaining returns how many messages Next has not yet returned.
func (it *Iter) Remaining() int { return it.left }

// AppendHeartbeat appends a heartbeat of session with next sequence nextSeq.
func AppendHeartbeat(b []byte, session Session, nextSeq uint64) []byte {
	return Header{Session: session, Seq: nextSeq, Count: 0}.Append(b)
}

// AppendEndOfSession appends an end-of-session packet.
func AppendEndOfSession(b []byte, session Session, nextSeq uint64) []byte {
	return Header{Session: session, Seq: nextSeq, Count: EndOfSession}.Append(b)
}

// Request is a MoldUDP64 re-request: count messages of session starting at Seq.
type Request struct {
	Session Session
	Seq     uint64
	Count   uint16
}

// RequestLen is the size of an encoded Request.
const RequestLen = HeaderLen

// Append appends the encoded request to b.
func (r Request) Append(b []byte) []byte {
	return Header(r).Append(b)
}

// Sentinel errors of ParseRequest.
var (
	ErrRequestLen   = errors.New("re-request must be exactly 20 bytes")
	ErrRequestSeq   = errors.New("re-request for sequence 0")
	ErrRequestCount = errors.New("re-request count must be 1..65534")
)

// RequestError says what is wrong with a re-request.
type RequestError struct {
	Err    error
	Detail string
}

func (e *RequestError) Error() string { return "mold: " + e.Err.Error() + ": " + e.Detail }

// Unwrap returns the sentinel error.
func (e *RequestError) Unwrap() error { return e.Err }

// ParseRequest decodes a re-request packet. Sequence numbers start at 1, and a
// count of 0 or 0xFFFF asks for nothing and is rejected.
func ParseRequest(b []byte) (Request, error) {
	if len(b) != RequestLen {
		return Request{}, &RequestError{Err: ErrRequestLen, Detail: fmt.Sprintf("got %d bytes", len(b))}
	}
	h, _ := DecodeHeader(b)
	r := Request(h)
	if r.Seq == 0 {
		return r, &RequestError{Err: ErrRequestSeq, Detail: "session " + r.Session.String()}
	}
	if r.Count == 0 || r.Count == EndOfSession {
		return r, &RequestError{Err: ErrRequestCount, Detail: fmt.Sprintf("session %s seq %d count %d", r.Session, r.Seq, r.Count)}
	}
	return r, nil
}
