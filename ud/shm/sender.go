package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/ud"
)

// ErrTooLarge is returned (wrapped) by Send for a packet longer than
// Config.MaxDatagram.
var ErrTooLarge = errors.New("packet longer than MaxDatagram")

// HeldError is NewSender's error when another writer holds the ring: its
// lock file is locked.
type HeldError struct {
	Path string // the ring file
	Lock string // the lock file
	PID  int    // the process that holds the lock, as it recorded it; 0 if unknown
}

// Error returns "shm: ring PATH is held by another writer, pid PID (lock
// LOCK)".
func (e *HeldError) Error() string {
	pid := "unknown pid"
	if e.PID > 0 {
		pid = "pid " + strconv.Itoa(e.PID)
	}
	return "shm: ring " + e.Path + " is held by another writer, " + pid + " (lock " + e.Lock + ")"
}

// Sender is the writer of one ring file. It implements ud.Sender.
//
// NewSender locks the ring's lock file, creates a fresh ring file beside
// the old one, maps it read-write and renames it into place, so readers of
// a previous writer's ring keep a complete file to drain and find the new
// one by its inode. Send copies each packet into its slot under the slot's
// sequence word and publishes the batch with one atomic store; it makes a
// system call only to wake readers that sleep.
type Sender struct {
	cfg  Config
	path string
	lock string
	lfd  int // the lock file, flocked
	fd   int // the ring file
	r    *ring

	mu      sync.Mutex // Send and Close
	closed  atomic.Bool
	session [10]byte // the session last written to the header
	hasSess bool
	woke    uint64 // the position of the last futex wake

	datagrams, bytes, syscalls, errors atomic.Uint64
}

var _ ud.Sender = (*Sender)(nil)

// NewSender opens the ring Config.Path for writing: it takes the lock file
// (Path + ".lock"), refused with a *HeldError while another writer holds
// it, and puts a new, empty ring of a new generation in place of any ring
// the file held.
func NewSender(cfg Config) (*Sender, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	path := c.Path()
	if err := checkDir(c.Dir, true); err != nil {
		return nil, err
	}
	s := &Sender{cfg: c, path: path, lock: path + ".lock", lfd: -1, fd: -1}
	if err := s.takeLock(); err != nil {
		return nil, err
	}
	if err := s.create(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// checkDir explains what is wrong with a ring directory, if anything:
// missing, not a directory, or without the search (and, for a writer,
// write) permission the process needs.
func checkDir(dir string, write bool) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("shm: ring directory %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("shm: ring directory %s is not a directory", dir)
	}
	if unix.Access(dir, unix.X_OK) != nil {
		return fmt.Errorf("shm: ring directory %s: no search (x) permission: %w", dir, fs.ErrPermission)
	}
	if write && unix.Access(dir, unix.W_OK) != nil {
		return fmt.Errorf("shm: ring directory %s: no write permission, which the writer needs to create its ring files: %w", dir, fs.ErrPermission)
	}
	return nil
}

// permError names the permission an open of path was refused, or returns
// err wrapped with the path.
func permError(op, path, need string, err error) error {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
		return fmt.Errorf("shm: %s %s: %s: %w", op, path, need, err)
	}
	return fmt.Errorf("shm: %s %s: %w", op, path, err)
}

// takeLock opens and locks the lock file, and records this process's pid
// in it.
func (s *Sender) takeLock() error {
	fd, err := unix.Open(s.lock, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, uint32(s.cfg.FileMode))
	if err != nil {
		return permError("open lock file", s.lock, "need read and write permission on it", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			var b [32]byte
			n, _ := unix.Pread(fd, b[:], 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:max(n, 0)])))
			return &HeldError{Path: s.path, Lock: s.lock, PID: pid}
		}
		return fmt.Errorf("shm: flock %s: %w", s.lock, err)
	}
	pid := strconv.Itoa(os.Getpid()) + "\n"
	if err := unix.Ftruncate(fd, 0); err == nil {
		_, _ = unix.Pwrite(fd, []byte(pid), 0)
	}
	s.lfd = fd
	return nil
}

// create makes the new ring file, maps it and renames it into place.
func (s *Sender) create() error {
	c := &s.cfg
	tmp := filepath.Join(c.Dir, "."+c.Name+".new-"+strconv.Itoa(os.Getpid()))
	_ = unix.Unlink(tmp) // left by a writer of this pid that died
	fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, uint32(c.FileMode))
	if err != nil {
		return permError("create ring file", tmp, "need write permission on its directory", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
			_ = unix.Unlink(tmp)
		}
	}()
	// The umask may have taken bits the configuration asked for.
	if err := unix.Fchmod(fd, uint32(c.FileMode)); err != nil {
		return fmt.Errorf("shm: chmod %s: %w", tmp, err)
	}
	stride := slotStride(c.MaxDatagram)
	size := fileSize(c.Slots, stride)
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		// tmpfs allocates its pages here, so a full /dev/shm fails now
		// rather than with SIGBUS on a later write. Not every file system
		// has it; ftruncate then.
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("shm: allocate %d bytes for %s: %w", size, tmp, err)
		}
		if err := unix.Ftruncate(fd, size); err != nil {
			return fmt.Errorf("shm: size %s to %d bytes: %w", tmp, size, err)
		}
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("shm: mmap %s: %w", tmp, err)
	}
	ne := binary.NativeEndian
	copy(mem[offMagic:], magic)
	ne.PutUint32(mem[offVersion:], version)
	ne.PutUint32(mem[offHeaderSize:], headerSize)
	ne.PutUint32(mem[offSlotCount:], uint32(c.Slots))
	ne.PutUint32(mem[offSlotStride:], uint32(stride))
	ne.PutUint32(mem[offMaxDatagram:], uint32(c.MaxDatagram))
	ne.PutUint32(mem[offWriterPID:], uint32(os.Getpid()))
	// The generation tells rings of one path apart: the time of creation
	// in nanoseconds, never 0.
	ne.PutUint64(mem[offGeneration:], uint64(time.Now().UnixNano())|1)
	// Prefault every page, as ud.NewRing does: the first lap then takes no
	// page faults on the send path.
	for i := headerSize; i < len(mem); i += 4096 {
		mem[i] = 0
	}
	if err := unix.Rename(tmp, s.path); err != nil {
		_ = unix.Munmap(mem)
		return permError("rename "+tmp+" to", s.path, "need write permission on the directory", err)
	}
	ok = true
	s.fd = fd
	s.r = newRing(mem, mem, c.Slots, stride, c.MaxDatagram)
	return nil
}

