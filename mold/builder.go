package mold

import (
	"encoding/binary"
	"fmt"
)

// Builder fills one MoldUDP64 packet at a time in a buffer it owns, up to a
// maximum datagram size given by the transport. It never allocates after
// NewBuilder.
//
// Use: Start a packet, Reserve (or Add) messages until one does not fit,
// Finish to get the packet bytes, send them, Start the next packet.
type Builder struct {
	buf     []byte
	max     int
	session Session
	first   uint64
	count   int
}

// NewBuilder returns a builder of packets of at most maxDatagram bytes.
func NewBuilder(maxDatagram int) (*Builder, error) {
	if maxDatagram < HeaderLen+BlockHdrLen {
		return nil, fmt.Errorf("mold: max datagram %d bytes is smaller than a header and one block header (%d)", maxDatagram, HeaderLen+BlockHdrLen)
	}
	if maxDatagram > 65507 {
		return nil, fmt.Errorf("mold: max datagram %d bytes is larger than a UDP/IPv4 datagram can be (65507)", maxDatagram)
	}
	return &Builder{buf: make([]byte, HeaderLen, maxDatagram), max: maxDatagram}, nil
}

// SetTail keeps n bytes free at the end of every packet for a trailer
// added after Finish (a seal, package seal): packets fill to MaxDatagram
// less n, and the buffer Finish returns has room for n bytes more. Call it
// once, before the first packet.
func (b *Builder) SetTail(n int) error {
	if n < 0 || b.max-n < HeaderLen+BlockHdrLen {
		return fmt.Errorf("mold: a %d-byte trailer leaves no room for a message in %d bytes", n, b.max)
	}
	b.max -= n
	return nil
}

// MaxDatagram returns the builder's size limit (less SetTail's trailer).
func (b *Builder) MaxDatagram() int { return b.max }

// Start begins a packet of session whose first message has sequence seq,
// discarding any unfinished packet.
func (b *Builder) Start(session Session, seq uint64) {
	b.session = session
	b.first = seq
	b.count = 0
	b.buf = b.buf[:HeaderLen]
}

// Count returns the number of messages in the current packet.
func (b *Builder) Count() int { return b.count }

// Len returns the current packet's size in bytes.
func (b *Builder) Len() int { return len(b.buf) }

// FirstSeq returns the sequence number of the current packet's first message.
func (b *Builder) FirstSeq() uint64 { return b.first }

// NextSeq returns the sequence number the next added message will have.
func (b *Builder) NextSeq() uint64 { return b.first + uint64(b.count) }

// Fits reports whether a message of n bytes fits in the current packet.
func (b *Builder) Fits(n int) bool {
	return n <= MaxMessageLen && b.count < MaxCount && len(b.buf)+BlockHdrLen+n <= b.max
}

// Reserve appends a block of n bytes and returns it for the caller to fill in
// place, or nil if it does not fit (Fits(n) is false).
func (b *Builder) Reserve(n int) []byte {
	if !b.Fits(n) {
		return nil
	}
	off := len(b.buf)
	b.buf = b.buf[:off+BlockHdrLen+n]
	binary.BigEndian.PutUint16(b.buf[off:], uint16(n))
	b.count++
	return b.buf[off+BlockHdrLen : off+BlockHdrLen+n : off+BlockHdrLen+n]
}

// Add appends a copy of msg and reports whether it fit.
func (b *Builder) Add(msg []byte) bool {
	dst := b.Reserve(len(msg))
	if dst == nil {
		return false
	}
	copy(dst, msg)
	return true
}

// Unreserve removes the last message, for a caller that reserved a block and
// then could not fill it.
func (b *Builder) Unreserve() {
	if b.count == 0 {
		return
	}
	// Walk the blocks to find the start of the last one; packets are short.
	off := HeaderLen
	for i := 0; i < b.count-1; i++ {
		off += BlockHdrLen + int(binary.BigEndian.Uint16(b.buf[off:]))
	}
	b.buf = b.buf[:off]
	b.count--
}

// PadTo lengthens the current packet's last message with zero bytes until
// the packet is n bytes long, and returns how many it added: 0 for a packet
// without messages or already n bytes or longer, or when n is past
// MaxDatagram or the last block would pass MaxMessageLen. The framing stays
// exact (the block's length covers the padding), so every MoldUDP64 decoder
// reads the packet; the message's own decoder must ignore the trailing
// bytes. A publisher pads so that a run of full packets has one length, as
// segmentation offload needs.
func (b *Builder) PadTo(n int) int {
	add := n - len(b.buf)
	if b.count == 0 || add <= 0 || n > b.max {
		return 0
	}
	off := HeaderLen
	for i := 0; i < b.count-1; i++ {
		off += BlockHdrLen + int(binary.BigEndian.Uint16(b.buf[off:]))
	}
	l := int(binary.BigEndian.Uint16(b.buf[off:])) + add
	if l > MaxMessageLen {
		return 0
	}
	binary.BigEndian.PutUint16(b.buf[off:], uint16(l))
	end := len(b.buf)
	b.buf = b.buf[:n]
	clear(b.buf[end:])
	return add
}

// Messages returns an iterator over the messages added so far, so a caller can
// stamp them in place before Finish.
func (b *Builder) Messages() Iter {
	return Iter{buf: b.buf, off: HeaderLen, left: b.count, seq: b.first}
}

// Finish writes the header and returns the packet. The bytes are valid until
// the next Start.
func (b *Builder) Finish() []byte {
	Header{Session: b.session, Seq: b.first, Count: uint16(b.count)}.Put(b.buf)
	return b.buf
}
