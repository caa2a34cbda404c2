// This file is built with the rdma tag on Linux with cgo.

//go:build linux && cgo && rdma

package rdma

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

const (
	// waitMs is how long a Blocking receive loop with every slot lent
	// out sleeps before it re-checks whether it was closed.
	waitMs = 100
	// busyYieldPolls is how many empty polls in a row a BusyPoll loop
	// makes before it yields with runtime.Gosched.
	busyYieldPolls = 1024
	// repostGroup is the most released slots Release gathers before it
	// posts them.
	repostGroup = 8
)

// Receiver receives datagrams from one multicast group into a ring of slots
// that live in the registered memory region. It implements ud.Receiver.
type Receiver struct {
	ud.Lender // Peek, Wait, RingLen, RingCap; Release reposts

	cfg  Config
	x    *endpoint
	ring *ud.Ring

	closed atomic.Bool
	done   chan struct{} // closed when the receive loop has returned
	err    atomic.Pointer[error]

	// Reposting, done by the consumer in Release. postMu keeps Close and
	// a rebuild from destroying the queue pair under a post; down (under
	// postMu) says the endpoint is torn down, waiting for a rebuild.
	postMu    sync.Mutex
	down      bool
	released  atomic.Uint64 // slots released so far (written by the consumer)
	reposted  atomic.Uint64 // slots posted again so far (under postMu)
	repostMin uint64        // smallest group of released slots worth a post

	sup *supervisor // events and rebuilds

	// A rebuild in progress (rebuild, Fill): its cause and when it began.
	downCause Event
	downSince time.Time

	// Without a receive loop (Direct, DirectSpin): the consumer's state.
	direct *directState

	placement devices.Placement // set by run before NewReceiver returns

	datagrams, bytes, polls, ringFull, truncated, errors atomic.Uint64

	// Starvation (Starvation): the time spent in ended ring-full episodes,
	// and when the current one began (Unix ns; 0 outside one).
	starvedNs atomic.Uint64
	starvedAt atomic.Int64
}

var _ ud.Receiver = (*Receiver)(nil)

// NewReceiver opens an endpoint on the RDMA device behind cfg.Interface,
// posts every ring slot as a receive, joins cfg.Group and starts the
// receive loop in cfg.Mode (in Direct and DirectSpin there is none: the
// consumer receives with Fill, see direct.go). The error wraps ErrNoDevice, ErrPortNotActive
// or ErrJoin when that is the cause.
func NewReceiver(cfg Config) (*Receiver, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	// The ring's own buffers are not used (one byte each): every slot is
	// pointed at its receive buffer in the registered region below.
	ring, err := ud.NewRing(c.RingSlots, 1)
	if err != nil {
		return nil, &ConfigError{Field: "RingSlots", Value: c.RingSlots, Reason: err.Error()}
	}
	if c.Notifier != nil && c.Mode.Threaded() {
		ring.SetNotifier(c.Notifier)
	}
	sup := newSupervisor("receiver", &c)
	x, err := openEndpoint(&c, false, sup)
	if err != nil {
		return nil, err
	}
	sup.wake = x.wake
	for k := 0; k < c.RingSlots; k++ {
		// Skip the 40-byte GRH space: Buf is the datagram alone.
		off := k*x.recvStride + GRHLen
		end := off + x.dev.ActiveMTU
		ring.Slot(k).Buf = x.mem[off:end:end]
	}
	x.freeMemWhenUnreachable(ring.Slot(0))
	r := &Receiver{Lender: ud.NewLender(ring), cfg: c, x: x, ring: ring, done: make(chan struct{}),
		repostMin: uint64(max(1, min(repostGroup, c.RingSlots/8))), sup: sup}
	sup.cfg = &r.cfg
	if !c.Mode.Threaded() {
		// No receive loop: the consumer receives (Fill).
		close(r.done)
		if err := r.startDirect(); err != nil {
			x.close()
			return nil, err
		}
		return r, nil
	}
	started := make(chan error, 1)
	go r.run(started)
	if err := <-started; err != nil {
		<-r.done
		x.close()
		return nil, err
	}
	return r, nil
}

