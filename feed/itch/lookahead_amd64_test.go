package itch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"unsafe"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

// touchReference returns the cache lines (address / 64) touchEvent is to
// prefetch for message b, computed in Go from the Source's books: the
// tableLines lines from the home slot of the reference and of a replace's
// new one, the stock's state's line, and for each side the event may
// change (an add's own; both otherwise) the lines of its last byte and of
// the topLines-1 addresses 64 bytes apart before it that are no lower
// than its start (the table's line for a side without levels).
func touchReference(s *Source, b []byte) map[uintptr]bool {
	lines := map[uintptr]bool{}
	if len(b) == 0 {
		return lines
	}
	t := Type(b[0])
	k := touchKinds[t]
	if k == touchNone || len(b) != Size(t) {
		return lines
	}
	bk := s.books
	addr := func(p unsafe.Pointer) uintptr { return uintptr(p) }
	table := addr(unsafe.Pointer(&bk.slots[bk.home(binary.BigEndian.Uint64(b[11:19]))]))
	for i := range tableLines {
		lines[(table+uintptr(64*i))>>6] = true
	}
	if k == touchReplace {
		table2 := addr(unsafe.Pointer(&bk.slots[bk.home(binary.BigEndian.Uint64(b[19:27]))]))
		for i := range tableLines {
			lines[(table2+uintptr(64*i))>>6] = true
		}
	}
	locate := int(binary.BigEndian.Uint16(b[1:3]))
	if locate < len(s.inst) {
		lines[addr(unsafe.Pointer(&s.inst[locate]))>>6] = true
	}
	if locate >= len(bk.books) {
		return lines
	}
	sides := bk.books[locate].sides[:]
	if k == touchAdd {
		if b[19] == 'B' {
			sides = sides[:1]
		} else {
			sides = sides[1:]
		}
	}
	for _, side := range sides {
		if len(side) == 0 {
			lines[table>>6] = true
			continue
		}
		start := addr(unsafe.Pointer(&side[0]))
		end := start + uintptr(len(side))*unsafe.Sizeof(Level{})
		for i := range topLines {
			if a := end - 1 - uintptr(64*i); a >= start {
				lines[a>>6] = true
			}
		}
	}
	return lines
}

// touchCount returns how many prefetches touchEvent makes for message b:
// tableLines for each reference, one for a stock's state, topLines for
// each side of a stock's book (a side it need not read gets the table's
// line again), none for a message that is no order event or has the
// wrong length.
func touchCount(s *Source, b []byte) int {
	if len(b) == 0 || touchKinds[b[0]] == touchNone || len(b) != Size(Type(b[0])) {
		return 0
	}
	n := tableLines
	if touchKinds[b[0]] == touchReplace {
		n += tableLines
	}
	locate := int(binary.BigEndian.Uint16(b[1:3]))
	if locate < len(s.inst) {
		n++
	}
	if locate < len(s.books.books) {
		n += 2 * topLines
	}
	return n
}

// bookReference returns the cache lines touchEvent is to prefetch for
// message b just read: those of its stock's entry in the books, for an
// order event of its type's length whose stock has a book.
func bookReference(s *Source, b []byte) map[uintptr]bool {
	lines := map[uintptr]bool{}
	if bookCount(s, b) == 0 {
		return lines
	}
	start := uintptr(unsafe.Pointer(&s.books.books[binary.BigEndian.Uint16(b[1:3])]))
	lines[start>>6] = true
	lines[(start+unsafe.Sizeof(book{})-1)>>6] = true
	return lines
}

// bookCount returns how many prefetches touchEvent makes for message b
// just read: bookLines for an order event of its type's length whose
// stock has a book, none otherwise.
func bookCount(s *Source, b []byte) int {
	if len(b) == 0 || touchKinds[b[0]] == touchNone || len(b) != Size(Type(b[0])) ||
		int(binary.BigEndian.Uint16(b[1:3])) >= len(s.books.books) {
		return 0
	}
	return bookLines
}

