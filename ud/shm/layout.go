package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ring file's layout (every integer in the host's byte order: the file
// never leaves the host). See the package doc for the protocol.
const (
	magic   = "TCSHMRNG"
	version = 2

	headerSize = 4096 // the header page; slots follow it

	// Header fields written once by the writer before the file is renamed
	// into place.
	offMagic       = 0  // [8]byte
	offVersion     = 8  // uint32
	offHeaderSize  = 12 // uint32
	offSlotCount   = 16 // uint32
	offSlotStride  = 20 // uint32
	offMaxDatagram = 24 // uint32
	offWriterPID   = 28 // uint32
	offGeneration  = 32 // uint64
	offSessionSeq  = 40 // uint32, seqlock of the session: odd while written
	offSession     = 44 // [10]byte, the session of the latest packet

	// The writer's cache line: the packets published and the futex word.
	offPos   = 64 // uint64: packets published (the next packet's index)
	offFutex = 72 // uint32: the low 32 bits of pos, stored after it
	offFlags = 76 // uint32: flagClosed

	// The readers' cache line: one bit per registered waiter that is
	// about to sleep or sleeps on the futex. The writer loads it after
	// publishing, and wakes the futex only when it is not zero.
	offSleeping = 128 // uint64
	// The highest position a reader armed at: the writer's position it
	// found, with nothing past its own, before it slept. The writer
	// compares it with the position of its last wake (see publish).
	offArmed = 136 // uint64
	// The waiter table: waiter slot k holds the pid of the process whose
	// reader owns bit k of the sleeping mask, or 0.
	offWaiters = 192 // [maxWaiters]uint32
	maxWaiters = 64

	// A slot: a sequence word, the packet's length, the packet.
	slotSeq     = 0  // uint64: 2i+1 while packet i is written, 2i+2 once written
	slotLen     = 8  // uint32
	slotPayload = 16 // the packet's bytes

	flagClosed = 1
)

// slotStride is the size of a slot carrying packets up to maxDatagram
// bytes, a whole number of cache lines.
func slotStride(maxDatagram int) int { return (slotPayload + maxDatagram + 63) &^ 63 }

// fileSize is the size of a ring file.
func fileSize(slots, stride int) int64 { return headerSize + int64(slots)*int64(stride) }

// ring is a mapped ring file: the writer's mapping (read-write) or a
// reader's (the slots read-only; the header read-write only for a reader
// that waits on the futex).
type ring struct {
	mem    []byte // the whole file, as mapped
	hdr    []byte // the header page, writable; nil for a reader that only spins
	slots  []byte // mem[headerSize:]
	count  uint64 // slots, a power of two
	mask   uint64
	stride uint64
	maxDg  int
	gen    uint64
	pid    int

	pos      *atomic.Uint64
	futex    *atomic.Uint32
	flags    *atomic.Uint32
	sleeping *atomic.Uint64 // nil for a reader without a writable header
	armed    *atomic.Uint64 // as sleeping
	sessSeq  *atomic.Uint32
}

func u32(b []byte, off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&b[off])) }
func u64(b []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }

// errBadRing is wrapped by the errors of a file that is not a ring this
// version reads.
var errBadRing = errors.New("not a tickcast shared-memory ring")

// parseHeader checks a ring file's header against its size and returns its
// geometry.
func parseHeader(h []byte, size int64) (count, stride, maxDg int, err error) {
	if len(h) < headerSize || string(h[offMagic:offMagic+8]) != magic {
		return 0, 0, 0, fmt.Errorf("%w (bad magic)", errBadRing)
	}
	ne := binary.NativeEndian
	if v := ne.Uint32(h[offVersion:]); v != version {
		return 0, 0, 0, fmt.Errorf("%w of version %d (this reader reads version %d)", errBadRing, v, version)
	}
	if hs := ne.Uint32(h[offHeaderSize:]); hs != headerSize {
		return 0, 0, 0, fmt.Errorf("%w (header of %d bytes)", errBadRing, hs)
	}
	count = int(ne.Uint32(h[offSlotCount:]))
	stride = int(ne.Uint32(h[offSlotStride:]))
	maxDg = int(ne.Uint32(h[offMaxDatagram:]))
	if count < 1 || count&(count-1) != 0 || count > MaxSlots || maxDg < 1 || maxDg > MaxDatagramLimit || stride != slotStride(maxDg) {
		return 0, 0, 0, fmt.Errorf("%w (geometry %d slots of %d bytes for %d-byte packets)", errBadRing, count, stride, maxDg)
	}
	if want := fileSize(count, stride); size < want {
		return 0, 0, 0, fmt.Errorf("%w (%d bytes, its header needs %d)", errBadRing, size, want)
	}
	return count, stride, maxDg, nil
}

