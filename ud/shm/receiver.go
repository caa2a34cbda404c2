package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/ud"
)

// Faults a Receiver reports through Err (wrapped with the path) and counts
// in RecvStats.Errors.
var (
	// ErrNoRing: no ring file at the path (yet). The receiver waits for a
	// writer to create it; not counted as an error.
	ErrNoRing = errors.New("no ring file")
	// ErrDeleted: the ring file was deleted under the reader. It follows
	// the deleted file (a writer that still writes to it is read) until a
	// new ring appears at the path.
	ErrDeleted = errors.New("ring file deleted under the reader")
	// ErrTruncated: the ring file shrank under the reader, which
	// unmapped it without touching the missing pages, and waits for a new
	// ring at the path.
	ErrTruncated = errors.New("ring file truncated under the reader")
)

// fillBatch is the most packets one copy pass publishes at once, so that
// the consumer starts on a long backlog early.
const fillBatch = 64

// Receiver follows one ring file: it copies each packet the writer
// publishes out of the shared mapping into a slot of its private ud.Ring,
// checking the slot's sequence word before and after the copy, and lends
// those slots to its consumer. It implements ud.Receiver, ud.Filler and
// ud.RingReporter.
//
// The copying side (the receive loop in Blocking and BusyPoll mode, Fill in
// Direct and DirectSpin) owns the mapping: it maps the ring, checks the
// file every Config.CheckInterval and maps a new ring when the writer
// restarted. Peek, Release and Wait belong to one consumer goroutine.
type Receiver struct {
	ud.Lender // Peek, Release, RingLen, RingCap; Wait for the threaded modes

	cfg      Config
	path     string
	pathz    []byte // path, NUL-terminated, for statPath
	ring     *ud.Ring
	writable bool // waiting mode: the header is mapped read-write
	interval int64

	// The mapped ring, owned by the copying side. m, fd, ino and dev
	// change only under mapMu's write lock, taken by the owner; other
	// goroutines (the waker, Close, Info) read them under its read lock.
	mapMu  sync.RWMutex
	m      *ring
	fd     int
	ino    uint64
	dev    uint64
	waiter int // the ring's waiter slot this receiver owns, -1 for none

	// Owner only.
	next      uint64 // the next packet to copy
	lastCheck int64  // UnixNano of the last file check
	badIno    uint64 // a faulted file, not mapped again
	deleted   bool   // ErrDeleted reported for the mapped file
	attached  bool   // a ring was mapped once: later ones are read from their start
	full      bool   // in a ring-full episode
	pending   int    // packets copied into private slots, not yet published
	loopTs    unix.Timespec

	errMu sync.Mutex
	err   error

	closed atomic.Bool
	quit   chan struct{} // closed by Close
	done   chan struct{} // closed when the receive loop returned
	fillMu sync.Mutex    // Fill and Wait (Direct, DirectSpin) against Close

	// Direct with a Notifier that sleeps on the ring's futex itself
	// (ud.Notifier.WatchFutex): the ring this receiver registered in,
	// between Arm and Disarm. Under fillMu.
	armed *ring

	// Direct with a Notifier that cannot: the waker goroutine.
	filled     atomic.Uint64 // next, as of the last Fill
	wakerWants atomic.Bool   // the waker waits for Fill to move filled
	progress   chan struct{}
	wakerDone  chan struct{}
	wakerTs    unix.Timespec
	waitTs     unix.Timespec // the consumer's, in Wait

	gen                                                                    atomic.Uint64
	datagrams, bytes, syscalls, lapped, ringFull, errors, restarts, faults atomic.Uint64
}

var (
	_ ud.Receiver     = (*Receiver)(nil)
	_ ud.Filler       = (*Receiver)(nil)
	_ ud.RingReporter = (*Receiver)(nil)
	_ ud.FutexSource  = (*Receiver)(nil)
)

