package udp

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/ud"
)

// sendRetryLimit bounds how long Send keeps retrying after transient errors
// (EAGAIN, ENOBUFS, EINTR) without a single datagram getting through, before
// it gives up and returns the error.
const sendRetryLimit = time.Second

// Sender sends datagrams to one multicast group with batched sendmmsg. It
// implements ud.Sender and ud.Segmenter.
//
// The socket is connected to group:port and its multicast interface is always
// set explicitly (IP_MULTICAST_IF), so the routing table's default route never
// decides where multicast goes.
//
// With Config.GSO, a run of datagrams of one length (the
// last of the run may be shorter) goes out as one buffer that the kernel cuts
// into datagrams (UDP GSO, UDP_SEGMENT): one pass through the stack for the
// run instead of one per datagram. Receivers see ordinary datagrams. A kernel
// that refuses it (no UDP GSO, a device without checksum offload) turns it
// off for the Sender's life, and the refused datagrams are sent one by one.
type Sender struct {
	cfg Config
	fd  int

	// mu serializes Send (which owns hdrs, iovs, cmsgs and segs) with Close.
	mu sync.Mutex
	// hdrs, iovs and cmsgs are reused by every Send: iovs[i] is aimed at
	// the caller's i-th datagram for the duration of one call, and a header
	// covers one datagram or a run of them (segs[h] of them), with a
	// UDP_SEGMENT control message in cmsgs for a run. Allocating them once
	// is what makes Send allocation-free.
	hdrs   []unix.Mmsghdr
	iovs   []unix.Iovec
	cmsgs  []byte
	segs   []int
	gso    atomic.Bool
	closed atomic.Bool

	datagrams, bytes, syscalls, errors, retries, segmented atomic.Uint64
}

var (
	_ ud.Sender    = (*Sender)(nil)
	_ ud.Segmenter = (*Sender)(nil)
)

// Limits of one segmentation-offload write: the kernel's UDP_MAX_SEGMENTS
// (64 on every kernel with UDP GSO) and the largest UDP payload.
const (
	maxSegments     = 64
	maxSegmentBytes = MaxDatagramLimit
)

// cmsgSpace is the room for one UDP_SEGMENT control message (a uint16).
var cmsgSpace = unix.CmsgSpace(2)

// NewSender opens a socket that sends to cfg.Group:cfg.Port out of
// cfg.Interface with cfg.TTL and multicast loop as configured.
func NewSender(cfg Config) (*Sender, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	fd, err := newSocket(&c, false)
	if err != nil {
		return nil, err
	}
	s := &Sender{
		cfg:   c,
		fd:    fd,
		hdrs:  make([]unix.Mmsghdr, c.Batch),
		iovs:  make([]unix.Iovec, c.Batch),
		cmsgs: make([]byte, c.Batch*cmsgSpace),
		segs:  make([]int, c.Batch),
	}
	if err := s.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	for h := range s.hdrs {
		cm := (*unix.Cmsghdr)(unsafe.Pointer(&s.cmsgs[h*cmsgSpace]))
		cm.Level = unix.IPPROTO_UDP
		cm.Type = unix.UDP_SEGMENT
		cm.SetLen(unix.CmsgLen(2))
	}
	// A kernel with UDP GSO knows the option; one without refuses it here
	// rather than on the first send.
	if c.GSO {
		if _, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT); err == nil {
			s.gso.Store(true)
		}
	}
	return s, nil
}

func (s *Sender) setup() error {
	c, fd := &s.cfg, s.fd
	ifAddr := c.Interface.As4()
	// Always set the outgoing multicast interface: without it the kernel
	// picks the interface of the route to the group, which on most hosts is
	// the default route.
	if err := unix.SetsockoptInet4Addr(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, ifAddr); err != nil {
		return c.opError("setsockopt IP_MULTICAST_IF", err)
	}
	if err := setInt(c, fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, "IP_MULTICAST_TTL", c.TTL); err != nil {
		return err
	}
	loop := 1
	if c.DisableLoop {
		loop = 0
	}
	if err := setInt(c, fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, "IP_MULTICAST_LOOP", loop); err != nil {
		return err
	}
	// Binding to the interface address fixes the source address too.
	if err := unix.Bind(fd, sockaddr(ifAddr, 0)); err != nil {
		return c.opError("bind", err)
	}
	if err := unix.Connect(fd, sockaddr(c.Group.As4(), c.Port)); err != nil {
		return c.opError("connect", err)
	}
	return nil
}

// MaxDatagram returns Config.MaxDatagram, the largest datagram Send accepts.
func (s *Sender) MaxDatagram() int { return s.cfg.MaxDatagram }

// Segments reports whether Send sends runs of equal-length datagrams by
// segmentation offload (UDP GSO): false without Config.GSO, on a kernel
// without it, and after the kernel refused it once.
func (s *Sender) Segments() bool { return s.gso.Load() }

// Send transmits the datagrams in order, up to Config.Batch per sendmmsg
// call, runs of equal length by segmentation offload (see Sender). A partial
// send continues from the first unsent datagram; EAGAIN, ENOBUFS and EINTR
// are retried (counted in SendStats.Retries) for up to a second without
// progress. It returns the first error, as an *OpError; the datagrams before
// the failing one were sent. A datagram longer than MaxDatagram fails with
// ErrTooLarge before it is sent. Send does not allocate. Concurrent calls
// are serialized.
func (s *Sender) Send(datagrams [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ud.ErrClosed
	}
	for len(datagrams) > 0 {
		nh, nd, tooLarge := s.pack(datagrams)
		sent, err := s.sendBatch(nh)
		// Drop the references into the caller's buffers so they are not
		// kept alive until the next Send.
		for i := 0; i < nd; i++ {
			s.iovs[i].Base = nil
		}
		if err == errSegmentsRefused {
			// The kernel refused a segmented write and sent none of it:
			// send the rest one datagram a write from now on.
			s.gso.Store(false)
			datagrams = datagrams[sent:]
			continue
		}
		if err != nil {
			return err
		}
		if tooLarge {
			s.errors.Add(1)
			return s.cfg.opError("send", fmt.Errorf("%w: %d bytes, MaxDatagram %d", ErrTooLarge, len(datagrams[nd]), s.cfg.MaxDatagram))
		}
		datagrams = datagrams[nd:]
	}
	return nil
}

