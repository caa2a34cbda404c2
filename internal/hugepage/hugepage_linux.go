// Package hugepage asks Linux to back large, long-lived buffers with
// transparent huge pages (madvise MADV_HUGEPAGE), where the system's setting
// is "madvise" rather than "always": the ITCH order table and level arena,
// read at random. With 4 KB pages such buffers miss the TLB on a large
// share of their accesses (docs/scale.md, "Look-ahead and huge pages").
package hugepage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Size is the size of a transparent huge page on amd64 and arm64.
const Size = 2 << 20

// Advise asks the kernel to back the whole huge pages inside the memory of
// s with transparent huge pages. A slice smaller than two huge pages is
// left alone. It is advice: an error (no THP support) changes nothing.
func Advise[T any](s []T) {
	var zero T
	size := uintptr(len(s)) * unsafe.Sizeof(zero)
	if size < 2*Size {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	from := (start+Size-1)&^(Size-1) - start
	to := (start+size)&^(Size-1) - start
	if to <= from {
		return
	}
	_ = unix.Madvise(b[from:to], unix.MADV_HUGEPAGE)
}