// NewReceiver maps the ring Config.Path and follows it from the writer's
// current position (a live join). If there is no ring file yet it waits
// for one (Err reports ErrNoRing meanwhile), and reads that ring from its
// start. Any other problem with the file — permissions, not a ring, packets
// longer than Config.MaxDatagram — is returned.
func NewReceiver(cfg Config) (*Receiver, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkDir(c.Dir, false); err != nil {
		return nil, err
	}
	ring, err := ud.NewRing(c.RingSlots, c.MaxDatagram)
	if err != nil {
		return nil, check.Invalid("RingSlots", c.RingSlots, "%v", err)
	}
	if c.Notifier != nil && c.Mode.Threaded() {
		ring.SetNotifier(c.Notifier)
	}
	r := &Receiver{
		Lender:    ud.NewLender(ring),
		cfg:       c,
		path:      c.Path(),
		pathz:     append([]byte(c.Path()), 0),
		ring:      ring,
		writable:  c.Mode == Blocking || c.Mode == Direct,
		interval:  int64(c.CheckInterval),
		fd:        -1,
		waiter:    -1,
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		progress:  make(chan struct{}, 1),
		wakerDone: make(chan struct{}),
	}
	r.loopTs = unix.NsecToTimespec(r.interval)
	r.wakerTs = r.loopTs
	r.lastCheck = time.Now().UnixNano()
	if err := r.attach(false); err != nil {
		if !errors.Is(err, ErrNoRing) {
			return nil, err
		}
		r.setErr(err, false)
		r.attached = true // the ring that appears is read from its start
	}
	switch {
	case c.Mode != Direct || c.Notifier == nil:
		close(r.wakerDone)
	case c.Notifier.WatchFutex(r) == nil:
		close(r.wakerDone) // the consumer sleeps on the futex itself
	default:
		go r.waker()
	}
	if !c.Mode.Threaded() {
		close(r.done)
		return r, nil
	}
	started := make(chan error, 1)
	go r.run(started)
	if err := <-started; err != nil {
		<-r.done
		r.Close()
		return nil, err
	}
	return r, nil
}

// attach maps the ring file at the path, read from its start or, for a
// live join, from the writer's position, in place of the mapped one.
func (r *Receiver) attach(fromStart bool) error {
	flags := unix.O_RDONLY
	if r.writable {
		flags = unix.O_RDWR
	}
	fd, err := unix.Open(r.path, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return fmt.Errorf("shm: ring %s: %w yet; waiting for its writer", r.path, ErrNoRing)
		case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
			if derr := checkDir(filepath.Dir(r.path), false); derr != nil {
				return derr
			}
			if r.writable {
				return fmt.Errorf("shm: open ring %s: no read and write permission on the file: a reader in mode %s registers as a waiter in the ring's header (give the readers write permission, Config.FileMode 0660, or follow the ring in a spin mode, which only reads): %w", r.path, r.cfg.Mode, fs.ErrPermission)
			}
			return fmt.Errorf("shm: open ring %s: no read permission on the file: %w", r.path, fs.ErrPermission)
		}
		return fmt.Errorf("shm: open ring %s: %w", r.path, err)
	}
	m, st, err := r.mapRing(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	waiter := -1
	if m.hdr != nil {
		if waiter, err = claimWaiter(m); err != nil {
			m.unmap()
			unix.Close(fd)
			return fmt.Errorf("shm: ring %s: %w", r.path, err)
		}
	}
	next := uint64(0)
	if !fromStart {
		next = m.pos.Load()
	}
	r.detach()
	r.mapMu.Lock()
	r.m, r.fd, r.ino, r.dev, r.waiter = m, fd, st.Ino, st.Dev, waiter
	r.mapMu.Unlock()
	r.next = next
	r.filled.Store(next)
	r.deleted = false
	r.attached = true
	r.gen.Store(m.gen)
	return nil
}