// MaxDatagram returns Config.MaxDatagram, the largest packet Send accepts.
func (s *Sender) MaxDatagram() int { return s.cfg.MaxDatagram }

// Path returns the ring file's path.
func (s *Sender) Path() string { return s.path }

// Generation returns the ring's generation, which readers report.
func (s *Sender) Generation() uint64 { return s.r.gen }

// Send writes the packets into the ring in order and publishes them with
// one atomic store, then wakes readers sleeping on the futex, if any. It
// never waits for a reader: a reader that falls a ring behind loses the
// oldest packets. A packet longer than MaxDatagram fails with ErrTooLarge;
// the packets before it were published. Send does not allocate.
// Concurrent calls are serialized.
func (s *Sender) Send(datagrams [][]byte) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ud.ErrClosed
	}
	r := s.r
	i := r.pos.Load() // the writer is the only one who stores it
	start := i
	// A ring file truncated under the writer faults on the next write;
	// report it rather than crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if e := recover(); e != nil {
			if _, fault := e.(interface{ Addr() uintptr }); !fault {
				panic(e)
			}
			s.errors.Add(1)
			err = fmt.Errorf("shm: ring file %s: memory fault writing packet %d (truncated under the writer?)", s.path, i)
		}
	}()
	var nbytes uint64
	for _, d := range datagrams {
		if len(d) > s.cfg.MaxDatagram {
			err = fmt.Errorf("shm: send to %s: %w: %d bytes, MaxDatagram %d", s.path, ErrTooLarge, len(d), s.cfg.MaxDatagram)
			s.errors.Add(1)
			break
		}
		if len(d) >= 10 && (!s.hasSess || string(d[:10]) != string(s.session[:])) {
			s.setSession(d[:10])
		}
		off := (i & r.mask) * r.stride
		seq := u64(r.slots, int(off))
		seq.Store(2*i + 1) // odd: being written
		writeFence()
		binary.NativeEndian.PutUint32(r.slots[off+slotLen:], uint32(len(d)))
		copy(r.slots[off+slotPayload:off+slotPayload+uint64(len(d))], d)
		seq.Store(2*i + 2) // written
		i++
		nbytes += uint64(len(d))
	}
	if i == start {
		return err
	}
	s.publish(i)
	s.datagrams.Add(i - start)
	s.bytes.Add(nbytes)
	return err
}

// publish makes packets up to pos visible and wakes sleeping readers. The
// order is the one ud.Ring's wait handshake uses: store the position, then
// load the sleeping mask; a reader sets its bit, then loads the position.
// Both are sequentially consistent, so either the writer sees the bit or
// the reader sees the position (ring.arm).
//
// A wake takes every sleeper off the futex; a reader that sleeps after it
// does so on the position the wake published (an older value fails at
// once), and raises armed to it first. So the writer wakes again only when
// armed has reached its last wake's position: a reader woken but not yet
// running, with its bit still set, costs no further system calls, and
// neither does the bit of a reader killed in its sleep.
func (s *Sender) publish(pos uint64) {
	r := s.r
	r.pos.Store(pos)
	r.futex.Store(uint32(pos))
	if r.sleeping.Load() != 0 && r.armed.Load() >= s.woke {
		s.woke = pos
		futexWakeAll(r.futex)
		s.syscalls.Add(1)
	}
}

// setSession records the session of a packet in the header, under its
// seqlock.
func (s *Sender) setSession(b []byte) {
	copy(s.session[:], b)
	s.hasSess = true
	q := s.r.sessSeq
	v := q.Load()
	q.Store(v + 1)
	writeFence()
	copy(s.r.mem[offSession:offSession+10], b)
	q.Store(v + 2)
}

// Stats returns cumulative counters: Syscalls counts futex wakes. It is
// safe to call concurrently with Send.
func (s *Sender) Stats() ud.SendStats {
	return ud.SendStats{
		Datagrams: s.datagrams.Load(),
		Bytes:     s.bytes.Load(),
		Syscalls:  s.syscalls.Load(),
		Errors:    s.errors.Load(),
	}
}

// Close marks the ring closed, wakes every sleeping reader, and releases
// the mapping and the lock. The ring file stays, for readers to drain; the
// next writer replaces it. Send after Close returns ud.ErrClosed. Close is
// idempotent.
func (s *Sender) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.flags.Or(flagClosed)
	futexWakeAll(s.r.futex)
	s.r.unmap()
	s.release()
	return nil
}

// release closes the ring file and unlocks the lock file.
func (s *Sender) release() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	if s.lfd >= 0 {
		unix.Close(s.lfd) // closing the last descriptor releases the flock
		s.lfd = -1
	}
}
