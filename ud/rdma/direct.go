// This file is the Receiver without a receive loop (Direct, DirectSpin):
// the consumer's goroutine polls the completion queue itself (Fill), and in
// Direct mode sleeps in its Notifier's epoll set, where the completion
// channel's fd waits beside every other line's. It is built with the rdma
// tag on Linux with cgo.

//go:build linux && cgo && rdma

package rdma

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/ud"
)

// directState is what a Receiver without a receive loop keeps for its
// consumer. The Notifier watches one fd per receiver for its whole life: an
// epoll set of the receiver's own, holding the completion channel's fd
// (replaced by a rebuild) and an eventfd that an event asking for a rebuild
// writes, so that the consumer wakes to carry it out.
type directState struct {
	mu       sync.Mutex // Fill and Close
	epfd     int        // the receiver's own epoll set
	wakefd   int        // eventfd: a rebuild is pending
	ccfd     int        // the completion channel's fd in epfd, -1 for none
	watch    int        // index in the Notifier's watch set
	watching bool
	n        *ud.Notifier
	tail     uint64    // slots published so far
	full     bool      // a ring-full episode is going on
	nextTry  time.Time // a torn-down endpoint's next attempt to open
	buf      [8]byte
}

// startDirect sets up the consumer's side of a Receiver without a receive
// loop.
func (r *Receiver) startDirect() error {
	d := &directState{epfd: -1, wakefd: -1, ccfd: -1, n: r.cfg.Notifier}
	opErr := func(op string, err error) error {
		d.close(r)
		return &OpError{Op: op, Group: r.cfg.Group, Interface: r.cfg.Interface, Err: err}
	}
	var err error
	if d.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return opErr("epoll_create1", err)
	}
	if d.wakefd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return opErr("eventfd", err)
	}
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, d.wakefd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(d.wakefd)}); err != nil {
		return opErr("epoll_ctl eventfd", err)
	}
	if err := d.rewatch(r.x); err != nil {
		return opErr("epoll_ctl completion channel", err)
	}
	if d.n != nil && r.cfg.Mode == Direct {
		if d.watch, err = d.n.Watch(d.epfd); err != nil {
			return opErr("notifier watch", err)
		}
		d.watching = true
	}
	r.direct = d
	// An event that breaks the endpoint wakes the consumer, which tears
	// it down and rebuilds it in Fill.
	r.sup.wake = func() {
		one := [8]byte{1}
		_, _ = unix.Write(d.wakefd, one[:])
	}
	// Whatever completes before the first Fill raises no event: the CQ
	// is not armed yet, and the Notifier marks a new watch ready.
	return nil
}

// rewatch puts x's completion channel into the epoll set in place of the
// one before (gone with its endpoint: closing an fd leaves every epoll set).
func (d *directState) rewatch(x *endpoint) error {
	d.ccfd = x.channelFD()
	if d.ccfd < 0 {
		return nil // DirectSpin: no channel
	}
	err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, d.ccfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(d.ccfd)})
	if errors.Is(err, unix.EEXIST) {
		// The new channel got the old one's fd number, which the epoll
		// set may still hold if the close has not reached it.
		err = unix.EpollCtl(d.epfd, unix.EPOLL_CTL_MOD, d.ccfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(d.ccfd)})
	}
	if err != nil {
		return fmt.Errorf("epoll_ctl add the completion channel fd %d: %w", d.ccfd, err)
	}
	return nil
}