// mapRing maps an open ring file after checking its header.
func (r *Receiver) mapRing(fd int) (*ring, *unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("shm: fstat %s: %w", r.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, fmt.Errorf("shm: ring %s is not a regular file", r.path)
	}
	if st.Size < headerSize {
		return nil, nil, fmt.Errorf("shm: ring %s: %w (%d bytes)", r.path, errBadRing, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("shm: mmap %s: %w", r.path, err)
	}
	count, stride, maxDg, err := parseHeader(mem, st.Size)
	if err == nil && maxDg > r.cfg.MaxDatagram {
		err = fmt.Errorf("carries packets up to %d bytes, more than this receiver's MaxDatagram %d", maxDg, r.cfg.MaxDatagram)
	}
	if err != nil {
		_ = unix.Munmap(mem)
		return nil, nil, fmt.Errorf("shm: ring %s: %w", r.path, err)
	}
	var hdr []byte
	if r.writable {
		if hdr, err = unix.Mmap(fd, 0, headerSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			_ = unix.Munmap(mem)
			return nil, nil, fmt.Errorf("shm: mmap the header of %s read-write: %w", r.path, err)
		}
	}
	return newRing(mem, hdr, count, stride, maxDg), &st, nil
}

// claimWaiter takes a free waiter slot in the ring's header for this
// process, first freeing the slots of processes that no longer exist (a
// reader killed while it slept), and returns its index.
func claimWaiter(m *ring) (int, error) {
	me := uint32(os.Getpid())
	for k := range maxWaiters {
		p := u32(m.hdr, offWaiters+4*k)
		if v := p.Load(); v != 0 && v != me && unix.Kill(int(v), 0) == unix.ESRCH {
			// Clear the dead reader's bit first: once the slot is free,
			// the bit is the next owner's.
			m.sleeping.And(^(uint64(1) << k))
			p.CompareAndSwap(v, 0)
		}
	}
	for k := range maxWaiters {
		if u32(m.hdr, offWaiters+4*k).CompareAndSwap(0, me) {
			return k, nil
		}
	}
	return -1, fmt.Errorf("all %d waiter slots are taken; follow the ring in a spin mode (BusyPoll, DirectSpin)", maxWaiters)
}

// detach releases the mapped ring, if any, and its waiter slot. Owner only.
func (r *Receiver) detach() {
	r.mapMu.Lock()
	defer r.mapMu.Unlock()
	m := r.m
	if m == nil {
		return
	}
	if r.armed == m {
		r.armed = nil
	}
	if r.waiter >= 0 {
		m.sleeping.And(^(uint64(1) << r.waiter))
		u32(m.hdr, offWaiters+4*r.waiter).Store(0)
		r.waiter = -1
	}
	m.unmap()
	unix.Close(r.fd)
	r.m, r.fd = nil, -1
}

// setErr records the receiver's latest fault, counted unless quiet.
func (r *Receiver) setErr(err error, count bool) {
	r.errMu.Lock()
	r.err = err
	r.errMu.Unlock()
	if count {
		r.errors.Add(1)
	}
}

// Err returns what keeps the receiver from following a ring, or nil while
// it follows one: ErrNoRing, ErrDeleted, ErrTruncated (wrapped, naming the
// file), or the error of a file it could not map. Any goroutine.
func (r *Receiver) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// noRingCheck is how often a receiver with no ring looks for one: a
// writer's first packets wait no longer than this for a reader started
// before it. A stat(2) a millisecond costs nothing measurable.
const noRingCheck = time.Millisecond

// checkInterval is how often the owner checks the ring file: every
// Config.CheckInterval while it follows a ring, every noRingCheck while it
// waits for one. Owner only.
func (r *Receiver) checkInterval() int64 {
	if r.m == nil {
		return min(r.interval, int64(noRingCheck))
	}
	return r.interval
}

// maintain checks the mapped file and the path: a file deleted or
// truncated under the reader, a new ring at the path (a writer restarted),
// a ring that appeared. Owner only; it makes system calls, so the copying
// side calls it once per Config.CheckInterval.
func (r *Receiver) maintain(now int64) {
	r.lastCheck = now
	if m := r.m; m != nil {
		var st unix.Stat_t
		if err := unix.Fstat(r.fd, &st); err == nil {
			switch {
			case st.Size < int64(len(m.mem)):
				r.truncated(st.Size)
			case st.Nlink == 0 && !r.deleted:
				r.deleted = true
				r.setErr(fmt.Errorf("shm: ring %s: %w; following it until a new ring appears", r.path, ErrDeleted), true)
			}
		}
	}
	var st unix.Stat_t
	if !r.statPath(&st) {
		return
	}
	if r.m != nil && st.Ino == r.ino && st.Dev == r.dev || st.Ino == r.badIno {
		return
	}
	// A new ring: take what the old one still holds, then switch to the
	// new one from its start.
	if r.m != nil {
		for r.fill(now) > 0 {
		}
		if w := r.m.pos.Load(); w > r.next {
			r.lapped.Add(w - r.next) // no room left in the private ring
		}
	}
	hadRing := r.attached
	if err := r.attach(true); err != nil {
		if !errors.Is(err, ErrNoRing) {
			r.badIno = st.Ino
			r.setErr(err, true)
		}
		return
	}
	if hadRing {
		r.restarts.Add(1)
	}
	r.setErr(nil, false)
}

// statPath is stat(2) of the path. unix.Stat converts its string
// argument on every call, an allocation each check; this passes the
// NUL-terminated copy made once.
func (r *Receiver) statPath(st *unix.Stat_t) bool {
	atFDCWD := unix.AT_FDCWD
	_, _, errno := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&r.pathz[0])), uintptr(unsafe.Pointer(st)), 0, 0, 0)
	return errno == 0
}

