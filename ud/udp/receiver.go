package udp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/ud"
)

const (
	// cpuSetSize is how many CPUs a unix.CPUSet can name (1024).
	cpuSetSize = int(unsafe.Sizeof(unix.CPUSet{})) * 8
	// ctrlSpace is the control buffer per slot: room for one SO_RXQ_OVFL
	// message (a cmsghdr and a uint32, padded), the only one enabled.
	ctrlSpace = 24 // unix.CmsgSpace(4) on 64-bit Linux; checked in init
	// rcvTimeout is SO_RCVTIMEO in Blocking mode: the longest a blocked
	// recvmmsg sleeps before the loop re-checks whether it was closed. It
	// is a backstop; Close wakes the call at once with shutdown(2).
	rcvTimeout = 100 * time.Millisecond
	// busyYieldPolls is how many empty polls in a row a BusyPoll loop makes
	// before it yields its P with runtime.Gosched (roughly every
	// millisecond at ~1 µs per recvmmsg). The spinning goroutine is
	// otherwise preempted only by the runtime's 10 ms time slice, and
	// goroutines queued on its P would wait that long; yielding only when
	// idle keeps that cost off a busy line.
	busyYieldPolls = 1024
	// backoffPolls replaces busyYieldPolls with Config.Backoff: a short
	// run of empty polls (tens of microseconds) before the loop sleeps.
	backoffPolls = 64
)

func init() {
	if unix.CmsgSpace(4) != ctrlSpace {
		panic("udp: ctrlSpace does not match unix.CmsgSpace(4)")
	}
}

// Receiver receives datagrams from one multicast group into a ring of
// pre-allocated slots. It implements ud.Receiver.
//
// The receive loop, started by NewReceiver, is the ring's producer: each
// recvmmsg call writes straight into the buffers of up to Config.Batch free
// slots, and the loop publishes them to the consumer in one step. Peek,
// Release and Wait belong to a single consumer goroutine.
type Receiver struct {
	ud.Lender // Peek, Release, RingLen, RingCap; Wait for the threaded modes

	cfg    Config
	fd     int
	rcvBuf int
	ring   *ud.Ring

	// One mmsghdr, iovec and control buffer per ring slot, by physical
	// position, built once: hdrs[k] points at slot k's buffer. A batch of
	// contiguous free slots is then a contiguous run of hdrs that recvmmsg
	// takes as is, which is why the loop never has to build descriptors.
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	ctrl []byte

	closed atomic.Bool
	done   chan struct{} // closed when the receive loop has returned

	// Direct modes: the consumer receives (Fill). fillMu keeps Close from
	// closing the descriptor under a Fill in progress.
	fillMu   sync.Mutex
	watch    int  // index in the Notifier's watch set (Direct)
	watching bool // registered with the Notifier
	fillFull bool // in a ring-full episode (Fill)

	// Owned by the receive loop.
	lastDropRaw uint32 // latest SO_RXQ_OVFL value (the kernel's 32-bit counter)
	drops       uint64 // lastDropRaw extended to 64 bits across wraps

	// gro holds the receive buffers with UDP GRO (Config.GRO, where the
	// kernel has it); nil without.
	gro *groRecv

	datagrams, bytes, syscalls, kernelDrops, ringFull, truncated, errors, coalesced atomic.Uint64
}

var _ ud.Receiver = (*Receiver)(nil)