// TestTouchLines: the assembly's cache lines (touchLines, touchEvent's
// body storing the addresses instead of prefetching them) are those
// touchReference and bookReference compute from the books, for every
// message of a generated day read after its books have filled, each
// touched as the event eventAhead before its turn beside another message
// just read (or alone, or with none), with a large order
// table and a small one (whose hash keeps longer runs of references
// together), for messages of stocks at and past the ends of the books and
// the states, and for messages too short for their type.
func TestTouchLines(t *testing.T) {
	day := genDay(t, itchgen.Config{Seed: 5, Stocks: 400, Orders: 30_000, Messages: 200_000})
	for _, capacity := range []int{0, 40_000} {
		src, err := NewSource(bytes.NewReader(day), Config{Depth: 10, OrderCapacity: capacity, Clock: func() int64 { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		var m feed.Msg
		for src.Stats().Messages < 150_000 {
			if err := src.Next(&m); err != nil {
				t.Fatal(err)
			}
		}
		checkTouchLines(t, src, day[src.Offset():])
	}
}

// checkTouchLines runs TestTouchLines' checks on the messages of rest,
// and on altered copies of some of them, with src's books.
func checkTouchLines(t *testing.T, src *Source, rest []byte) {
	t.Helper()
	msgs := readAll(t, bytes.NewReader(rest))
	kinds := map[uint8]int{}
	for _, b := range msgs {
		kinds[touchKinds[b[0]]]++
	}
	if kinds[touchAdd] < 1000 || kinds[touchOrder] < 1000 || kinds[touchReplace] < 100 {
		t.Fatalf("too few order events of each kind: %v", kinds)
	}
	// Stocks at the ends of the books and the states, and past them.
	var locates []uint16
	for _, n := range []int{len(src.inst), len(src.books.books)} {
		locates = append(locates, uint16(n-1), uint16(n), uint16(n+1))
	}
	locates = append(locates, 65000)
	for _, b := range msgs[:200] {
		if touchKinds[b[0]] == touchNone {
			continue
		}
		for _, locate := range locates {
			far := append([]byte(nil), b...)
			binary.BigEndian.PutUint16(far[1:3], locate)
			msgs = append(msgs, far)
		}
		msgs = append(msgs, b[:len(b)-1], b[:1])
	}
	msgs = append(msgs, []byte{})
	const unset = ^uintptr(0)
	ptr := func(b []byte) *byte {
		if len(b) == 0 {
			return nil
		}
		return &b[0]
	}
	for i, b := range msgs {
		// The message just read: eventAhead further on, or none.
		var read []byte
		switch {
		case i%7 == 3:
		case i%7 == 5:
			read, b = b, nil
		default:
			read = msgs[(i+eventAhead)%len(msgs)]
		}
		var out [touchMax + 1]uintptr
		for j := range out {
			out[j] = unset
		}
		touchLines(src, ptr(b), len(b), ptr(read), len(read), (*[touchMax]uintptr)(out[:touchMax]))
		if out[touchMax] != unset {
			t.Fatalf("message %d: more than %d lines", i, touchMax)
		}
		got := map[uintptr]bool{}
		n := 0
		for _, a := range out {
			if a != unset {
				got[a>>6] = true
				n++
			}
		}
		what := fmt.Sprintf("message %d (%q, %d bytes; %q, %d bytes just read)", i, b[:min(1, len(b))], len(b), read[:min(1, len(read))], len(read))
		if wantN := touchCount(src, b) + bookCount(src, read); n != wantN {
			t.Fatalf("%s: %d prefetches, want %d", what, n, wantN)
		}
		want := touchReference(src, b)
		for l := range bookReference(src, read) {
			want[l] = true
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines, want %d", what, len(got), len(want))
		}
		for l := range want {
			if !got[l] {
				t.Fatalf("%s: line %#x not prefetched", what, l<<6)
			}
		}
	}
}