// MaxDatagram returns the largest datagram a slot holds: the port's active
// MTU (or Config.MaxDatagram if smaller).
func (r *Receiver) MaxDatagram() int { return r.x.mtu }

// Device returns the device and port the receiver uses.
func (r *Receiver) Device() Device { return r.x.dev }

// Placement says where the receive thread was placed: in BusyPoll mode
// with Config.CPU -1 it is pinned to the CPUs of the device's NUMA node
// when sysfs knows the node (Pinned); a node of -1 means sysfs has no NUMA
// information and placement was left alone. In Blocking mode, or with an
// explicit Config.CPU, nothing is pinned by NUMA node.
func (r *Receiver) Placement() devices.Placement { return r.placement }

// QKey returns the group's qkey, from the join event.
func (r *Receiver) QKey() uint32 { return r.x.qkey }

// Release hands the n oldest slots back and posts them on the receive queue
// again, in groups of at least min(8, RingSlots/8) slots (one
// ibv_post_recv per group). The consumer posts, not the receive loop, so
// that a loop asleep on the completion channel or descheduled never leaves
// released slots off the queue while datagrams arrive.
func (r *Receiver) Release(n int) {
	r.Lender.Release(n)
	if n <= 0 {
		return
	}
	if r.released.Add(uint64(n))-r.reposted.Load() >= r.repostMin {
		r.repost()
	}
}

// repost posts the released slots that are not on the receive queue yet.
// Slot i (counting every slot ever received) is ring position i mod
// RingSlots; it goes back on the queue as slot i+RingSlots, so the queue
// keeps ring order.
func (r *Receiver) repost() {
	r.postMu.Lock()
	defer r.postMu.Unlock()
	if r.closed.Load() || r.down {
		// A rebuild posts what was released meanwhile.
		return
	}
	rel, rep := r.released.Load(), r.reposted.Load()
	if rel == rep {
		return
	}
	if err := r.x.postRecv(rep, int(rel-rep)); err != nil {
		// The queue pair is broken: the receive loop rebuilds it.
		r.sup.event(EventCompletionError, "ibv_post_recv: "+err.Error())
		return
	}
	r.reposted.Store(rel)
}

