package udp

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// groBufSize is the size of each GRO receive buffer: the largest
	// buffer the kernel hands a UDP_GRO socket (a UDP GSO write of up to
	// 64 KiB arrives whole).
	groBufSize = 1 << 16
	// groCtrlSpace is the control buffer per GRO receive buffer: room for
	// SO_RXQ_OVFL and UDP_GRO, each a cmsghdr and a 32-bit value.
	groCtrlSpace = 2 * ctrlSpace
)

// groRecv holds a GRO receiver's buffers (Config.GRO) and the one call's
// worth of received buffers it has not yet handed to the ring.
//
// With UDP_GRO set, a run of datagrams sent by one UDP GSO write reaches
// the socket as one buffer of up to 64 KiB, with a control message that
// gives the segment size. Ring slots hold one datagram each, so each
// buffer is received here and cut into its datagrams, one copy each into
// the ring's slots. What the ring has no room for waits here, and nothing
// more is received until it has gone.
type groRecv struct {
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	bufs []byte // len(hdrs) buffers of groBufSize
	ctrl []byte // len(hdrs) control buffers of groCtrlSpace

	got int   // buffers the last call filled
	i   int   // the buffer being handed out
	off int   // the next datagram's offset in buffer i
	seg int   // buffer i's segment size (its length when it was not coalesced)
	now int64 // receive time of the last call (one clock read a call)
}

// newGRORecv allocates n buffers and their descriptors.
func newGRORecv(n int) *groRecv {
	g := &groRecv{
		hdrs: make([]unix.Mmsghdr, n),
		iovs: make([]unix.Iovec, n),
		bufs: make([]byte, n*groBufSize),
		ctrl: make([]byte, n*groCtrlSpace),
	}
	for k := range g.hdrs {
		g.iovs[k].Base = &g.bufs[k*groBufSize]
		g.iovs[k].SetLen(groBufSize)
		h := &g.hdrs[k].Hdr
		h.Iov = &g.iovs[k]
		h.Iovlen = 1
		h.Control = &g.ctrl[k*groCtrlSpace]
	}
	return g
}

// pending reports whether received datagrams wait for ring slots.
func (g *groRecv) pending() bool { return g.i < g.got }

// enableGRO asks the kernel for UDP GRO on fd. A kernel without it
// (ENOPROTOOPT, before Linux 5.0) leaves the socket as it was and the
// receiver receives datagram by datagram.
func enableGRO(c *Config, fd int) (bool, error) {
	err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EINVAL):
		return false, nil
	default:
		return false, c.opError("setsockopt UDP_GRO", err)
	}
}

// receiveGRO receives up to the batch's worth of buffers (flags as for
// recvmmsg; raw for the non-blocking modes) and hands out what the ring
// has room for. It returns the datagrams published and the call's errno.
func (r *Receiver) receiveGRO(raw bool, flags int) (int, unix.Errno) {
	g := r.gro
	n := r.cfg.Batch
	for k := range n {
		g.hdrs[k].Hdr.SetControllen(groCtrlSpace)
		g.hdrs[k].Hdr.Flags = 0
	}
	var got int
	var errno unix.Errno
	if raw {
		got, errno = recvmmsgRaw(r.fd, &g.hdrs[0], n)
	} else {
		got, errno = recvmmsg(r.fd, &g.hdrs[0], n, flags)
	}
	if errno != 0 || got <= 0 {
		return 0, errno
	}
	if r.closed.Load() {
		return 0, 0 // see run: datagrams of length 0 after shutdown(2)
	}
	r.syscalls.Add(1)
	g.got, g.i, g.off = got, 0, 0
	g.now = time.Now().UnixNano() // one clock read per call, as deliver
	g.seg = r.groSegment(0)
	return r.spillGRO(), 0
}

// groSegment reads buffer k's control messages (readControl) and returns
// its segment size: a buffer without UDP_GRO is one datagram.
func (r *Receiver) groSegment(k int) int {
	g := r.gro
	h := &g.hdrs[k].Hdr
	if seg := r.readControl(g.ctrl[k*groCtrlSpace : k*groCtrlSpace+min(int(h.Controllen), groCtrlSpace)]); seg > 0 {
		return seg
	}
	return int(g.hdrs[k].Len)
}

// spillGRO copies the received datagrams that wait into free ring slots,
// as many as there are, publishes them and returns how many it published.
// A datagram longer than a slot is dropped and counted as truncated.
func (r *Receiver) spillGRO() int {
	g := r.gro
	w := 0
	var nbytes, trunc, coalesced uint64
	for g.i < g.got {
		h := &g.hdrs[g.i]
		buf := g.bufs[g.i*groBufSize : g.i*groBufSize+int(h.Len)]
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			// Not expected: a buffer holds the largest GRO buffer.
			trunc++
			r.nextGROBuffer()
			continue
		}
		if len(buf) == 0 {
			// An empty datagram is one too.
			s := r.ring.FreeSlot(w)
			if s == nil {
				break
			}
			s.N, s.RecvNs = 0, g.now
			w++
			r.nextGROBuffer()
			continue
		}
		seg := max(g.seg, 1)
		for g.off < len(buf) {
			d := buf[g.off:min(g.off+seg, len(buf))]
			if len(d) > r.cfg.MaxDatagram {
				trunc++
				g.off += len(d)
				continue
			}
			s := r.ring.FreeSlot(w)
			if s == nil {
				goto out
			}
			s.N = copy(s.Buf, d)
			s.RecvNs = g.now
			nbytes += uint64(len(d))
			if seg < len(buf) {
				coalesced++
			}
			w++
			g.off += len(d)
		}
		r.nextGROBuffer()
	}
out:
	r.datagrams.Add(uint64(w))
	r.bytes.Add(nbytes)
	if coalesced > 0 {
		r.coalesced.Add(coalesced)
	}
	if trunc > 0 {
		r.truncated.Add(trunc)
	}
	storeMax(&r.kernelDrops, r.drops)
	r.ring.Publish(w)
	return w
}

// nextGROBuffer moves the hand-out position to the next received buffer.
func (r *Receiver) nextGROBuffer() {
	g := r.gro
	g.i++
	g.off = 0
	if g.i < g.got {
		g.seg = r.groSegment(g.i)
	}
}
