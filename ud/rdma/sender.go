// This file is built with the rdma tag on Linux with cgo.

//go:build linux && cgo && rdma

package rdma

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickcast/tickcast/ud"
)

// sendStallLimit bounds how long Send and Close wait for send completions
// that free slots before they give up.
const sendStallLimit = time.Second

// Sender sends datagrams to one multicast group as UD messages. It
// implements ud.Sender.
type Sender struct {
	cfg Config
	x   *endpoint

	// mu serializes Send (which owns the send slots and seq) with Close.
	mu     sync.Mutex
	seq    uint64 // datagrams posted
	done   uint64 // datagrams whose send completed
	closed atomic.Bool

	datagrams, bytes, posts, errors, retries atomic.Uint64

	sup *supervisor // events observed
}

var _ ud.Sender = (*Sender)(nil)

// NewSender opens an endpoint on the RDMA device behind cfg.Interface and
// joins cfg.Group (send-only where supported). The error wraps ErrNoDevice,
// ErrPortNotActive, ErrTooLarge (cfg.MaxDatagram above the active MTU) or
// ErrJoin when that is the cause.
func NewSender(cfg Config) (*Sender, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	sup := &supervisor{role: "sender", cfg: &c, log: c.logger()}
	x, err := openEndpoint(&c, true, sup)
	if err != nil {
		return nil, err
	}
	s := &Sender{cfg: c, x: x, sup: sup}
	sup.cfg = &s.cfg
	return s, nil
}

// MaxDatagram returns the largest datagram Send accepts: the port's active
// MTU, or Config.MaxDatagram if that is smaller.
func (s *Sender) MaxDatagram() int { return s.x.mtu }

// MaxInline returns the largest datagram sent inline (copied into the work
// request by the provider).
func (s *Sender) MaxInline() int { return s.x.maxInline }

// Device returns the device and port the sender uses.
func (s *Sender) Device() Device { return s.x.dev }

// SendOnly reports whether the join was a send-only join.
func (s *Sender) SendOnly() bool { return s.x.sendOnly }

// QKey returns the group's qkey, from the join event.
func (s *Sender) QKey() uint32 { return s.x.qkey }

// RemoteQPN returns the destination QPN, from the join event (MulticastQPN).
func (s *Sender) RemoteQPN() uint32 { return s.x.remoteQPN }

// Send transmits the datagrams in order, up to Config.Batch per post list.
// A datagram longer than MaxDatagram fails with ErrTooLarge before it is
// sent; the datagrams before it are sent. A datagram is copied into a send
// slot of the registered region, so the caller may reuse its buffers as soon
// as Send returns. Send does not allocate. Concurrent calls are serialized.
func (s *Sender) Send(datagrams [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ud.ErrClosed
	}
	x, batch, nsend := s.x, s.cfg.Batch, uint64(s.cfg.SendSlots)
	for len(datagrams) > 0 {
		limit := min(batch, len(datagrams))
		if err := s.reclaim(nsend - uint64(limit)); err != nil {
			return err
		}
		n, tooLarge := 0, false
		var nbytes uint64
		for n < limit {
			d := datagrams[n]
			if len(d) > x.mtu {
				tooLarge = true
				break
			}
			off := x.sendOff + int((s.seq+uint64(n))%nsend)*x.sendStride
			copy(x.mem[off:off+len(d)], d)
			x.sLen[n] = uint32(len(d))
			nbytes += uint64(len(d))
			n++
		}
		if n > 0 {
			if err := x.postSend(s.seq, n); err != nil {
				s.errors.Add(1)
				return s.opError("ibv_post_send", err)
			}
			s.seq += uint64(n)
			s.posts.Add(1)
			s.datagrams.Add(uint64(n))
			s.bytes.Add(nbytes)
		}
		if tooLarge {
			s.errors.Add(1)
			return s.opError("send", fmt.Errorf("%w: %d bytes, MTU %d on %s port %d",
				ErrTooLarge, len(datagrams[n]), x.mtu, x.dev.Name, x.dev.Port))
		}
		datagrams = datagrams[n:]
	}
	return nil
}

// reclaim polls send completions until at most maxOutstanding datagrams are
// posted and not yet complete, so that their slots can be reused.
func (s *Sender) reclaim(maxOutstanding uint64) error {
	var stalled time.Time
	for spins := 0; s.seq-s.done > maxOutstanding; spins++ {
		done, err := s.x.pollSend()
		if err != nil {
			s.errors.Add(1)
			s.sup.event(EventCompletionError, "send completion: "+err.Error())
			return s.opError("send completion", err)
		}
		if done > s.done {
			s.done, spins, stalled = done, 0, time.Time{}
			continue
		}
		s.retries.Add(1)
		if spins < 64 {
			continue
		}
		if stalled.IsZero() {
			stalled = time.Now()
		} else if time.Since(stalled) > sendStallLimit {
			s.errors.Add(1)
			return s.opError("send completion", fmt.Errorf("no send completion for %v with %d datagrams outstanding", sendStallLimit, s.seq-s.done))
		}
		runtime.Gosched()
	}
	return nil
}

func (s *Sender) opError(op string, err error) error {
	return &OpError{Op: op, Group: s.cfg.Group, Interface: s.cfg.Interface, Err: err}
}

// Health returns the device and rdma_cm events the sender observed.
func (s *Sender) Health() Health { return s.sup.h.snapshot() }

// Stats returns cumulative counters; Syscalls counts post lists.
func (s *Sender) Stats() ud.SendStats {
	return ud.SendStats{
		Datagrams: s.datagrams.Load(),
		Bytes:     s.bytes.Load(),
		Syscalls:  s.posts.Load(),
		Errors:    s.errors.Load(),
		Retries:   s.retries.Load(),
	}
}

// Close waits (up to a second) for posted datagrams to leave, then leaves
// the group and releases every verbs object. It is idempotent.
func (s *Sender) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	err := s.reclaim(0)
	s.x.close()
	s.x.freeMem()
	return err
}
