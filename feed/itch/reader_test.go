package itch

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
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
	r := NewReader(&chunkReader{b: framed(rnd, 40_000), rnd: rnd})
	checked := 0
	for pass := range 3 {
		if pass > 0 {
			r.Reset(&chunkReader{b: framed(rnd, 40_000), rnd: rnd})
		}
		var prev int64
		for {
			msg, _, err := r.Next()
			if err == io.EOF {
				break
			}
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

// hidingReader is a MessageReader that hides its Reader's stableBytes, so
// that a Source reads ahead of it by copying.
type hidingReader struct{ r *Reader }

func (h hidingReader) Next() ([]byte, int64, error) { return h.r.Next() }
func (h hidingReader) Offset() int64                { return h.r.Offset() }

// TestLookAheadWithoutCopies: a Source reading ahead of a Reader without
// copying its messages normalizes a generated day exactly as one that
// copies them, and as one that does not read ahead.
func TestLookAheadWithoutCopies(t *testing.T) {
	g, err := itchgen.New(itchgen.Config{Seed: 3, Stocks: 300, Orders: 20_000, Messages: 300_000})
	if err != nil {
		t.Fatal(err)
	}
	day, _ := g.AppendFile(nil, 300_000)
	run := func(mode string) []feed.Msg {
		var r MessageReader = NewReader(bytes.NewReader(day))
		if mode == "copy" {
			r = hidingReader{NewReader(bytes.NewReader(day))}
		}
		src, err := NewMessageSource(r, Config{Depth: 10, Clock: func() int64 { return 7 }})
		if err != nil {
			t.Fatal(err)
		}
		if src.ahead.stable != (mode == "stable") && mode != "off" {
			t.Fatalf("%s: stable look-ahead %v", mode, src.ahead.stable)
		}
		if mode == "off" {
			src.ahead.on = false
		} else if !src.ahead.on {
			t.Fatalf("%s: the default order table does not read ahead", mode)
		}
		var out []feed.Msg
		var m feed.Msg
		for {
			if err := src.Next(&m); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			out = append(out, normalizedOnly(m))
		}
		return out
	}
	stable, copied, off := run("stable"), run("copy"), run("off")
	if len(stable) < 300_000 {
		t.Fatalf("%d normalized messages from 300,000 ITCH messages", len(stable))
	}
	for name, other := range map[string][]feed.Msg{"copying": copied, "not reading ahead": off} {
		if len(other) != len(stable) {
			t.Fatalf("%d messages without copies, %d %s", len(stable), len(other), name)
		}
		for i := range stable {
			if stable[i] != other[i] {
				t.Fatalf("message %d: %+v without copies, %+v %s", i, stable[i], other[i], name)
			}
		}
	}
}

// normalizedOnly returns m with the bodies of other types than its own
// zeroed: Next leaves what earlier messages put there.
func normalizedOnly(m feed.Msg) feed.Msg {
	out := feed.Msg{Header: m.Header}
	switch m.Type {
	case feed.TypeDefinition:
		out.Def = m.Def
	case feed.TypeQuote:
		out.Quote = m.Quote
	case feed.TypeTrade:
		out.Trade = m.Trade
	case feed.TypeTradeBust:
		out.Bust = m.Bust
	case feed.TypeStatus:
		out.Status = m.Status
	case feed.TypeLevelDelta:
		out.Delta = m.Delta
	}
	return out
}

// TestPrefetchConstants: prefetchEvent's assembly is straight-line code
// for three table lines and four lines a side; changing the constants
// means changing it too.
func TestPrefetchConstants(t *testing.T) {
	if tableLines != 3 || topLines != 4 {
		t.Fatalf("tableLines %d, topLines %d: prefetch_amd64.s prefetches 3 and 4", tableLines, topLines)
	}
}