// truncated drops a mapping whose file shrank.
func (r *Receiver) truncated(size int64) {
	r.badIno = r.ino
	r.setErr(fmt.Errorf("shm: ring %s: %w to %d bytes (%d mapped); waiting for a new ring", r.path, ErrTruncated, size, len(r.m.mem)), true)
	r.detach()
}

// fill copies what the ring holds past next into free private slots and
// publishes them; it returns how many. A memory fault (the file truncated
// between two checks) is caught: the packets copied before it are
// published, the mapping dropped and ErrTruncated reported. Owner only.
func (r *Receiver) fill(now int64) (n int) {
	if r.m == nil {
		return 0
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if e := recover(); e != nil {
			if _, fault := e.(interface{ Addr() uintptr }); !fault {
				panic(e)
			}
			n = r.pending
			r.publish(n, 0)
			r.faults.Add(1)
			var st unix.Stat_t
			_ = unix.Fstat(r.fd, &st)
			r.truncated(st.Size)
		}
	}()
	return r.copyIn(now)
}

// copyIn is fill's copy pass. Each packet is read under its slot's
// sequence word: the word must read 2i+2 (packet i, written) before the
// copy and again after it. Any other value means the writer has reused the
// slot for a later packet, so the reader has been lapped: the copy is
// discarded, the packets from i to the oldest one still in the ring are
// counted lost, and the reader goes on from there.
func (r *Receiver) copyIn(now int64) int {
	m := r.m
	w := m.pos.Load()
	if w == r.next {
		return 0
	}
	if w < r.next {
		r.next = w // not a ring this reader was following; cannot happen
		return 0
	}
	if w-r.next > m.count {
		r.lapTo(m, w, r.next)
	}
	got, nbytes := 0, uint64(0)
	for r.next < w && got < fillBatch {
		dst := r.ring.FreeSlot(got)
		if dst == nil {
			if !r.full {
				r.full = true
				r.ringFull.Add(1)
			}
			break
		}
		i := r.next
		off := (i & m.mask) * m.stride
		seq := u64(m.slots, int(off))
		want := 2*i + 2
		if seq.Load() != want {
			w = m.pos.Load()
			r.lapTo(m, w, i)
			continue
		}
		l := uint64(binary.NativeEndian.Uint32(m.slots[off+slotLen:]))
		l = min(l, uint64(m.maxDg)) // a torn length: the check below refuses the copy
		nc := copy(dst.Buf, m.slots[off+slotPayload:off+slotPayload+l])
		readFence()
		if seq.Load() != want {
			w = m.pos.Load()
			r.lapTo(m, w, i)
			continue
		}
		dst.N, dst.RecvNs, dst.Opened = nc, now, false
		nbytes += uint64(nc)
		got++
		r.pending = got
		r.next = i + 1
	}
	if got > 0 {
		r.full = false
	}
	r.publish(got, nbytes)
	return got
}