// NewReceiver opens a socket bound to cfg.Group:cfg.Port, joins the group on
// cfg.Interface, and starts the receive loop in cfg.Mode.
func NewReceiver(cfg Config) (*Receiver, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.Mode == Direct && c.Notifier == nil {
		return nil, check.Invalid("Mode", c.Mode, "Direct needs a Notifier to wait on the socket")
	}
	ring, err := ud.NewRing(c.RingSlots, c.MaxDatagram)
	if err != nil {
		return nil, check.Invalid("RingSlots", c.RingSlots, "%v", err)
	}
	if c.Notifier != nil && c.Mode.Threaded() {
		ring.SetNotifier(c.Notifier)
	}
	fd, err := newSocket(&c, c.Mode != Blocking)
	if err != nil {
		return nil, err
	}
	r := &Receiver{
		Lender: ud.NewLender(ring),
		cfg:    c,
		fd:     fd,
		ring:   ring,
		hdrs:   make([]unix.Mmsghdr, c.RingSlots),
		iovs:   make([]unix.Iovec, c.RingSlots),
		ctrl:   make([]byte, c.RingSlots*ctrlSpace),
		done:   make(chan struct{}),
	}
	if err := r.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	for k := range r.hdrs {
		buf := ring.Slot(k).Buf
		r.iovs[k].Base = &buf[0]
		r.iovs[k].SetLen(len(buf))
		h := &r.hdrs[k].Hdr
		h.Iov = &r.iovs[k]
		h.Iovlen = 1
		h.Control = &r.ctrl[k*ctrlSpace]
	}
	if !c.Mode.Threaded() {
		close(r.done) // no receive loop
		if c.Mode == Direct {
			if r.watch, err = c.Notifier.Watch(fd); err != nil {
				unix.Close(fd)
				return nil, err
			}
			r.watching = true
		}
		return r, nil
	}
	started := make(chan error, 1)
	go r.run(started)
	if err := <-started; err != nil {
		<-r.done
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

func (r *Receiver) setup() error {
	c, fd := &r.cfg, r.fd
	// SO_REUSEADDR lets several receivers (processes, or the A and B
	// consumers of one process) bind the same group:port.
	if err := setInt(c, fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, "SO_REUSEADDR", 1); err != nil {
		return err
	}
	// Bind to the group, not INADDR_ANY: a socket bound to INADDR_ANY:port
	// receives every group joined by anyone on this host on that port.
	if err := unix.Bind(fd, sockaddr(c.Group.As4(), c.Port)); err != nil {
		return c.opError("bind", err)
	}
	// And only deliver groups this socket joined itself (Linux defaults
	// IP_MULTICAST_ALL to 1, which delivers any group joined on the host
	// that the bound address matches).
	if err := setInt(c, fd, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, "IP_MULTICAST_ALL", 0); err != nil {
		return err
	}
	mreq := &unix.IPMreq{Multiaddr: c.Group.As4(), Interface: c.Interface.As4()}
	if err := unix.SetsockoptIPMreq(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
		return c.opError("setsockopt IP_ADD_MEMBERSHIP", err)
	}
	// SO_RXQ_OVFL attaches the socket's cumulative drop count to received
	// datagrams as a control message: the receive path learns about kernel
	// drops without an extra system call.
	if err := setInt(c, fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, "SO_RXQ_OVFL", 1); err != nil {
		return err
	}
	if len(c.DropPrefix) > 0 {
		prog := dropPrefixFilter(c.DropPrefix)
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
			return c.opError("setsockopt SO_ATTACH_FILTER", err)
		}
	}
	if c.GRO {
		on, err := enableGRO(c, fd)
		if err != nil {
			return err
		}
		if on {
			r.gro = newGRORecv(c.Batch)
		}
	}
	granted, err := setRcvBuf(c, fd)
	if err != nil {
		return err
	}
	r.rcvBuf = granted
	if c.Mode == Blocking {
		tv := unix.NsecToTimeval(rcvTimeout.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return c.opError("setsockopt SO_RCVTIMEO", err)
		}
	}
	return nil
}

// run is the receive loop, the ring's only producer.
func (r *Receiver) run(started chan<- error) {
	defer close(r.done)
	busy := r.cfg.Mode == BusyPoll
	if busy {
		// The thread is never unlocked (see ud.LockThread).
		if err := ud.LockThread(r.cfg.CPU, r.cfg.Backoff); err != nil {
			started <- r.cfg.opError("sched_setaffinity CPU "+strconv.Itoa(r.cfg.CPU), err)
			return
		}
	}
	started <- nil

	// BusyPoll: after a run of empty polls, yield the P, and with Backoff
	// also the core.
	idle := ud.Spinner{Polls: busyYieldPolls, Backoff: r.cfg.Backoff, Yield: true}
	if r.cfg.Backoff {
		idle.Polls = backoffPolls
	}
	full := false // in a ring-full episode
	for !r.closed.Load() {
		start, n := r.ring.Writable()
		if n == 0 {
			if !full {
				full = true
				r.ringFull.Add(1)
			}
			// The kernel queue absorbs what arrives meanwhile, and counts
			// what it cannot hold in SO_RXQ_OVFL. BusyPoll spins; Blocking
			// sleeps until the consumer releases a slot.
			if !busy {
				r.ring.WaitFree(rcvTimeout)
			} else {
				idle.Empty()
			}
			continue
		}
		full = false
		if r.gro != nil && r.gro.pending() {
			// The last call's datagrams first: nothing more is
			// received until they are in the ring.
			r.spillGRO()
			continue
		}
		var got int
		var errno unix.Errno
		switch {
		case r.gro != nil:
			// GRO buffers, cut into the ring's slots (published here).
			got, errno = r.receiveGRO(busy, unix.MSG_WAITFORONE)
		case busy:
			n = r.prepare(start, n)
			got, errno = recvmmsgRaw(r.fd, &r.hdrs[start], n)
		default:
			n = r.prepare(start, n)
			// MSG_WAITFORONE: block for the first datagram only, then take
			// whatever else is queued without waiting to fill the batch.
			got, errno = recvmmsg(r.fd, &r.hdrs[start], n, unix.MSG_WAITFORONE)
		}
		if r.closed.Load() {
			// After shutdown(2) a UDP recvmmsg reports "datagrams" of
			// length 0 (each recvmsg returns 0); Close sets closed before
			// it shuts the socket down, so checking here discards them.
			return
		}
		switch {
		case errno == unix.EAGAIN || errno == unix.EINTR:
			// Nothing queued (BusyPoll), or SO_RCVTIMEO expired.
			if busy {
				idle.Empty()
			}
			continue
		case errno != 0:
			r.errors.Add(1)
			if !busy {
				// Do not turn a persistent error into a hot loop.
				time.Sleep(time.Millisecond)
			}
			continue
		case got == 0:
			continue
		}
		idle.Busy()
		if r.gro == nil {
			r.deliver(start, got)
		}
	}
}

// prepare readies the descriptors of the n free slots from start for a
// receive, at most a batch of them, and returns how many it readied.
func (r *Receiver) prepare(start, n int) int {
	n = min(n, r.cfg.Batch)
	for k := start; k < start+n; k++ {
		// The kernel overwrites these two on every receive.
		r.hdrs[k].Hdr.Controllen = ctrlSpace
		r.hdrs[k].Hdr.Flags = 0
	}
	return n
}

// Fill receives what the socket holds into free ring slots, without
// blocking, and publishes it (ud.Filler; Direct and DirectSpin modes only).
// A Direct receiver receives only while its Notifier marks the socket
// ready, and clears the mark once it finds the socket drained. Consumer
// only.
func (r *Receiver) Fill() int {
	if r.cfg.Mode.Threaded() {
		return 0
	}
	n := r.cfg.Notifier
	if r.watching && !n.Ready(r.watch) && (r.gro == nil || !r.gro.pending()) {
		return 0
	}
	r.fillMu.Lock()
	defer r.fillMu.Unlock()
	if r.closed.Load() {
		return 0
	}
	start, free := r.ring.Writable()
	if free == 0 {
		// The consumer holds every slot. The socket stays marked ready:
		// the next Fill after a release receives.
		if !r.fillFull {
			r.fillFull = true
			r.ringFull.Add(1) // once per episode, as the receive loop counts
		}
		return 0
	}
	r.fillFull = false
	if r.gro != nil {
		return r.fillGRO()
	}
	free = r.prepare(start, free)
	got, errno := recvmmsgRaw(r.fd, &r.hdrs[start], free)
	switch {
	case errno == unix.EAGAIN || errno == unix.EINTR:
		got = 0
	case errno != 0:
		r.errors.Add(1)
		got = 0
	}
	if got < free && r.watching {
		n.SetReady(r.watch, false) // drained: wait for epoll
	}
	if got > 0 {
		r.deliver(start, got)
	}
	return got
}

// fillGRO is Fill for a GRO receiver: the datagrams of the last call that
// wait for slots first, else a new call.
func (r *Receiver) fillGRO() int {
	if r.gro.pending() {
		return r.spillGRO()
	}
	got, errno := r.receiveGRO(true, 0)
	if errno != 0 && errno != unix.EAGAIN && errno != unix.EINTR {
		r.errors.Add(1)
	}
	if r.watching && (errno != 0 || r.gro.got < r.cfg.Batch) {
		r.cfg.Notifier.SetReady(r.watch, false) // drained: wait for epoll
	}
	return got
}

// deliver publishes the got datagrams recvmmsg placed in slots start to
// start+got-1. It reads the drop counter, stamps the batch, and drops
// truncated datagrams.
// Counters are updated before Publish, so a consumer that has seen a datagram
// also sees the counters that include it.
func (r *Receiver) deliver(start, got int) {
	now := time.Now().UnixNano() // one clock read per batch
	w := start
	var nbytes, trunc uint64
	for k := start; k < start+got; k++ {
		h := &r.hdrs[k]
		r.readDrops(k, int(h.Hdr.Controllen))
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			trunc++
			continue
		}
		s := r.ring.Slot(w)
		if w != k {
			// A truncated datagram left a hole. Move this one down so the
			// published slots stay contiguous; truncation is a
			// misconfiguration, so the copy is off the normal path.
			copy(s.Buf, r.ring.Slot(k).Buf[:h.Len])
		}
		s.N = int(h.Len)
		s.RecvNs = now
		nbytes += uint64(h.Len)
		w++
	}
	r.syscalls.Add(1)
	r.datagrams.Add(uint64(w - start))
	r.bytes.Add(nbytes)
	if trunc > 0 {
		r.truncated.Add(trunc)
	}
	storeMax(&r.kernelDrops, r.drops)
	r.ring.Publish(w - start)
}

