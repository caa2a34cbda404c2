package itch

import (
	"math/bits"
	"unsafe"

	"github.com/tickcast/tickcast/internal/hugepage"
)

// levelClasses is the number of block sizes a levelArena hands out:
// initialLevels (32) levels, doubling up to 32<<15 (1,048,576).
const levelClasses = 16

// levelArena holds the levels of every book's sides in one allocation made
// with the Books, so that a side growing past its widest so far takes a
// block from it instead of allocating: after the order table, the levels
// are the other memory that grows with the day, and they are bounded by it
// (each level holds at least one live order).
//
// Blocks are powers of two from initialLevels levels. A side that grows
// gets a block twice its size and hands its old one back; returned blocks
// are kept on a free list per size, linked through their first level, and
// handed out again before the arena's untouched rest. Only when the arena
// is used up is a block allocated (counted in Allocated); the Go runtime
// frees such blocks as usual.
type levelArena struct {
	mem  []Level
	used int
	// free holds each size's first free block, as its offset in mem plus
	// one (0: none); a free block's first level's Orders holds the next.
	free      [levelClasses]uint32
	allocated uint64
}

// newLevelArena returns an arena of n levels.
func newLevelArena(n int) levelArena {
	mem := make([]Level, n)
	hugepage.Advise(mem)
	return levelArena{mem: mem}
}

// sizeClass returns the class of a block of n levels, a power of two of at
// least initialLevels, or -1 beyond the classes.
func sizeClass(n int) int {
	c := bits.Len(uint(n)) - bits.Len(uint(initialLevels))
	if c >= levelClasses {
		return -1
	}
	return c
}

// get returns an empty side with room for n levels, n a power of two of at
// least initialLevels.
func (a *levelArena) get(n int) []Level {
	if c := sizeClass(n); c >= 0 {
		if h := a.free[c]; h != 0 {
			off := int(h - 1)
			a.free[c] = a.mem[off].Orders
			return a.mem[off : off : off+n]
		}
		if a.used+n <= len(a.mem) && uint64(a.used+n) < 1<<32-1 {
			off := a.used
			a.used += n
			return a.mem[off : off : off+n]
		}
	}
	a.allocated++
	return make([]Level, 0, n)
}

// put takes back a side's block that get handed out. A block allocated
// outside the arena is left to the garbage collector.
func (a *levelArena) put(side []Level) {
	n := cap(side)
	c := sizeClass(n)
	if c < 0 || len(a.mem) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(a.mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(side[:1])))
	if p < base || p >= base+uintptr(len(a.mem))*unsafe.Sizeof(Level{}) {
		return
	}
	off := int((p - base) / unsafe.Sizeof(Level{}))
	a.mem[off].Orders = a.free[c]
	a.free[c] = uint32(off + 1)
}

// grow gives a full side twice the room, keeping its levels.
func (a *levelArena) grow(side *[]Level) {
	nb := a.get(2 * cap(*side))
	nb = append(nb, *side...)
	a.put(*side)
	*side = nb
}
