package shm

import (
	"bytes"
	"fmt"

	"golang.org/x/sys/unix"
)

// RingInfo describes a ring file, as Inspect reads it.
type RingInfo struct {
	Path        string
	Generation  uint64 // the ring's generation (its creation time, Unix nanoseconds)
	WriterPID   int    // the process that created it
	Slots       int    // packets the ring holds
	MaxDatagram int    // the largest packet
	Position    uint64 // packets published
	Session     string // the session of the latest packet published, "" if none or if it was changing
	Closed      bool   // the writer closed it
	Waiters     int    // waiter slots held by readers
}

// Inspect reads a ring file's header, for tools and diagnostics: it maps
// the header page read-only and unmaps it. Off the hot path.
func Inspect(path string) (RingInfo, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return RingInfo{}, permError("open ring", path, "need read permission", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return RingInfo{}, fmt.Errorf("shm: fstat %s: %w", path, err)
	}
	if st.Size < headerSize {
		return RingInfo{}, fmt.Errorf("shm: ring %s: %w (%d bytes)", path, errBadRing, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, headerSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return RingInfo{}, fmt.Errorf("shm: mmap %s: %w", path, err)
	}
	defer unix.Munmap(mem)
	count, _, maxDg, err := parseHeader(mem, st.Size)
	if err != nil {
		return RingInfo{}, fmt.Errorf("shm: ring %s: %w", path, err)
	}
	r := newRing(mem, nil, count, slotStride(maxDg), maxDg) // the header only: no slot is read
	info := RingInfo{
		Path: path, Generation: r.gen, WriterPID: r.pid, Slots: count, MaxDatagram: maxDg,
		Position: r.pos.Load(), Closed: r.closed(),
	}
	if s, ok := r.session(); ok {
		info.Session = string(bytes.TrimRight(s[:], " "))
	}
	for k := range maxWaiters {
		if u32(mem, offWaiters+4*k).Load() != 0 {
			info.Waiters++
		}
	}
	return info, nil
}
