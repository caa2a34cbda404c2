package ud

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestRingPrefaulted: every page of a new ring's slot memory is resident
// (mincore) before anything is received, so the ring's first lap takes no
// page faults on the receive path.
func TestRingPrefaulted(t *testing.T) {
	const slots, size = 2048, 1500
	r, err := NewRing(slots, size)
	if err != nil {
		t.Fatal(err)
	}
	p0 := unsafe.Pointer(unsafe.SliceData(r.slots[0].Buf))
	page := uintptr(unix.Getpagesize())
	off := uintptr(p0) & (page - 1) // a large allocation starts on a page: 0
	length := uintptr(slots*size) + off
	n := int((length + page - 1) / page)
	mem := unsafe.Slice((*byte)(unsafe.Add(p0, -int(off))), n*int(page))
	vec := make([]byte, n)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Skipf("mincore: %v (cannot tell which pages are resident here)", errno)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing != 0 {
		t.Errorf("%d of the ring's %d pages are not resident", missing, n)
	}
}
