package udp

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/ud"
)

// sendRetryLimit bounds how long Send keeps retrying after transient errors
// (EAGAIN, ENOBUFS, EINTR) without a single datagram getting through, before
// it gives up and returns the error.
const sendRetryLimit = time.Second

// Sender sends datagrams to one multicast group with batched sendmmsg. It
// implements ud.Sender.
//
// The socket is connected to group:port and its multicast interface is always
// set explicitly (IP_MULTICAST_IF), so the routing table's default route never
// decides where multicast goes.
type Sender struct {
	cfg Config
	fd  int

	// mu serializes Send (which owns hdrs and iovs) with Close.
	mu sync.Mutex
	// hdrs and iovs are reused by every Send: hdrs[i] points at iovs[i],
	// which is aimed at the caller's datagram for the duration of one call.
	// Allocating them once is what makes Send allocation-free.
	hdrs   []unix.Mmsghdr
	iovs   []unix.Iovec
	closed atomic.Bool

	datagrams, bytes, syscalls, errors, retries atomic.Uint64
}

var _ ud.Sender = (*Sender)(nil)

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
		cfg:  c,
		fd:   fd,
		hdrs: make([]unix.Mmsghdr, c.Batch),
		iovs: make([]unix.Iovec, c.Batch),
	}
	if err := s.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	for i := range s.hdrs {
		s.hdrs[i].Hdr.Iov = &s.iovs[i]
		s.hdrs[i].Hdr.Iovlen = 1
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

// Send transmits the datagrams in order, up to Config.Batch per sendmmsg
// call. A partial send continues from the first unsent datagram; EAGAIN,
// ENOBUFS and EINTR are retried (counted in SendStats.Retries) for up to a
// second without progress. It returns the first error, as an *OpError; the
// datagrams before the failing one were sent. A datagram longer than
// MaxDatagram fails with ErrTooLarge before it is sent. Send does not
// allocate. Concurrent calls are serialized.
func (s *Sender) Send(datagrams [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ud.ErrClosed
	}
	for len(datagrams) > 0 {
		n, tooLarge := 0, false
		for n < len(s.hdrs) && n < len(datagrams) {
			d := datagrams[n]
			if len(d) > s.cfg.MaxDatagram {
				tooLarge = true
				break
			}
			iov := &s.iovs[n]
			iov.Base = nil
			if len(d) > 0 {
				iov.Base = &d[0]
			}
			iov.SetLen(len(d))
			n++
		}
		err := s.sendBatch(datagrams[:n])
		// Drop the references into the caller's buffers so they are not
		// kept alive until the next Send.
		for i := 0; i < n; i++ {
			s.iovs[i].Base = nil
		}
		if err != nil {
			return err
		}
		if tooLarge {
			s.errors.Add(1)
			return s.cfg.opError("send", fmt.Errorf("%w: %d bytes, MaxDatagram %d", ErrTooLarge, len(datagrams[n]), s.cfg.MaxDatagram))
		}
		datagrams = datagrams[n:]
	}
	return nil
}

// sendBatch sends batch, whose iovecs are already set in s.iovs, until all of
// it is sent or a non-transient error occurs.
func (s *Sender) sendBatch(batch [][]byte) error {
	off := 0
	var stalled time.Time // when the current run of failed attempts began
	for attempt := 0; off < len(batch); {
		m, errno := sendmmsg(s.fd, &s.hdrs[off], len(batch)-off)
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
					return s.cfg.opError("sendmmsg", errno)
				}
				s.retries.Add(1)
				attempt++
				if attempt < 64 {
					runtime.Gosched()
				} else {
					time.Sleep(100 * time.Microsecond)
				}
				continue
			}
			if s.closed.Load() {
				return ud.ErrClosed
			}
			s.errors.Add(1)
			return s.cfg.opError("sendmmsg", errno)
		}
		var nbytes uint64
		for _, d := range batch[off : off+m] {
			nbytes += uint64(len(d))
		}
		s.datagrams.Add(uint64(m))
		s.bytes.Add(nbytes)
		off += m
		if off < len(batch) {
			// Partial send: the kernel stopped early (typically the send
			// buffer filled). Continue from the first unsent datagram.
			s.retries.Add(1)
		}
		stalled, attempt = time.Time{}, 0
	}
	return nil
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