// readDrops parses slot k's control messages for SO_RXQ_OVFL (see
// readControl).
func (r *Receiver) readDrops(k, clen int) {
	r.readControl(r.ctrl[k*ctrlSpace : k*ctrlSpace+min(clen, ctrlSpace)])
}

// readControl parses one received buffer's control messages. SO_RXQ_OVFL
// is the socket's cumulative drop count (a wrapping uint32) when the
// datagram was queued, which the kernel omits while the count is zero;
// UDP_GRO is the segment size of a buffer that holds several datagrams
// (Config.GRO), returned, or 0 when there is none.
func (r *Receiver) readControl(b []byte) (segment int) {
	for len(b) >= unix.SizeofCmsghdr {
		l := int(binary.NativeEndian.Uint64(b[0:8]))
		level := int32(binary.NativeEndian.Uint32(b[8:12]))
		typ := int32(binary.NativeEndian.Uint32(b[12:16]))
		if l < unix.SizeofCmsghdr || l > len(b) {
			return segment
		}
		if l >= unix.CmsgLen(4) {
			v := binary.NativeEndian.Uint32(b[unix.SizeofCmsghdr:])
			switch {
			case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL:
				r.drops += uint64(v - r.lastDropRaw) // modular: survives the wrap
				r.lastDropRaw = v
			case level == unix.IPPROTO_UDP && typ == unix.UDP_GRO:
				segment = int(v)
			}
		}
		b = b[min(unix.CmsgSpace(l-unix.SizeofCmsghdr), len(b)):]
	}
	return segment
}