// newRing sets up the views of a mapped ring file; hdr is a writable
// mapping of its header page, or nil.
func newRing(mem, hdr []byte, count, stride, maxDg int) *ring {
	ctl := mem
	if hdr != nil {
		ctl = hdr
	}
	r := &ring{
		mem:     mem,
		hdr:     hdr,
		slots:   mem[headerSize:],
		count:   uint64(count),
		mask:    uint64(count - 1),
		stride:  uint64(stride),
		maxDg:   maxDg,
		gen:     binary.NativeEndian.Uint64(mem[offGeneration:]),
		pid:     int(binary.NativeEndian.Uint32(mem[offWriterPID:])),
		pos:     u64(ctl, offPos),
		futex:   u32(ctl, offFutex),
		flags:   u32(ctl, offFlags),
		sessSeq: u32(ctl, offSessionSeq),
	}
	if hdr != nil {
		r.sleeping = u64(hdr, offSleeping)
		r.armed = u64(hdr, offArmed)
	}
	return r
}

// arm registers a reader that is about to sleep, owner of bit in the
// sleeping mask and with every packet before next taken: it sets the bit
// and, if the writer has published nothing past next, raises armed to next
// and checks the position once more. It reports whether the reader may
// sleep on the futex word's value uint32(next); the reader clears the bit
// when it wakes, whatever arm returned.
//
// With the writer's publish (store the position, load the mask, load
// armed) this is a sequentially consistent handshake: if the reader
// sleeps, its last load of the position came before the writer's store of
// the next one, so the writer sees the bit and armed at least next, which
// is at least the position of any wake before that store.
func (r *ring) arm(bit, next uint64) bool {
	r.sleeping.Or(bit)
	if r.pos.Load() != next {
		return false
	}
	for a := r.armed.Load(); a < next && !r.armed.CompareAndSwap(a, next); a = r.armed.Load() {
	}
	return r.pos.Load() == next
}

// closed reports whether the writer closed the ring.
func (r *ring) closed() bool { return r.flags.Load()&flagClosed != 0 }

// session reads the session of the latest packet published, under its
// seqlock; ok is false if the writer was changing it or never set it.
func (r *ring) session() (s [10]byte, ok bool) {
	for range 4 {
		a := r.sessSeq.Load()
		if a == 0 || a&1 != 0 {
			continue
		}
		copy(s[:], r.mem[offSession:offSession+10])
		readFence()
		if r.sessSeq.Load() == a {
			return s, true
		}
	}
	return s, false
}

// unmap releases the mappings.
func (r *ring) unmap() {
	if r.hdr != nil {
		_ = unix.Munmap(r.hdr)
		r.hdr = nil
	}
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
}

// fenceWord is what fence's atomic read-modify-write operates on.
var fenceWord atomic.Uint32

// readFence orders the plain loads before it (a packet's copy) before the
// atomic loads after it (the slot's sequence word, checked again). On
// amd64 loads are not reordered with other loads, so it is nothing; on
// weaker architectures (arm64, where an atomic load only orders what comes
// after it) it is an atomic read-modify-write, a full barrier there.
func readFence() {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		fenceWord.Add(0)
	}
}

// writeFence orders the atomic store before it (a slot's odd sequence
// word) before the plain stores after it (the packet). amd64 does not
// reorder stores with stores and Go's atomic store is a locked exchange
// there; elsewhere it is a full barrier, as readFence.
func writeFence() {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		fenceWord.Add(0)
	}
}

// Futex operations (linux/futex.h). The ring is shared between processes,
// so the private variants (FUTEX_PRIVATE_FLAG) do not apply.
const (
	futexWait = 0
	futexWake = 1
)

// futexWaitOn sleeps while *w == val, for at most ts; it returns at once if
// *w differs. The errors (EAGAIN for a changed word, ETIMEDOUT, EINTR)
// mean the same to every caller: look again.
func futexWaitOn(w *atomic.Uint32, val uint32, ts *unix.Timespec) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
}

// futexWakeAll wakes every process sleeping on w and returns how many it
// woke.
func futexWakeAll(w *atomic.Uint32) int {
	n, _, _ := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake, uintptr(1<<31-1), 0, 0, 0)
	return int(n)
}