// Err returns the error that stopped the receive loop, or nil. A failed
// completion or a broken queue pair does not stop it: the endpoint is
// rebuilt (Health).
func (r *Receiver) Err() error {
	if p := r.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Stats returns cumulative counters. Syscalls counts completion polls that
// returned data. RingFull counts the times every slot was lent out, when the
// receive queue was empty (Starvation has their duration). KernelDrops stays
// 0: a UD receive queue that runs empty drops in the device, which counts
// no drop per queue pair (see ReadDeviceDrops).
func (r *Receiver) Stats() ud.RecvStats {
	return ud.RecvStats{
		Datagrams: r.datagrams.Load(),
		Bytes:     r.bytes.Load(),
		Syscalls:  r.polls.Load(),
		RingFull:  r.ringFull.Load(),
		Truncated: r.truncated.Load(),
		Errors:    r.errors.Load(),
	}
}

// Health returns the events the receiver observed and the rebuilds of its
// endpoint.
func (r *Receiver) Health() Health { return r.sup.h.snapshot() }

// Close stops the receive loop, leaves the group and releases the verbs
// objects. Datagrams already received can still be drained with Peek; the
// slot memory is freed once the receiver and its slots are unreachable.
func (r *Receiver) Close() error {
	r.postMu.Lock()
	already := r.closed.Swap(true)
	r.postMu.Unlock()
	if already {
		return nil
	}
	r.x.wake() // wakes a Blocking loop parked in waitEvent
	<-r.done
	if r.direct != nil {
		r.direct.close(r)
	}
	r.ring.Close()
	r.x.close()
	return nil
}

func (r *Receiver) fail(err error) {
	err = &OpError{Op: "receive", Group: r.cfg.Group, Interface: r.cfg.Interface, Err: err}
	r.err.Store(&err)
	r.errors.Add(1)
}

// run is the receive loop, the ring's only producer. Ring slot position p
// and receive work request p are the same buffer; slots are posted in ring
// order and a UD receive queue completes in posting order, so the n
// completions of a poll are the next n ring slots.
func (r *Receiver) run(started chan<- error) {
	defer close(r.done)
	busy := r.cfg.Mode == BusyPoll
	r.placement = devices.Placement{Device: r.x.dev.Name, Node: -1}
	if busy {
		// Never unlocked (see ud.LockThread).
		if err := ud.LockThread(r.cfg.CPU, false); err != nil {
			started <- &OpError{Op: "sched_setaffinity CPU " + strconv.Itoa(r.cfg.CPU), Group: r.cfg.Group, Interface: r.cfg.Interface, Err: err}
			return
		}
		if r.cfg.CPU < 0 {
			// No CPU asked for: the CPUs of the device's NUMA node,
			// when sysfs knows it; otherwise placement is left alone.
			p, err := devices.PinThread(r.x.dev.Name)
			if err != nil {
				started <- &OpError{Op: "NUMA placement", Group: r.cfg.Group, Interface: r.cfg.Interface, Err: err}
				return
			}
			r.placement = p
		}
	}
	started <- nil
	defer r.ring.Close()

	x, ring := r.x, r.ring
	var tail uint64 // slots published
	full := false
	idle := ud.Spinner{Polls: busyYieldPolls, Yield: true} // BusyPoll
	for !r.closed.Load() {
		if _, ok := r.sup.pending(); ok {
			if !r.rebuild(tail) {
				return
			}
			continue
		}
		if ring.Free() == 0 {
			// Every slot is lent out: the receive queue is empty and the
			// device drops what arrives until the consumer releases.
			if !full {
				full = true
				r.starvedAt.Store(time.Now().UnixNano())
				r.ringFull.Add(1)
			}
			if !busy {
				ring.WaitFree(waitMs * time.Millisecond)
			} else {
				idle.Empty()
			}
			continue
		}
		if full {
			// Once per episode, not per datagram: the clock is read
			// only when the ring fills and when it frees again.
			r.endStarved(time.Now().UnixNano())
			full = false
		}
		var n int
		if busy {
			n = x.pollRecv()
		} else {
			var err error
			if n, err = x.armRecv(); err != nil {
				r.fail(err)
				return
			}
		}
		if n <= 0 {
			if n < 0 {
				r.fail(fmt.Errorf("ibv_poll_cq failed"))
				return
			}
			if busy {
				idle.Empty()
			} else if err := x.waitEvent(); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					// wake: Close, or an event that asks
					// for a rebuild.
					x.rearm()
					continue
				}
				// Any other error stops the loop.
				if !r.closed.Load() {
					r.fail(err)
				}
				return
			}
			continue
		}
		idle.Busy()
		r.polls.Add(1)
		good, nbytes, err := r.fill(n, tail)
		r.publish(good, nbytes)
		tail += uint64(good)
		if err != nil {
			// A failed receive completion: the QP is in the error
			// state (flushed) and does not recover. Rebuild it.
			r.sup.event(EventCompletionError, err.Error())
		}
	}
}

// fill takes the n completions of a poll into the next n ring slots after
// tail (slots published so far) and returns how many it filled and their
// bytes. It stops at the first failed completion or one for an unexpected
// slot, with an error; the slots before it are good.
func (r *Receiver) fill(n int, tail uint64) (good int, nbytes uint64, err error) {
	x, ring := r.x, r.ring
	size := uint64(ring.Cap())
	now := time.Now().UnixNano()
	for i := 0; i < n; i++ {
		if st := x.rcStatus[i]; st != 0 {
			return good, nbytes, fmt.Errorf("receive completion status %d (%s)", st, wcStatus(st))
		}
		if want := (tail + uint64(i)) & (size - 1); uint64(x.rcID[i]) != want {
			return good, nbytes, fmt.Errorf("receive completion for slot %d, expected %d", x.rcID[i], want)
		}
		s := ring.FreeSlot(i)
		ln := int(x.rcLen[i]) - GRHLen
		if ln < 0 || ln > len(s.Buf) {
			ln = 0
			r.truncated.Add(1)
		}
		s.N = ln
		s.RecvNs = now
		nbytes += uint64(ln)
		good++
	}
	return good, nbytes, nil
}

