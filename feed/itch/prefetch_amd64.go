package itch

// prefetch asks the CPU to bring the cache line at addr into its caches
// without waiting for it (PREFETCHT0): unlike a load, it never holds up the
// instructions after it, and it never faults.
//
//go:noescape
func prefetch(addr uintptr)

// prefetchBack prefetches the lines cache lines that end at end (the line
// holding end-1 and the lines-1 before it), as one call.
//
//go:noescape
func prefetchBack(end uintptr, lines int)
