package itch

// The prefetches ask the CPU to bring cache lines into its caches without
// waiting for them (PREFETCHT0): unlike a load, a prefetch never holds up
// the instructions after it, and it never faults. Each call prefetches
// several lines: a call to assembly costs about as much as the prefetch.

// prefetchBack prefetches the lines cache lines that end at end (the line
// holding end-1 and the lines-1 before it).
//
//go:noescape
func prefetchBack(end uintptr, lines int)

// prefetchFwd prefetches the lines cache lines from the one holding start
// on.
//
//go:noescape
func prefetchFwd(start uintptr, lines int)
