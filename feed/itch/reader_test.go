package itch

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// chunkReader returns its input in reads of random sizes, some of them as
// large as the read asks for, so that a Reader's buffer moves at varying
// points and is refilled after a move at once or bit by bit.
type chunkReader struct {
	b   []byte
	rnd *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rnd.IntN(40_000))
	if c.rnd.IntN(4) == 0 {
		n = min(len(p), len(c.b)) // all it can, as a file does
	}
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// framed returns a stream of n framed messages of random lengths, some of
// them the longest a frame holds, each filled with a byte of its own.
func framed(rnd *rand.Rand, n int) []byte {
	var b []byte
	for i := range n {
		size := 1 + rnd.IntN(60)
		if rnd.IntN(200) == 0 {
			size = 65535 - rnd.IntN(100)
		}
		b = append(b, byte(size>>8), byte(size))
		b = append(b, bytes.Repeat([]byte{byte(i)}, size)...)
	}
	return b
}

// TestReaderKeepsMessages: a message the Reader returned keeps its bytes
// until readStable more bytes of input have been read, across the moves of
// its buffers and across Reset, as Source's look-ahead relies on (a
// stableReader). It fails if the unread bytes move within one buffer, or
// if Reset starts again at the front of either.
func TestReaderKeepsMessages(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	type held struct {
		msg, want []byte
		end       int64 // input read when it was returned, across resets
	}
	var window []held
	var read int64 // input read, across resets
	// The first input is read as a file is, each read filling the buffer.
	r := NewReader(bytes.NewReader(framed(rnd, 40_000)))
	checked := 0
	for pass := range 3 {
		if pass > 0 {
			r.Reset(&chunkReader{b: framed(rnd, 40_000), rnd: rnd})
		}
		var prev int64
		// The first two passes end early, with bytes still unread in the
		// buffer, which the next input replaces: two messages after the
		// Reader moved to its other buffer, while messages of the one
		// before are held.
		stop := -1
		moved := &r.buf[0]
		for n := 0; n != stop; n++ {
			msg, _, err := r.Next()
			if err == io.EOF {
				break
			}
			if pass < 2 && stop < 0 && n > 5_000 && &r.buf[0] != moved {
				stop = n + 2
			}
			moved = &r.buf[0]
			if err != nil {
				t.Fatal(err)
			}
			read += r.Offset() - prev
			prev = r.Offset()
			window = append(window, held{msg: msg, want: bytes.Clone(msg), end: read})
			keep := window[:0]
			for _, h := range window {
				if read-h.end >= readStable {
					continue // may be overwritten from now on
				}
				if !bytes.Equal(h.msg, h.want) {
					t.Fatalf("pass %d: a message of %d bytes changed %d bytes of input after it was returned (readStable %d)",
						pass, len(h.want), read-h.end, readStable)
				}
				checked++
				keep = append(keep, h)
			}
			window = keep
		}
	}
	if read < 4*readBufSize {
		t.Fatalf("read only %d bytes: the buffers never moved", read)
	}
	t.Logf("%d bytes read, %d checks of held messages", read, checked)
}
