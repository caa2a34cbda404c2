// This file is built with the rdma tag on Linux with cgo.

//go:build linux && cgo && rdma

package rdma

import (
	"errors"
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

	// mu serializes Send (which owns the send slots and seq) with Close
	// and with tearing the endpoint down.
	mu        sync.Mutex
	seq       uint64 // datagrams posted
	done      uint64 // datagrams whose send completed
	closed    atomic.Bool
	down      bool      // the endpoint is torn down, waiting for the port
	downCause Event     // what tore it down
	downSince time.Time // when that happened
	nextTry   time.Time // when a down sender next checks the port

	sup *supervisor // events and rebuilds

	datagrams, bytes, posts, errors, retries atomic.Uint64
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
	sup := newSupervisor("sender", &c)
	x, err := openEndpoint(&c, true, sup)
	if err != nil {
		return nil, err
	}
	s := &Sender{cfg: c, x: x, sup: sup}
	sup.cfg = &s.cfg
	// An event that breaks the endpoint tears it down at once, not at
	// the next Send: a removed device waits for its objects to go.
	sup.wake = func() { go s.tearDownPending() }
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
	if _, ok := s.sup.pending(); ok || s.down {
		if err := s.recover(); err != nil {
			return err
		}
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
				s.sup.event(EventCompletionError, "ibv_post_send: "+err.Error())
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
//
// It polls once even when enough slots are free: a queue pair that went to
// the error state shows as a flushed send completion at the next Send, not
// only when the slots run out (at a low rate, seconds later).
func (s *Sender) reclaim(maxOutstanding uint64) error {
	if s.seq > s.done {
		if err := s.pollOnce(); err != nil {
			return err
		}
	}
	var stalled time.Time
	for spins := 0; s.seq-s.done > maxOutstanding; spins++ {
		before := s.done
		if err := s.pollOnce(); err != nil {
			return err
		}
		if s.done > before {
			spins, stalled = 0, time.Time{}
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

// pollOnce takes the send completions there are; a failed one is an
// EventCompletionError (the endpoint is rebuilt at the next Send).
func (s *Sender) pollOnce() error {
	done, err := s.x.pollSend()
	if err != nil {
		s.errors.Add(1)
		s.sup.event(EventCompletionError, "send completion: "+err.Error())
		return s.opError("send completion", err)
	}
	s.done = max(s.done, done)
	return nil
}

func (s *Sender) opError(op string, err error) error {
	return &OpError{Op: op, Group: s.cfg.Group, Interface: s.cfg.Interface, Err: err}
}

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
	var err error
	if !s.down {
		err = s.reclaim(0)
	}
	s.x.close()
	s.x.freeMem()
	return err
}

// Health returns the events the sender observed and the rebuilds of its
// endpoint.
func (s *Sender) Health() Health { return s.sup.h.snapshot() }

// tearDownPending tears the endpoint down if an event asked for it and
// Send has not done so yet.
func (s *Sender) tearDownPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sup.pending(); ok && !s.down && !s.closed.Load() {
		s.tearDown()
	}
}

// tearDown destroys the endpoint's verbs objects and takes over the
// pending event as the cause of the outage (s.mu held).
func (s *Sender) tearDown() {
	cause, _ := s.sup.pending()
	s.downCause, s.downSince = cause, time.Unix(0, s.sup.since.Load())
	s.sup.cause.Store(0)
	removed := cause == EventDeviceRemoval || cause == EventDeviceFatal
	s.x.tearDown(!removed)
	s.down = true
	s.sup.h.down.Store(true)
	if removed {
		syncDevices()
	}
	s.sup.log.Warn("rdma endpoint torn down, waiting for the port", "cause", cause.String(), "role", "sender",
		"group", s.cfg.Group.String(), "iface", s.cfg.Interface.String())
}

// recover tears the endpoint down if an event asked for it, and opens it
// again when the port is ACTIVE, checking at most every
// Config.RebuildPoll. While the port is not back, Send fails with an error
// wrapping ErrPortNotActive and sends nothing: the datagrams are lost, and
// subscribers see a gap (s.mu held).
func (s *Sender) recover() error {
	if !s.down {
		s.tearDown()
	} else {
		// Events while down (the port coming back, more errors) need
		// no rebuild of their own: the next one opens afresh.
		s.sup.cause.Store(0)
	}
	waiting := func() error {
		return s.opError("send", fmt.Errorf("%w: endpoint torn down after %s, waiting for the port", ErrPortNotActive, s.downCause))
	}
	now := time.Now()
	if now.Before(s.nextTry) {
		return waiting()
	}
	s.nextTry = now.Add(s.cfg.RebuildPoll)
	if d, err := LookupDevice(s.cfg.Interface); err != nil || !d.Active {
		if errors.Is(err, ErrNoDevice) {
			syncDevices()
		}
		return waiting()
	}
	if err := s.x.open(&s.cfg, true, 0, -1); err != nil {
		s.sup.h.rebuildFailed()
		return err
	}
	s.seq, s.done, s.down = 0, 0, false
	s.sup.h.down.Store(false)
	outage := time.Since(s.downSince)
	s.sup.h.rebuilt(outage)
	s.sup.log.Info("rdma endpoint rebuilt", "cause", s.downCause.String(), "outage", outage.String(), "role", "sender",
		"group", s.cfg.Group.String(), "iface", s.cfg.Interface.String(), "device", s.x.dev.Name, "port", s.x.dev.Port)
	return nil
}
