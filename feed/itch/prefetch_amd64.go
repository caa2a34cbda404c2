package itch

// The prefetches ask the CPU to bring cache lines into its caches without
// waiting for them (PREFETCHT0): unlike a load, a prefetch never holds up
// the instructions after it, and it never faults. One call prefetches all
// an order event needs: a call to assembly costs about as much as the
// prefetches.

// prefetchEvent prefetches tableLines cache lines from the one holding
// table on, as many from table2 unless it is 0, the bidLines lines (at
// most topLines) that end at bidEnd (the line holding bidEnd-1 and the
// ones before it), and the askLines lines that end at askEnd. It is
// written for tableLines 3 and topLines 4 (TestPrefetchConstants).
//
//go:noescape
func prefetchEvent(table, table2, bidEnd uintptr, bidLines int, askEnd uintptr, askLines int, inst uintptr)