// publish counts n filled slots and hands them to the consumer. It counts
// first, so that a consumer that has seen a datagram finds it in Stats.
func (r *Receiver) publish(n int, nbytes uint64) {
	r.datagrams.Add(uint64(n))
	r.bytes.Add(nbytes)
	r.ring.Publish(n)
}

// rebuild tears the endpoint down after the event that asked for it, waits
// until the port behind the interface is ACTIVE again, and opens the
// endpoint anew on the same slot memory: the slots lent to the consumer stay
// valid, and the new queue pair gets the free slots, from tail (slots
// published so far) on, in ring order. What arrived meanwhile is lost: the
// consumer sees a gap. It returns false when the receiver was closed first.
// The receive loop's way; a receiver without one (Fill) takes the same
// steps without waiting.
func (r *Receiver) rebuild(tail uint64) bool {
	r.tearDownPending()
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !r.sleep(r.cfg.RebuildPoll) {
			return false
		}
		if r.closed.Load() {
			return false
		}
		if r.reopen(tail) {
			return true
		}
	}
}

// tearDownPending destroys the endpoint's verbs objects after the event
// that asked for it (a removed or failed device releases everything, its
// event monitor included) and marks the receiver down.
func (r *Receiver) tearDownPending() {
	cause, _ := r.sup.pending()
	r.downCause, r.downSince = cause, time.Unix(0, r.sup.since.Load())
	r.postMu.Lock()
	r.down = true
	removed := cause == EventDeviceRemoval || cause == EventDeviceFatal
	r.x.tearDown(!removed)
	r.postMu.Unlock()
	r.sup.h.down.Store(true)
	if removed {
		syncDevices()
	}
	r.sup.log.Warn("rdma endpoint torn down, waiting for the port", "cause", cause.String(),
		"role", "receiver", "group", r.cfg.Group.String(), "iface", r.cfg.Interface.String())
}

// reopen tries once to open the torn-down endpoint again, and reports
// whether it did. Events until then need no rebuild of their own.
func (r *Receiver) reopen(tail uint64) bool {
	// A new event from here on asks for another rebuild.
	r.sup.cause.Store(0)
	if d, err := LookupDevice(r.cfg.Interface); err != nil || !d.Active {
		if errors.Is(err, ErrNoDevice) {
			syncDevices()
		}
		return false
	}
	size := uint64(r.ring.Cap())
	r.postMu.Lock()
	rel := r.released.Load()
	err := r.x.open(&r.cfg, false, tail, int(rel+size-tail))
	if err == nil {
		r.reposted.Store(rel)
		r.down = false
	}
	r.postMu.Unlock()
	if err != nil {
		r.sup.h.rebuildFailed()
		r.sup.log.Warn("rdma endpoint rebuild failed", "err", err,
			"role", "receiver", "group", r.cfg.Group.String(), "iface", r.cfg.Interface.String())
		if errors.Is(err, ErrNoDevice) || errors.Is(err, ErrPortNotActive) {
			syncDevices()
		}
		return false
	}
	if r.direct != nil {
		if err := r.direct.rewatch(r.x); err != nil {
			r.fail(err)
		}
	}
	r.repost() // what the consumer released while the lock was not held
	outage := time.Since(r.downSince)
	r.sup.h.down.Store(false) // before the count: Health never shows a rebuild still down
	r.sup.h.rebuilt(outage)
	r.sup.log.Info("rdma endpoint rebuilt", "cause", r.downCause.String(), "outage", outage.String(),
		"device", r.x.dev.Name, "port", r.x.dev.Port,
		"role", "receiver", "group", r.cfg.Group.String(), "iface", r.cfg.Interface.String())
	return true
}

// sleep waits for d or until Close, and reports whether the receiver is
// still open.
func (r *Receiver) sleep(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !r.closed.Load() {
		left := time.Until(deadline)
		if left <= 0 {
			return true
		}
		time.Sleep(min(left, 20*time.Millisecond))
	}
	return false
}
