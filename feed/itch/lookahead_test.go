package itch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"unsafe"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

// hidingReader is a MessageReader that hides its Reader's stableBytes, so
// that a Source reads ahead of it by copying.
type hidingReader struct{ r *Reader }

func (h hidingReader) Next() ([]byte, int64, error) { return h.r.Next() }
func (h hidingReader) Offset() int64                { return h.r.Offset() }

// stableOnly is a MessageReader that shows its Reader's stableBytes but
// not its framing, so that a Source reads ahead of it without copies,
// calling Next for every message.
type stableOnly struct{ hidingReader }

func (r stableOnly) stableBytes() int { return r.r.stableBytes() }

// TestLookAheadWithoutCopies: a Source reading ahead of a Reader by
// framing its messages in place normalizes a generated day exactly as one
// that calls Next for each without copying it, as one that copies them,
// and as one that does not read ahead; and reports a bad message after
// them at the same offset.
func TestLookAheadWithoutCopies(t *testing.T) {
	day := genDay(t, itchgen.Config{Seed: 3, Stocks: 300, Orders: 20_000, Messages: 300_000})
	bad := int64(len(day))
	day = append(day, 0, 3, byte(TypeAddOrder), 0, 1) // an add of 3 bytes
	run := func(mode string) ([]feed.Msg, error) {
		var r MessageReader = NewReader(bytes.NewReader(day))
		switch mode {
		case "copy":
			r = hidingReader{NewReader(bytes.NewReader(day))}
		case "stable":
			r = stableOnly{hidingReader{NewReader(bytes.NewReader(day))}}
		}
		src, err := NewMessageSource(r, Config{Depth: 10, Clock: func() int64 { return 7 }})
		if err != nil {
			t.Fatal(err)
		}
		if src.ahead.stable != (mode != "copy") || (src.ahead.frames != nil) != (mode == "framed" || mode == "off") {
			t.Fatalf("%s: stable look-ahead %v, framed %v", mode, src.ahead.stable, src.ahead.frames != nil)
		}
		if mode == "off" {
			src.ahead.on, src.ahead.grow = false, false
		} else if !src.ahead.on {
			t.Fatalf("%s: the default order table does not read ahead", mode)
		}
		var out []feed.Msg
		var m feed.Msg
		for {
			if err := src.Next(&m); err != nil {
				return out, err
			}
			out = append(out, normalizedOnly(m))
		}
	}
	framed, ferr := run("framed")
	if len(framed) < 300_000 {
		t.Fatalf("%d normalized messages from 300,000 ITCH messages", len(framed))
	}
	var fe *FormatError
	if !errors.As(ferr, &fe) || fe.Offset != bad {
		t.Fatalf("the bad message at offset %d: %v", bad, ferr)
	}
	for _, mode := range []string{"stable", "copy", "off"} {
		other, err := run(mode)
		if len(other) != len(framed) {
			t.Fatalf("%d messages framed in place, %d %s", len(framed), len(other), mode)
		}
		for i := range framed {
			if framed[i] != other[i] {
				t.Fatalf("message %d: %+v framed in place, %+v %s", i, framed[i], other[i], mode)
			}
		}
		if err == nil || err.Error() != ferr.Error() {
			t.Fatalf("framed in place: %v; %s: %v", ferr, mode, err)
		}
	}
}

// countingReader embeds a Reader and overrides its Next, counting the
// calls: a wrapper of another package could do the same.
type countingReader struct {
	*Reader
	calls int
}

func (r *countingReader) Next() ([]byte, int64, error) {
	r.calls++
	return r.Reader.Next()
}