// publish counts and publishes got copied packets.
func (r *Receiver) publish(got int, nbytes uint64) {
	r.pending = 0
	if got == 0 {
		return
	}
	r.datagrams.Add(uint64(got))
	r.bytes.Add(nbytes)
	r.ring.Publish(got)
}

// lapTo moves the reader, which found packet i overwritten with the writer
// at w, to the oldest packet the ring still holds, and counts the packets
// skipped. The writer starts on packet j+count, in packet j's slot, only
// after publishing j+count-1; so with the writer at w, packets from
// w-count+1 on are intact unless it moves on, which the next copy's check
// catches.
func (r *Receiver) lapTo(m *ring, w, i uint64) {
	oldest := uint64(0)
	if w+1 > m.count {
		oldest = w + 1 - m.count
	}
	oldest = max(oldest, i+1)
	r.lapped.Add(oldest - i)
	r.next = oldest
}

// run is the receive loop (Blocking, BusyPoll), the private ring's only
// producer and the mapping's owner.
func (r *Receiver) run(started chan<- error) {
	defer close(r.done)
	busy := r.cfg.Mode == BusyPoll
	if busy {
		if err := ud.LockThread(r.cfg.CPU, r.cfg.Backoff); err != nil {
			started <- fmt.Errorf("shm: ring %s: sched_setaffinity CPU %d: %w", r.path, r.cfg.CPU, err)
			return
		}
	}
	started <- nil
	idle := ud.Spinner{Polls: 1024, Backoff: r.cfg.Backoff, Yield: true}
	if r.cfg.Backoff {
		idle.Polls = 64
	}
	polls := 0
	for !r.closed.Load() {
		now := time.Now().UnixNano()
		if now-r.lastCheck >= r.checkInterval() {
			r.maintain(now)
		}
		if r.fill(now) > 0 {
			idle.Busy()
			polls = 0
			continue
		}
		switch {
		case r.full && busy:
			idle.Empty()
		case r.full:
			_ = r.ring.WaitFree(time.Duration(r.interval))
		case busy:
			idle.Empty()
		case polls < r.cfg.SpinPolls:
			polls++ // spin, then wait
			if polls%256 == 0 {
				idle.Yield, idle.Polls = true, 1
				idle.Empty()
			}
		default:
			polls = 0
			r.sleepOwner(&r.loopTs)
		}
	}
}

// sleepOwner waits, on the owner's goroutine, until the writer publishes
// past next, the ring is closed, or ts passes. Without a ring or a
// writable header it sleeps a check interval (or BackoffSleep for a
// reader that spins).
func (r *Receiver) sleepOwner(ts *unix.Timespec) {
	m := r.m
	if m == nil || m.sleeping == nil {
		d := time.Duration(r.checkInterval())
		if m != nil {
			d = ud.BackoffSleep
		}
		select {
		case <-r.quit:
		case <-time.After(d):
		}
		return
	}
	if r.sleep(m, r.next, ts) {
		r.syscalls.Add(1)
	}
}

// sleep registers in m's sleeping mask, checks once more that the writer
// has nothing past next and has not closed the ring, and sleeps on the
// futex for at most ts. It reports whether it slept. Its caller keeps m
// mapped.
func (r *Receiver) sleep(m *ring, next uint64, ts *unix.Timespec) bool {
	bit := uint64(1) << r.waiter
	defer m.sleeping.And(^bit)
	if !m.arm(bit, next) || m.closed() || r.closed.Load() {
		return false
	}
	futexWaitOn(m.futex, uint32(next), ts)
	return true
}

