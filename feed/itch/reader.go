package itch

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
)

// readBufSize is the Reader's buffer. It must hold the largest framed
// message (2 + 65535 bytes); larger reads mean fewer system calls.
const readBufSize = 256 << 10

// readStable is how much input a Reader consumes, at least, before the
// bytes of a message it returned are overwritten: a buffer is refilled
// only after the other one has been read to within a framed message of
// its end (readBufSize less two of the largest).
const readStable = readBufSize - 2*(2+65535)

// Reader splits NASDAQ's file format, a sequence of (big-endian uint16
// length, message) blocks, into messages without copying them.
//
// It reads into one of two buffers. When the unread bytes must move to
// the front, they move to the other buffer, so that the messages returned
// from the one before stay where they are for a while (readStable): a
// Source reads ahead of the message it normalizes without copying them.
type Reader struct {
	r     io.Reader
	buf   []byte
	spare []byte // the other buffer
	start int    // first unread byte in buf
	end   int    // end of the valid bytes in buf
	base  int64  // input offset of buf[0]
	err   error  // sticky read error, returned once buf is drained
}

// NewReader returns a Reader of r, which must be the uncompressed stream (see
// Decompress).
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, buf: make([]byte, readBufSize), spare: make([]byte, readBufSize)}
}

// Reset makes the Reader read r from its start, keeping its buffers. It
// goes on filling the current buffer where the last input's unread bytes
// began, so that the messages read before stay valid as they would have
// (readStable).
func (r *Reader) Reset(rd io.Reader) {
	*r = Reader{r: rd, buf: r.buf, spare: r.spare, start: r.start, end: r.start, base: -int64(r.start)}
}

// stableBytes says that a message Next returned keeps its bytes until at
// least readStable more bytes of input have been consumed, for Source's
// look-ahead.
func (r *Reader) stableBytes() int { return readStable }

// Offset returns the input offset of the next length prefix: the bytes of
// uncompressed input consumed so far.
func (r *Reader) Offset() int64 { return r.base + int64(r.start) }

// fill reads until at least n unread bytes are buffered or the input ends.
func (r *Reader) fill(n int) {
	if r.start+n > len(r.buf) {
		// Move the unread tail, at most n-1 bytes, to the front of the
		// other buffer.
		copy(r.spare, r.buf[r.start:r.end])
		r.buf, r.spare = r.spare, r.buf
		r.base += int64(r.start)
		r.end -= r.start
		r.start = 0
	}
	// A reader that keeps returning 0, nil would spin; like bufio, give up
	// after 100 such reads in a row.
	for empty := 0; r.end-r.start < n && r.err == nil; {
		k, err := r.r.Read(r.buf[r.end:])
		r.end += k
		switch {
		case err != nil:
			r.err = err
		case k > 0:
			empty = 0
		default:
			if empty++; empty >= 100 {
				r.err = io.ErrNoProgress
			}
		}
	}
}

// Next returns the next message (without its length prefix) and the offset
// of its length prefix in the input. The message shares the Reader's buffer:
// it is valid until the next call (and in fact until readStable more bytes
// have been read). At the clean end of the input Next returns
// io.EOF; when the input ends inside a block it returns a *FormatError that
// wraps io.ErrUnexpectedEOF; a read error is returned as is. Zero-length
// messages are returned as empty slices. Next does not allocate unless it
// fails.
func (r *Reader) Next() ([]byte, int64, error) {
	// The common case first: the whole block is buffered.
	if b, off, ok := r.frame(); ok {
		return b, off, nil
	}
	return r.next()
}

// frame is Next when the whole block is buffered, and reports whether it
// was (a Source's look-ahead calls it itself). Inlined: no calls.
func (r *Reader) frame() ([]byte, int64, bool) {
	if start := r.start; r.end-start >= 2 {
		n := int(r.buf[start])<<8 | int(r.buf[start+1])
		if end := start + 2 + n; end <= r.end {
			r.start = end
			return r.buf[start+2 : end : end], r.base + int64(start), true
		}
	}
	return nil, 0, false
}

// next is Next when the block is not all buffered: it reads more, or
// reports the end of the input.
func (r *Reader) next() ([]byte, int64, error) {
	if r.end-r.start < 2 {
		r.fill(2)
	}
	off := r.Offset()
	if avail := r.end - r.start; avail < 2 {
		if avail == 0 {
			if r.err == io.EOF {
				return nil, off, io.EOF
			}
			return nil, off, r.err
		}
		return nil, off, r.short(Type(0), 2, avail)
	}
	n := int(r.buf[r.start])<<8 | int(r.buf[r.start+1])
	if r.end-r.start < 2+n {
		r.fill(2 + n)
		if avail := r.end - r.start; avail < 2+n {
			t := Type(0)
			if avail > 2 {
				t = Type(r.buf[r.start+2])
			}
			return nil, off, r.short(t, n, avail-2)
		}
	}
	msg := r.buf[r.start+2 : r.start+2+n : r.start+2+n]
	r.start += 2 + n
	return msg, off, nil
}

func (r *Reader) short(t Type, want, have int) error {
	if r.err != nil && r.err != io.EOF {
		return r.err
	}
	off := r.Offset()
	r.start = r.end // drain: the next call reports the end
	if want == 2 && t == 0 {
		return &FormatError{Offset: off, Field: "length prefix", Len: have, Want: 2,
			Reason: "input ends inside the length prefix", Err: io.ErrUnexpectedEOF}
	}
	return &FormatError{Type: t, Offset: off, Field: "length", Len: have, Want: want,
		Reason: "input ends inside the message", Err: io.ErrUnexpectedEOF}
}

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = [2]byte{0x1f, 0x8b}

// Decompress returns r itself, buffered, when it is plain, or a gzip reader of
// it when it starts with the gzip magic bytes. ITCH messages never start a
// file with 0x1f8b: a length prefix of 8075 bytes is no ITCH message.
func Decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("itch: reading the first bytes: %w", err)
	}
	if len(head) == 2 && head[0] == gzipMagic[0] && head[1] == gzipMagic[1] {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("itch: gzip header: %w", err)
		}
		return gzipStream{zr}, nil
	}
	return br, nil
}

// gzipStream says where a read error comes from: a corrupt or truncated
// gzip stream, not the ITCH framing.
type gzipStream struct{ r io.Reader }

func (g gzipStream) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("itch: gzip stream: %w", err)
	}
	return n, err
}
