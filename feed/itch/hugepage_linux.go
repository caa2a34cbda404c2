package itch

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on amd64 and arm64.
const hugePage = 2 << 20

// adviseHuge asks the kernel to back the memory of s (the order table, the
// level arena) with transparent huge pages (madvise MADV_HUGEPAGE on the
// whole 2 MB pages inside it), where the system's setting is "madvise"
// rather than "always". Both are read at random: with 4 KB pages nearly
// every lookup also misses the TLB. It is advice: an error (no THP
// support) changes nothing.
func adviseHuge[T any](s []T) {
	var zero T
	size := uintptr(len(s)) * unsafe.Sizeof(zero)
	if size < 2*hugePage {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	from := (start+hugePage-1)&^(hugePage-1) - start
	to := (start+size)&^(hugePage-1) - start
	if to <= from {
		return
	}
	_ = unix.Madvise(b[from:to], unix.MADV_HUGEPAGE)
}