// pack aims the headers at the first datagrams, up to Config.Batch of
// them: one header per datagram, or per run of datagrams of one length
// while segmentation offload is on. It returns the headers and datagrams it
// covered, and whether it stopped at one longer than MaxDatagram.
func (s *Sender) pack(datagrams [][]byte) (nh, nd int, tooLarge bool) {
	gso := s.gso.Load()
	for nh < len(s.hdrs) && nd < len(datagrams) && nd < len(s.iovs) {
		first := datagrams[nd]
		if len(first) > s.cfg.MaxDatagram {
			return nh, nd, true
		}
		s.aim(nd, first)
		run, total := 1, len(first)
		// A run is datagrams of the first one's length, ended by a
		// shorter one: the kernel cuts a buffer into pieces of one size,
		// the last of which may be short.
		for gso && len(first) > 0 && run < maxSegments && nd+run < len(datagrams) && nd+run < len(s.iovs) {
			next := datagrams[nd+run]
			if len(next) == 0 || len(next) > len(first) || total+len(next) > maxSegmentBytes {
				break
			}
			s.aim(nd+run, next)
			run++
			total += len(next)
			if len(next) < len(first) {
				break
			}
		}
		h := &s.hdrs[nh].Hdr
		h.Iov = &s.iovs[nd]
		h.SetIovlen(run)
		if run > 1 {
			cm := s.cmsgs[nh*cmsgSpace : (nh+1)*cmsgSpace]
			*(*uint16)(unsafe.Pointer(&cm[unix.CmsgLen(0)])) = uint16(len(first))
			h.Control = &cm[0]
			h.SetControllen(cmsgSpace)
		} else {
			h.Control = nil
			h.SetControllen(0)
		}
		s.segs[nh] = run
		nh++
		nd += run
	}
	return nh, nd, false
}

// aim points iovec i at d.
func (s *Sender) aim(i int, d []byte) {
	iov := &s.iovs[i]
	iov.Base = nil
	if len(d) > 0 {
		iov.Base = &d[0]
	}
	iov.SetLen(len(d))
}

// errSegmentsRefused is sendBatch's report that the kernel refused a
// segmented write: nothing of that header was sent.
var errSegmentsRefused = errors.New("segmentation offload refused")

// sendBatch sends the first nh headers, already aimed by pack, until all of
// them are sent or a non-transient error occurs. It returns the datagrams
// sent.
func (s *Sender) sendBatch(nh int) (int, error) {
	off, sent := 0, 0
	var stalled time.Time // when the current run of failed attempts began
	for attempt := 0; off < nh; {
		m, errno := sendmmsg(s.fd, &s.hdrs[off], nh-off)
		s.syscalls.Add(1)
		if errno != 0 {
			switch errno {
			case unix.EAGAIN, unix.ENOBUFS, unix.EINTR:
				// The datagram was not taken: try again. A full device
				// queue (ENOBUFS) clears within microseconds, so yield
				// first and only sleep if it persists.
				if stalled.IsZero() {
					stalled = time.Now()
				} else if time.Since(stalled) > sendRetryLimit {
					s.errors.Add(1)
					return sent, s.cfg.opError("sendmmsg", errno)
				}
				s.retries.Add(1)
				attempt++
				if attempt < 64 {
					runtime.Gosched()
				} else {
					time.Sleep(100 * time.Microsecond)
				}
				continue
			case unix.EINVAL, unix.EIO, unix.EMSGSIZE, unix.EOPNOTSUPP, unix.ENOPROTOOPT:
				if s.segs[off] > 1 {
					return sent, errSegmentsRefused
				}
			}
			if s.closed.Load() {
				return sent, ud.ErrClosed
			}
			s.errors.Add(1)
			return sent, s.cfg.opError("sendmmsg", errno)
		}
		var ndg, nbytes, nseg uint64
		for h := off; h < off+m; h++ {
			ndg += uint64(s.segs[h])
			if s.segs[h] > 1 {
				nseg += uint64(s.segs[h])
			}
			nbytes += uint64(s.hdrs[h].Len)
		}
		s.datagrams.Add(ndg)
		s.bytes.Add(nbytes)
		s.segmented.Add(nseg)
		sent += int(ndg)
		off += m
		if off < nh {
			// Partial send: the kernel stopped early (typically the send
			// buffer filled). Continue from the first unsent header.
			s.retries.Add(1)
		}
		stalled, attempt = time.Time{}, 0
	}
	return sent, nil
}

// Stats returns cumulative counters. It is safe to call concurrently with
// Send.
func (s *Sender) Stats() ud.SendStats {
	return ud.SendStats{
		Datagrams: s.datagrams.Load(),
		Bytes:     s.bytes.Load(),
		Syscalls:  s.syscalls.Load(),
		Errors:    s.errors.Load(),
		Retries:   s.retries.Load(),
		Segmented: s.segmented.Load(),
	}
}

// Close closes the socket. Send after Close returns ud.ErrClosed. Close is
// idempotent.
func (s *Sender) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	// Wait for a Send in progress, so the descriptor is not closed (and
	// possibly reused) under it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := unix.Close(s.fd); err != nil {
		return s.cfg.opError("close", err)
	}
	return nil
}