// Fill copies what the writer published into free ring slots without
// blocking, publishes it, and returns how many packets it copied
// (ud.Filler; Direct and DirectSpin only, 0 otherwise). It also checks the
// ring file once per Config.CheckInterval. Consumer only.
func (r *Receiver) Fill() int {
	if r.cfg.Mode.Threaded() {
		return 0
	}
	r.fillMu.Lock()
	defer r.fillMu.Unlock()
	if r.closed.Load() {
		return 0
	}
	now := time.Now().UnixNano()
	if now-r.lastCheck >= r.checkInterval() {
		r.maintain(now)
	}
	n := r.fill(now)
	r.filled.Store(r.next)
	if r.wakerWants.Load() {
		select {
		case r.progress <- struct{}{}:
		default:
		}
	}
	return n
}

// Wait blocks until a packet is waiting (nil), the timeout passes (nil), or
// the receiver is closed and every packet received has been released
// (ud.ErrClosed). Consumer only.
//
// Without a receive loop (Direct, DirectSpin) Wait copies what the writer
// published itself and, in Direct mode, sleeps on the ring's futex on the
// consumer's own thread.
func (r *Receiver) Wait(timeout time.Duration) error {
	if r.cfg.Mode.Threaded() {
		return r.Lender.Wait(timeout)
	}
	if r.ring.Len() > 0 {
		return nil
	}
	if r.closed.Load() {
		return ud.ErrClosed
	}
	if r.Fill() > 0 || timeout <= 0 {
		return nil
	}
	r.fillMu.Lock()
	m := r.m
	if m != nil && m.sleeping != nil && !r.closed.Load() {
		r.waitTs = unix.NsecToTimespec(int64(min(timeout, time.Duration(r.interval))))
		if r.sleep(m, r.next, &r.waitTs) {
			r.syscalls.Add(1)
		}
		r.fillMu.Unlock()
	} else {
		r.fillMu.Unlock()
		time.Sleep(min(timeout, ud.BackoffSleep))
	}
	r.Fill()
	if r.closed.Load() && r.ring.Len() == 0 {
		return ud.ErrClosed
	}
	return nil
}

// Arm registers the consumer, about to sleep in its Notifier, as a waiter
// on the ring and returns the futex word to sleep on (ud.FutexSource): the
// waiting handshake of sleep, with the Notifier doing the sleeping. It is
// Ready when packets wait, copied or not yet; with no ring mapped it asks
// to be looked at again within noRingCheck. Consumer only.
func (r *Receiver) Arm() ud.FutexArm {
	r.fillMu.Lock()
	defer r.fillMu.Unlock()
	if r.ring.Len() > 0 {
		return ud.FutexArm{Ready: true}
	}
	if r.closed.Load() {
		return ud.FutexArm{} // nothing will come; Wait reports ErrClosed
	}
	m := r.m
	if m == nil || m.sleeping == nil {
		return ud.FutexArm{Max: time.Duration(r.checkInterval())}
	}
	if m.closed() {
		// The writer ended: nothing wakes this ring any more, but a
		// new one may replace it, which the next check finds.
		return ud.FutexArm{Max: time.Duration(r.interval)}
	}
	r.armed = m
	if !m.arm(uint64(1)<<r.waiter, r.next) {
		return ud.FutexArm{Ready: true}
	}
	r.syscalls.Add(1)
	return ud.FutexArm{Word: m.futex, Val: uint32(r.next), Max: time.Duration(r.interval)}
}

// Disarm withdraws what Arm registered (ud.FutexSource). Consumer only.
func (r *Receiver) Disarm() {
	r.fillMu.Lock()
	defer r.fillMu.Unlock()
	if m := r.armed; m != nil {
		m.sleeping.And(^(uint64(1) << r.waiter))
		r.armed = nil
	}
}