func (d *directState) close(r *Receiver) {
	d.mu.Lock() // no Fill in progress from here on
	defer d.mu.Unlock()
	if d.watching {
		d.n.Unwatch(d.epfd)
		d.watching = false
	}
	for _, fd := range []*int{&d.wakefd, &d.epfd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// Fill receives what the completion queue holds into the ring, publishes
// it and returns how many datagrams it received (ud.Filler). Consumer only.
// A receiver with a receive loop (Blocking, BusyPoll) returns 0.
//
// In Direct mode, when the completion queue is empty, Fill arms it and
// clears the receiver's readiness mark, and the consumer's Notifier sleeps
// in epoll_wait until the channel signals a completion. An event that breaks
// the endpoint is carried out here too: the endpoint is torn down at once,
// and opened again by a later Fill once the port is ACTIVE (checked every
// Config.RebuildPoll), so Fill never waits for the port.
func (r *Receiver) Fill() int {
	d := r.direct
	if d == nil {
		return 0
	}
	if d.watching && !d.n.Ready(d.watch) {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.closed.Load() || d.epfd < 0 {
		return 0
	}
	if d.wakefd >= 0 {
		_, _ = unix.Read(d.wakefd, d.buf[:]) // a wake, taken
	}
	if _, ok := r.sup.pending(); ok && !r.down {
		r.tearDownPending()
		d.nextTry = time.Now() // try at once: a queue pair error needs no wait
	}
	if r.down {
		if now := time.Now(); now.Before(d.nextTry) || !r.reopen(d.tail) {
			if !now.Before(d.nextTry) {
				d.nextTry = now.Add(r.cfg.RebuildPoll)
			}
			return 0 // still down: stays marked ready, tried at the next Fill
		}
	}
	if r.ring.Free() == 0 {
		// The consumer holds every slot: the receive queue is empty. The
		// receiver stays marked ready; the next Fill after a release
		// receives.
		if !d.full {
			d.full = true
			r.starvedAt.Store(time.Now().UnixNano())
			r.ringFull.Add(1)
		}
		return 0
	}
	if d.full {
		r.endStarved(time.Now().UnixNano())
		d.full = false
	}
	x := r.x
	if d.ccfd >= 0 {
		// Take the channel's events (acknowledged in batches), so that
		// epoll does not report it readable again for them.
		for {
			k, err := x.takeCQEvent()
			if err != nil {
				r.fail(err)
				return 0
			}
			if k == 0 {
				break
			}
		}
	}
	n := x.pollRecv()
	if n == 0 && d.ccfd >= 0 {
		var err error
		if n, err = x.armRecv(); err != nil {
			r.fail(err)
			return 0
		}
		if n == 0 && d.watching {
			d.n.SetReady(d.watch, false) // armed and drained: wait for epoll
		}
	}
	if n <= 0 {
		if n < 0 {
			r.fail(fmt.Errorf("ibv_poll_cq failed"))
		}
		return 0
	}
	r.polls.Add(1)
	good, nbytes, err := r.fill(n, d.tail)
	r.publish(good, nbytes)
	d.tail += uint64(good)
	if err != nil {
		// A failed receive completion: the queue pair is in the error
		// state. The next Fill rebuilds it.
		r.sup.event(EventCompletionError, err.Error())
	}
	return good
}

// Wait blocks until the ring holds a datagram or timeout passes, like
// ud.Lender's, and returns ud.ErrClosed once the receiver is closed and
// drained. Consumer only. Without a receive loop it receives itself: it
// fills, and in Direct mode sleeps in epoll_wait on the completion channel
// (the receiver's own epoll set) in between.
func (r *Receiver) Wait(timeout time.Duration) error {
	d := r.direct
	if d == nil {
		return r.Lender.Wait(timeout)
	}
	if r.ring.Len() > 0 {
		return nil
	}
	if r.closed.Load() {
		return ud.ErrClosed
	}
	deadline := time.Now().Add(timeout)
	for {
		if d.watching {
			d.n.SetReady(d.watch, true)
		}
		if r.Fill() > 0 || r.ring.Len() > 0 {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 || r.closed.Load() {
			break
		}
		if r.cfg.Mode == DirectSpin || r.down {
			time.Sleep(min(left, time.Millisecond))
			continue
		}
		d.mu.Lock()
		epfd := d.epfd
		d.mu.Unlock()
		if epfd < 0 {
			break
		}
		ms := int((left + time.Millisecond - 1) / time.Millisecond)
		var ev [2]unix.EpollEvent
		_, _ = unix.EpollWait(epfd, ev[:], max(ms, 1))
	}
	if r.closed.Load() && r.ring.Len() == 0 {
		return ud.ErrClosed
	}
	return nil
}

var _ ud.Filler = (*Receiver)(nil)