// MaxDatagram returns the slot size, Config.MaxDatagram.
func (r *Receiver) MaxDatagram() int { return r.cfg.MaxDatagram }

// Wait blocks until a datagram is waiting (nil), the timeout passes (nil), or
// the receiver is closed and every received datagram has been released
// (ud.ErrClosed). Consumer only.
//
// Without a receive loop (Direct, DirectSpin) Wait polls the socket itself
// and receives what arrived.
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
	if r.watching {
		r.cfg.Notifier.SetReady(r.watch, true)
	}
	if r.Fill() > 0 {
		return nil
	}
	pfd := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
	ms := int((timeout + time.Millisecond - 1) / time.Millisecond)
	if _, err := unix.Poll(pfd, max(ms, 1)); err == nil && pfd[0].Revents != 0 {
		if r.watching {
			r.cfg.Notifier.SetReady(r.watch, true)
		}
		r.Fill()
	}
	if r.closed.Load() && r.ring.Len() == 0 {
		return ud.ErrClosed
	}
	return nil
}

// Stats returns cumulative counters. It is safe to call from any goroutine.
//
// KernelDrops is the socket's drop count as of the latest datagram received:
// the kernel reports it only attached to a datagram, so drops that happen
// after the last one received show up with the next. Once a datagram sent
// after the losses has been received, Datagrams + Truncated + KernelDrops
// equals the datagrams the group delivered to this socket.
func (r *Receiver) Stats() ud.RecvStats {
	return ud.RecvStats{
		Datagrams:   r.datagrams.Load(),
		Bytes:       r.bytes.Load(),
		Syscalls:    r.syscalls.Load(),
		KernelDrops: r.kernelDrops.Load(),
		RingFull:    r.ringFull.Load(),
		Truncated:   r.truncated.Load(),
		Errors:      r.errors.Load(),
		Coalesced:   r.coalesced.Load(),
		RcvBuf:      r.rcvBuf,
	}
}