// waker is the goroutine of a Direct receiver with a Notifier. The
// consumer sleeps in the Notifier (an epoll_wait or a channel), which a
// futex cannot wake; so while the consumer has taken everything the writer
// published, the waker sleeps on the ring's futex for it, and signals the
// Notifier when the writer publishes. It then waits for the consumer's
// next Fill before it sleeps again: it never registers as a waiter while
// the consumer has packets to take, so a busy ring costs the writer no
// wake-ups.
func (r *Receiver) waker() {
	defer close(r.wakerDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for !r.closed.Load() {
		r.mapMu.RLock()
		m, slept, pending := r.m, false, false
		if m != nil && m.sleeping != nil {
			f := r.filled.Load()
			slept = r.sleep(m, f, &r.wakerTs)
			pending = m.pos.Load() != r.filled.Load()
		}
		r.mapMu.RUnlock()
		if r.closed.Load() {
			return
		}
		if m == nil || m.sleeping == nil {
			d := time.Duration(r.interval)
			if m == nil {
				d = noRingCheck // a ring may appear any moment
			}
			timer.Reset(d)
			select {
			case <-r.quit:
			case <-timer.C:
			}
			continue
		}
		if slept {
			r.syscalls.Add(1)
		}
		if !pending {
			continue
		}
		f := r.filled.Load()
		r.cfg.Notifier.Signal()
		r.wakerWants.Store(true)
		if r.filled.Load() == f {
			timer.Reset(time.Duration(r.interval))
			select {
			case <-r.progress:
			case <-r.quit:
			case <-timer.C:
			}
			timer.Stop()
		}
		r.wakerWants.Store(false)
	}
}

// MaxDatagram returns the private slots' size, Config.MaxDatagram.
func (r *Receiver) MaxDatagram() int { return r.cfg.MaxDatagram }

// Path returns the ring file's path.
func (r *Receiver) Path() string { return r.path }

// Generation returns the generation of the ring followed (the latest one
// mapped), 0 before the first.
func (r *Receiver) Generation() uint64 { return r.gen.Load() }

// Restarts returns how many times the receiver switched to a new ring at
// its path: a writer restarted, or replaced a deleted or truncated file.
func (r *Receiver) Restarts() uint64 { return r.restarts.Load() }

// Stats returns cumulative counters. It is safe to call from any
// goroutine. KernelDrops counts the packets the writer overwrote before
// this reader copied them (lapped), exactly: once the reader has caught up
// with the writer, Datagrams + KernelDrops is the number of packets the
// writer published since the reader joined. Syscalls counts futex waits;
// Errors the faults Err reported (ErrDeleted, ErrTruncated, a new file it
// could not map).
func (r *Receiver) Stats() ud.RecvStats {
	return ud.RecvStats{
		Datagrams:   r.datagrams.Load(),
		Bytes:       r.bytes.Load(),
		Syscalls:    r.syscalls.Load(),
		KernelDrops: r.lapped.Load(),
		RingFull:    r.ringFull.Load(),
		Errors:      r.errors.Load(),
	}
}

// Close stops the receive loop (or the waker) and releases the mapping and
// the waiter slot. The consumer may drain the slots already received; Wait
// then returns ud.ErrClosed. Close is idempotent.
func (r *Receiver) Close() error {
	if r.closed.Swap(true) {
		<-r.done
		<-r.wakerDone
		return nil
	}
	close(r.quit)
	r.mapMu.RLock()
	if m := r.m; m != nil && m.sleeping != nil {
		// Wakes every reader of the ring; the others look, find nothing
		// and sleep again.
		futexWakeAll(m.futex)
	}
	r.mapMu.RUnlock()
	r.ring.Close()
	<-r.done
	<-r.wakerDone
	r.fillMu.Lock()
	defer r.fillMu.Unlock()
	r.detach()
	return nil
}
