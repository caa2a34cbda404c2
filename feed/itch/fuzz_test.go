package itch

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/feed"
)

// FuzzParse: Parse never panics; what it accepts has its type's size, and
// every accessor of its view reads inside it.
func FuzzParse(f *testing.F) {
	for _, typ := range Types() {
		b := make([]byte, Size(typ))
		b[0] = byte(typ)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Add([]byte{'Z'})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			var fe *FormatError
			if err != ErrUnknownType && !errors.As(err, &fe) {
				t.Fatalf("error %v is neither ErrUnknownType nor a *FormatError", err)
			}
			return
		}
		if len(m) != Size(m.Type()) {
			t.Fatalf("accepted %d bytes of %s", len(m), m.Type())
		}
		_ = columns(m)
		_ = vectorFields(m)
		m.Stock()
	})
}

// FuzzSource: any input in NASDAQ's file format, however wrong, ends in
// io.EOF or a *FormatError, never a panic; every instrument is defined
// before its other messages; quotes agree with the books; level deltas
// fit the levels earlier ones described and, at the end of the input,
// describe the books' top 3 levels; the order table never holds more than
// its capacity.
func FuzzSource(f *testing.F) {
	f.Add(steadyStream(3))
	var s stream
	s.add(1, 1, 'B', 100, 10000, "A").add(1, 2, 'S', 100, 10100, "A").replace(1, 1, 1, 50, 10000)
	s.exec(1, 2, 200, 1).cancel(1, 1, 50).del(1, 3).msg(TypeBrokenTrade, 2, uint64(1))
	f.Add(s.b)
	f.Fuzz(func(t *testing.T, in []byte) {
		// Once as a small table is read, once reading ahead as a large
		// one does (the look-ahead reads order events before their turn).
		fuzzSource(t, in, false)
		fuzzSource(t, in, true)
	})
}

// fuzzSource checks one FuzzSource input, reading ahead or not.
func fuzzSource(t *testing.T, in []byte, ahead bool) {
	src, err := NewSource(bytes.NewReader(in), Config{OrderCapacity: 8, Depth: 3, Clock: func() int64 { return 1 }})
	if err != nil {
		// Only gzip input can fail at once (a broken gzip header), and
		// the error must say so.
		if !bytes.HasPrefix(in, []byte{0x1f, 0x8b}) || !strings.Contains(err.Error(), "gzip") {
			t.Fatalf("NewSource: %v", err)
		}
		return
	}
	src.ahead.on, src.ahead.grow = ahead, false
	defined := map[uint32]bool{}
	dm := deltaModel{}
	var m feed.Msg
	for {
		err := src.Next(&m)
		if err == io.EOF {
			var locates []uint16
			for id := range defined {
				locates = append(locates, uint16(id))
			}
			if err := dm.checkLocates(src.Books(), locates, 3); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err != nil {
			var fe *FormatError
			gzipErr := bytes.HasPrefix(in, []byte{0x1f, 0x8b}) && strings.Contains(err.Error(), "itch: gzip stream")
			if !errors.As(err, &fe) && !gzipErr {
				t.Fatalf("error %v is neither a *FormatError nor a named gzip stream error", err)
			}
			break
		}
		if m.Type == feed.TypeDefinition {
			defined[m.Instrument] = true
		} else if !defined[m.Instrument] {
			t.Fatalf("%s before its definition", describe(&m))
		}
		if m.Type == feed.TypeLevelDelta {
			if err := dm.apply(&m); err != nil {
				t.Fatal(err)
			}
		}
		if m.Type == feed.TypeQuote {
			top := src.Books().Top(uint16(m.Instrument))
			if int64(top.BidPrice) != m.Quote.BidPx || top.BidSize != m.Quote.BidSize || int64(top.AskPrice) != m.Quote.AskPx || top.AskSize != m.Quote.AskSize {
				t.Fatalf("quote %s, book %+v", describe(&m), top)
			}
		}
		if n := src.Books().Orders(); n > 8 || n < 0 {
			t.Fatalf("%d orders in a table of 8", n)
		}
	}
}