// LocalAddr returns the address the socket is bound to, which is the group
// and port.
func (r *Receiver) LocalAddr() (netip.AddrPort, error) {
	sa, err := unix.Getsockname(r.fd)
	if err != nil {
		return netip.AddrPort{}, r.cfg.opError("getsockname", err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return netip.AddrPort{}, r.cfg.opError("getsockname", fmt.Errorf("unexpected address %T", sa))
	}
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)), nil
}

// storeMax raises v to n unless it is already at least n.
func storeMax(v *atomic.Uint64, n uint64) {
	for old := v.Load(); n > old && !v.CompareAndSwap(old, n); old = v.Load() {
	}
}

// SyncDrops brings RecvStats.KernelDrops up to date from /proc/net/udp
// (ud.DropSyncer): the kernel reports drops to the receive path only with
// the next datagram received, so drops after the last one (a lost tail, a
// lost end of session) show only here. It reads a file: call it off the
// hot path, as before a final summary. Any goroutine.
func (r *Receiver) SyncDrops() error {
	n, err := r.ProcNetDrops()
	if err != nil {
		return err
	}
	storeMax(&r.kernelDrops, n)
	return nil
}

// ProcNetDrops reads this socket's drop count from /proc/net/udp, found by
// the socket's inode. It is an independent cross-check of
// RecvStats.KernelDrops for tests and diagnostics, and is current even when no
// datagram has arrived since the drops; it allocates and reads a file, so keep
// it off the hot path.
func (r *Receiver) ProcNetDrops() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return 0, r.cfg.opError("fstat", err)
	}
	f, err := os.Open("/proc/net/udp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	inode := strconv.FormatUint(st.Ino, 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
		fields := strings.Fields(sc.Text())
		if len(fields) >= 13 && fields[9] == inode {
			return strconv.ParseUint(fields[12], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, r.cfg.opError("read /proc/net/udp", fmt.Errorf("no socket with inode %s", inode))
}

// Close stops the receive loop and closes the socket. A blocked recvmmsg is
// woken by shutdown(2), which marks the socket shut down for reading and
// wakes its sleepers (Linux returns ENOTCONN for an unconnected UDP socket
// but wakes them all the same); SO_RCVTIMEO bounds the wait should it not.
// The descriptor is closed only after the loop has returned, so it cannot be
// reused under a call in flight. The consumer may drain slots already
// received; Wait then returns ud.ErrClosed. Close is idempotent.
func (r *Receiver) Close() error {
	if r.closed.Swap(true) {
		<-r.done
		return nil
	}
	_ = unix.Shutdown(r.fd, unix.SHUT_RD) // ENOTCONN expected, see above
	r.ring.Close()                        // wakes the loop if it waits for a free slot
	<-r.done
	r.fillMu.Lock() // no Fill in progress from here on
	defer r.fillMu.Unlock()
	if r.watching {
		r.cfg.Notifier.Unwatch(r.fd)
	}
	if err := unix.Close(r.fd); err != nil {
		return r.cfg.opError("close", err)
	}
	return nil
}