// TestLookAheadCallsOverriddenNext: a reader that embeds a Reader and
// overrides Next is not framed in place (its Next would be skipped): the
// look-ahead calls its Next for every message.
func TestLookAheadCallsOverriddenNext(t *testing.T) {
	day := genDay(t, itchgen.Config{Seed: 6, Stocks: 50, Orders: 2_000, Messages: 20_000})
	r := &countingReader{Reader: NewReader(bytes.NewReader(day))}
	src, err := NewMessageSource(r, Config{Depth: 10, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if !src.ahead.on || src.ahead.frames != nil {
		t.Fatalf("reading ahead %v, framing in place %v", src.ahead.on, src.ahead.frames != nil)
	}
	var m feed.Msg
	for src.Next(&m) == nil {
	}
	if n := src.Stats().Messages; n != 20_000 || r.calls < int(n) {
		t.Fatalf("%d messages normalized, Next called %d times", n, r.calls)
	}
}

// TestLookAheadLongMessage: a message too long for a slot (of an unknown
// type, which no ITCH 5.0 message is), in the middle of a generated day
// framed in place, stops the reading ahead until it is handled, and the
// day normalizes as it does without the look-ahead.
func TestLookAheadLongMessage(t *testing.T) {
	day := genDay(t, itchgen.Config{Seed: 7, Stocks: 100, Orders: 5_000, Messages: 40_000})
	msgs := readAll(t, bytes.NewReader(day))
	long := make([]byte, 2*aheadSlot)
	long[0] = 'z'
	var in []byte
	for i, m := range msgs {
		if i == 20_000 {
			in = append(in, 0, byte(len(long)))
			in = append(in, long...)
		}
		in = append(in, byte(len(m)>>8), byte(len(m)))
		in = append(in, m...)
	}
	held := false // the reading ahead was seen stopped at the long message
	run := func(ahead bool) ([]feed.Msg, *Source) {
		src, err := NewSource(bytes.NewReader(in), Config{Depth: 10, Clock: func() int64 { return 7 }})
		if err != nil {
			t.Fatal(err)
		}
		if !src.ahead.on || src.ahead.frames == nil {
			t.Fatalf("reading ahead %v, framing in place %v", src.ahead.on, src.ahead.frames != nil)
		}
		if !ahead {
			src.ahead.on, src.ahead.grow = false, false
		}
		return normalizeAll(t, src, func() { held = held || src.ahead.bigHeld }), src
	}
	framed, src := run(true)
	if !held {
		t.Fatal("the look-ahead read past the long message")
	}
	off, _ := run(false)
	if st := src.Stats(); st.SkippedTypes['z'] != 1 || st.Messages != 40_001 {
		t.Fatalf("%d messages, %d of type 'z' skipped; want 40,001 and 1", st.Messages, st.SkippedTypes['z'])
	}
	if len(framed) != len(off) {
		t.Fatalf("%d messages framed in place, %d without look-ahead", len(framed), len(off))
	}
	for i := range framed {
		if framed[i] != off[i] {
			t.Fatalf("message %d: %+v framed in place, %+v without look-ahead", i, framed[i], off[i])
		}
	}
}

// normalizeAll returns the messages src normalizes until io.EOF
// (normalizedOnly), calling after, if set, after each; any other error
// fails the test.
func normalizeAll(t *testing.T, src *Source, after func()) []feed.Msg {
	t.Helper()
	var out []feed.Msg
	var m feed.Msg
	for {
		if err := src.Next(&m); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, normalizedOnly(m))
		if after != nil {
			after()
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

// TestPrefetchConstants: touchEvent's assembly is straight-line code for
// two table lines and four lines a side, and scales indexes by the sizes
// of a slot (16), a Level (16), a book (48) and an instrument (40):
// changing any of them means changing it too.
func TestPrefetchConstants(t *testing.T) {
	if tableLines != 2 || topLines != 4 {
		t.Fatalf("tableLines %d, topLines %d: touch_amd64.h prefetches 2 and 4", tableLines, topLines)
	}
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"slot", unsafe.Sizeof(slot{}), 16},
		{"Level", unsafe.Sizeof(Level{}), 16},
		{"book", unsafe.Sizeof(book{}), 48},
		{"instrument", unsafe.Sizeof(instrument{}), 40},
	}
	for _, sz := range sizes {
		if sz.got != sz.want {
			t.Errorf("%s is %d bytes: touch_amd64.h scales by %d", sz.name, sz.got, sz.want)
		}
	}
}

// TestLookAheadWhenBooksGrow: a Source whose order table is too small to
// read ahead from the start begins to once its books hold lookAheadLevels
// levels (many stocks), and normalizes exactly as one that never does.
func TestLookAheadWhenBooksGrow(t *testing.T) {
	const stocks, n = 2500, 200_000
	day := genDay(t, itchgen.Config{Seed: 4, Stocks: stocks, Orders: 20_000, Messages: n})
	run := func(never bool) ([]feed.Msg, *Source) {
		src, err := NewSource(bytes.NewReader(day), Config{OrderCapacity: 40_000, Depth: 10, Clock: func() int64 { return 7 }})
		if err != nil {
			t.Fatal(err)
		}
		if src.ahead.on || !src.ahead.grow {
			t.Fatalf("a table of %d slots reads ahead from the start (on %v, grow %v)", len(src.books.slots), src.ahead.on, src.ahead.grow)
		}
		if never {
			src.ahead.grow = false
		}
		return normalizeAll(t, src, nil), src
	}
	grown, src := run(false)
	if !src.ahead.on {
		t.Fatalf("%d levels in the books (threshold %d), and not reading ahead", src.books.levels.used, lookAheadLevels)
	}
	never, _ := run(true)
	if len(grown) != len(never) {
		t.Fatalf("%d messages reading ahead once the books grew, %d never reading ahead", len(grown), len(never))
	}
	for i := range grown {
		if grown[i] != never[i] {
			t.Fatalf("message %d: %+v reading ahead once the books grew, %+v never", i, grown[i], never[i])
		}
	}
}

// liveReader is a MessageReader of a live feed: its messages arrive in
// batches (arrive), and a Next with none held would wait for the network
// (counted in waits) before it returns feed.ErrIdle. It is a
// pendingReader.
type liveReader struct {
	held  [][]byte
	waits int
	off   int64
}

func (r *liveReader) arrive(msgs ...[]byte) { r.held = append(r.held, msgs...) }

func (r *liveReader) Next() ([]byte, int64, error) {
	if len(r.held) == 0 {
		r.waits++
		return nil, r.off, feed.ErrIdle
	}
	m := r.held[0]
	r.held = r.held[1:]
	r.off++
	return m, r.off - 1, nil
}

func (r *liveReader) Offset() int64 { return r.off }
func (r *liveReader) Pending() bool { return len(r.held) > 0 }

// TestLookAheadDoesNotWait: reading ahead of a live feed takes only the
// messages that have arrived; the first of them is normalized without a
// wait for more (which would cost a live feed its idle wait, 10 ms by
// default, on every message of a quiet market).
func TestLookAheadDoesNotWait(t *testing.T) {
	var s stream
	s.sys('O')
	s.dir(1, "AAPL", 'Q', 100)
	s.add(1, 1, 'B', 100, 1500000, "AAPL")
	s.add(1, 2, 'S', 100, 1510000, "AAPL")
	msgs := readAll(t, bytes.NewReader(s.b))
	r := &liveReader{}
	src, err := NewMessageSource(r, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !src.ahead.on {
		t.Fatal("the default order table does not read ahead: the test tests nothing")
	}
	r.arrive(msgs[:3]...) // the system event, the directory and the first add
	var m feed.Msg
	got := 0
	for {
		err := src.Next(&m)
		if err == feed.ErrIdle {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if got++; r.waits != 0 {
			t.Fatalf("normalized message %d (%s) came after %d waits for more input", got, m.Type, r.waits)
		}
	}
	if got == 0 || r.waits != 1 {
		t.Fatalf("%d messages normalized, %d waits; want some, then 1 wait once all were handled", got, r.waits)
	}
	r.arrive(msgs[3])
	if err := src.Next(&m); err != nil || m.Type != feed.TypeQuote || r.waits != 1 {
		t.Fatalf("the second add: %v, %s, %d waits; want its quote at once", err, m.Type, r.waits)
	}
}

// TestLookAheadTouchesEveryEvent: every message read ahead has its event
// touched once, in order, before it is handled: eventAhead messages before
// the message read beside it while the ring stays full, and at once when
// the reading ahead stops short of a full ring (a live feed that has
// nothing more yet, the end of the input). Every message read has its
// book entry touched once, in order (traceTouch sees each touchEvent
// call). After every Next, the touched messages are the oldest, all those
// within eventAhead of their turn, and all of them in a ring not full.
// Read framed in place, with copies, and as a live feed arriving in
// bursts.
func TestLookAheadTouchesEveryEvent(t *testing.T) {
	day := genDay(t, itchgen.Config{Seed: 4, Stocks: 200, Orders: 5_000, Messages: 60_000})
	all := readAll(t, bytes.NewReader(day))
	defer func() { traceTouch = nil }()
	for _, mode := range []string{"framed", "copy", "live"} {
		var r MessageReader = NewReader(bytes.NewReader(day))
		var live *liveReader
		msgs := all
		switch mode {
		case "copy":
			r = hidingReader{NewReader(bytes.NewReader(day))}
		case "live":
			live = &liveReader{}
			r = live
		}
		src, err := NewMessageSource(r, Config{Depth: 10, Clock: func() int64 { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		if !src.ahead.on {
			t.Fatalf("%s: the default order table does not read ahead", mode)
		}
		// The messages read and those whose events were touched, by
		// their index in the day.
		reads, events, paired := 0, 0, 0
		var bad string
		traceTouch = func(event, read []byte) {
			if bad != "" {
				return
			}
			if read != nil {
				if reads >= len(all) || !bytes.Equal(read, all[reads]) {
					bad = fmt.Sprintf("message %d read is not the day's", reads)
					return
				}
				reads++
			}
			if event != nil {
				handled := int(src.Stats().Messages)
				switch {
				case events >= reads || !bytes.Equal(event, all[events]):
					bad = fmt.Sprintf("event %d touched is not the day's message %d, or not read yet (%d read)", events, events, reads)
				case events < handled:
					bad = fmt.Sprintf("event %d touched after %d messages were handled", events, handled)
				case read != nil && reads-1-events != eventAhead:
					bad = fmt.Sprintf("event %d touched beside message %d read, want %d after it", events, reads-1, eventAhead)
				}
				if read != nil {
					paired++
				}
				events++
			}
		}
		a := &src.ahead
		full := 0
		var m feed.Msg
		for i := 0; ; i++ {
			if live != nil && len(live.held) == 0 && len(msgs) > 0 {
				n := min(1+i%23, len(msgs)) // bursts of 1 to 23 messages
				live.arrive(msgs[:n]...)
				msgs = msgs[n:]
			}
			err := src.Next(&m)
			if err == io.EOF || (err == feed.ErrIdle && len(msgs) == 0) {
				break
			}
			if err != nil && err != feed.ErrIdle {
				t.Fatalf("%s: %v", mode, err)
			}
			if bad != "" {
				t.Fatalf("%s, Next call %d: %s", mode, i+1, bad)
			}
			if a.touched > a.size || a.touched < a.size-eventAhead || (a.size < lookAhead-1 && a.touched != a.size) {
				t.Fatalf("%s, after %d Next calls: %d of %d messages read ahead touched", mode, i+1, a.touched, a.size)
			}
			if a.size == lookAhead-1 {
				full++
				if mode == "framed" && a.touched != lookAhead-1-eventAhead {
					t.Fatalf("%s, after %d Next calls: %d of a full ring touched, want %d (Next's common case)", mode, i+1, a.touched, lookAhead-1-eventAhead)
				}
			}
		}
		if reads != len(all) || events != len(all) {
			t.Fatalf("%s: %d messages in the day, %d read, %d events touched", mode, len(all), reads, events)
		}
		if mode != "live" && (full < 50_000 || paired < 50_000) {
			t.Fatalf("%s: the ring was full after only %d Next calls, and %d events touched beside a message read", mode, full, paired)
		}
		t.Logf("%s: the ring full after %d Next calls; %d of %d events touched beside a message read", mode, full, paired, events)
	}
}
