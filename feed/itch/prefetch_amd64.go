package itch

// The prefetches ask the CPU to bring cache lines into its caches without
// waiting for them (PREFETCHT0): unlike a load, a prefetch never holds up
// the instructions after it, and it never faults. One call to assembly
// does all of touch: it costs fewer instructions than Go code computing
// the addresses and then calling assembly for the prefetches.

// touchEvent is Source.touch's assembly. For the message of m bytes at q,
// just read, it prefetches the lines of its stock's entry in Books.books
// (bookLines), which holds where the stock's sides are. For the message
// of n bytes at p, read eventAhead messages before q, whose entry was
// prefetched when it was read, it prefetches tableLines cache lines from
// the home slot of its reference, as many from a replace's new
// reference's, the line of the stock's state (instrument), and topLines
// lines that end each side of the stock's book the event may change (an
// add's own side; both for an event whose side is its order's). Either
// message may be missing (n or m 0). It reads the Source's fields at their
// offsets (go_asm.h), and is written for tableLines 2, topLines 4 and the
// sizes of slot, Level, book and instrument that TestPrefetchConstants
// checks.
//
//go:noescape
func touchEvent(s *Source, p *byte, n int, q *byte, m int)

// bookLines is how many prefetches touchEvent makes for a stock's entry in
// Books.books (48 bytes: one line or two).
const bookLines = 2

// touchMax is the most cache lines touchEvent prefetches for two messages.
const touchMax = bookLines + 1 + 2*tableLines + 2*topLines

// touchLines is touchEvent storing the addresses it would prefetch in out,
// in order, instead of prefetching them (the rest of out is left alone):
// for TestTouchLines.
//
//go:noescape
func touchLines(s *Source, p *byte, n int, q *byte, m int, out *[touchMax]uintptr)
