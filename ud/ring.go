package ud

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"
)

// Ring is a single-producer single-consumer ring of pre-allocated receive
// slots. A Receiver embeds one: its receive loop is the producer, the
// Receiver's consumer (Peek, Release, Wait) is the consumer.
//
// The ring counts with two free-running uint64 indexes, as the Go runtime's
// run queue does: tail is the number of slots the producer has published, head
// the number the consumer has released. Slots [head, tail) are lent to the
// consumer; slots [tail, head+Cap) are free for the producer. Slot index i lives
// at physical position i&mask, so the capacity is a power of two.
//
// Memory ordering: the producer fills slots, then stores tail (a release
// store); the consumer loads tail (an acquire load) before it reads the slots
// below it. Symmetrically the consumer finishes with slots, then stores head;
// the producer loads head before it refills them. sync/atomic operations are
// sequentially consistent, which is stronger than this needs and is what makes
// the waiting handshake below correct.
//
// Each side writes only its own index, its own waiting flag and its own cached
// copy of the other side's index; the two groups sit on separate cache lines
// (cpu.CacheLinePad between them) so that the producer publishing a batch does
// not invalidate the line the consumer is writing, and vice versa.
//
// Blocking waits: a side that is about to block sets its waiting flag, checks
// the ring once more, and then sleeps on a capacity-1 channel. The other side,
// after moving its index, sends on that channel only if the flag is set, and
// never blocks doing so (select with default). Because both the flag and the
// index are sequentially consistent atomics, either the waker sees the flag or
// the waiter sees the new index; no wakeup is lost. Nothing here allocates: the
// channels and timers are created once by NewRing.
//
// Producer methods: Free, Writable, FreeSlot, Publish, WaitFree.
// Consumer methods: Len, Peek, Release, Wait.
// Either side, or a third goroutine: Cap, Slot (for setting up transport
// descriptors before the ring is in use), Close, Closed.
type Ring struct {
	_ cpu.CacheLinePad

	// Written by the producer.
	tail        atomic.Uint64 // slots published
	prodWaiting atomic.Bool   // producer is blocked in WaitFree
	headCache   uint64        // producer's last view of head

	_ cpu.CacheLinePad

	// Written by the consumer.
	head        atomic.Uint64 // slots released
	consWaiting atomic.Bool   // consumer is blocked in Wait
	tailCache   uint64        // consumer's last view of tail

	_ cpu.CacheLinePad

	// Read-only after NewRing.
	slots     []Slot
	mask      uint64
	size      uint64
	dataReady chan struct{} // producer → consumer wakeup, capacity 1
	notifier  *Notifier     // optional shared wakeup (SetNotifier)
	freeReady chan struct{} // consumer → producer wakeup, capacity 1
	consTimer *time.Timer   // used only by the consumer (Wait)
	prodTimer *time.Timer   // used only by the producer (WaitFree)
	done      chan struct{} // closed by Close

	closeOnce sync.Once
	closed    atomic.Bool
}

// MaxRingSlots is the largest capacity NewRing accepts.
const MaxRingSlots = 1 << 24

// NewRing returns a ring of capacity slots, each with a pre-allocated buffer
// of slotSize bytes. All buffers share one backing array, so a ring costs a
// single large allocation. capacity must be a power of two between 1 and
// MaxRingSlots; slotSize must be positive.
func NewRing(capacity, slotSize int) (*Ring, error) {
	if capacity < 1 || capacity > MaxRingSlots || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("ud: ring capacity %d is not a power of two between 1 and %d", capacity, MaxRingSlots)
	}
	if slotSize < 1 {
		return nil, fmt.Errorf("ud: ring slot size %d is not positive", slotSize)
	}
	backing := make([]byte, capacity*slotSize)
	prefault(backing)
	r := &Ring{
		slots:     make([]Slot, capacity),
		mask:      uint64(capacity - 1),
		size:      uint64(capacity),
		dataReady: make(chan struct{}, 1),
		freeReady: make(chan struct{}, 1),
		consTimer: time.NewTimer(time.Hour),
		prodTimer: time.NewTimer(time.Hour),
		done:      make(chan struct{}),
	}
	r.consTimer.Stop()
	r.prodTimer.Stop()
	for i := range r.slots {
		// Full slice expression: a slot's buffer can never be appended into
		// its neighbour.
		r.slots[i].Buf = backing[i*slotSize : (i+1)*slotSize : (i+1)*slotSize]
	}
	return r, nil
}

// Cap returns the number of slots.
func (r *Ring) Cap() int { return int(r.size) }

// Slot returns the slot at physical position k (0 <= k < Cap). It is meant for
// setting up transport descriptors (iovecs, receive work requests) that point
// at slot buffers before the ring is used; Writable reports free slots by
// physical position.
func (r *Ring) Slot(k int) *Slot { return &r.slots[k] }

// Free returns how many slots the producer may fill before the next Publish.
// It reloads the consumer's head (acquire), so the answer is current.
// Producer only.
func (r *Ring) Free() int {
	r.headCache = r.head.Load()
	return int(r.size - (r.tail.Load() - r.headCache))
}

// Writable returns the physical position of the next slot to fill and the
// number of free slots that follow it contiguously, without wrapping past the
// end of the ring. A transport whose descriptors are laid out by physical
// position (one mmsghdr per slot) can hand Slot(start)..Slot(start+n-1) to a
// single system call. n is 0 when the ring is full. Producer only.
func (r *Ring) Writable() (start, n int) {
	free := uint64(r.Free())
	t := r.tail.Load()
	pos := t & r.mask
	if untilEnd := r.size - pos; free > untilEnd {
		free = untilEnd
	}
	return int(pos), int(free)
}

// FreeSlot returns the i-th free slot (0 = the next one to publish), or nil
// when fewer than i+1 slots are free. The producer fills it and makes it
// visible with Publish. Producer only.
func (r *Ring) FreeSlot(i int) *Slot {
	t := r.tail.Load()
	if uint64(i) >= r.size-(t-r.headCache) {
		// The cached head may be stale; only now pay for the shared load.
		if uint64(i) >= uint64(r.Free()) {
			return nil
		}
	}
	return &r.slots[(t+uint64(i))&r.mask]
}

// Publish makes the next n filled slots visible to the consumer, in order, with
// one release store, and wakes the consumer if it is blocked in Wait. It panics
// if n exceeds the free slots: that would overwrite slots the consumer has not
// released. Producer only.
func (r *Ring) Publish(n int) {
	if n <= 0 {
		return
	}
	t := r.tail.Load()
	if t+uint64(n)-r.headCache > r.size && uint64(n) > uint64(r.Free()) {
		panic(fmt.Sprintf("ud: Ring.Publish(%d) with only %d free slots", n, r.Free()))
	}
	r.tail.Store(t + uint64(n))
	if r.notifier != nil {
		r.notifier.Signal()
	}
	if r.consWaiting.Load() {
		select {
		case r.dataReady <- struct{}{}:
		default: // a wakeup is already pending
		}
	}
}

// Len returns how many published slots the consumer has not yet released.
// It reloads the producer's tail (acquire). Consumer only.
func (r *Ring) Len() int {
	r.tailCache = r.tail.Load()
	return int(r.tailCache - r.head.Load())
}

// Peek returns the i-th unreleased slot (0 = oldest) or nil when fewer than
// i+1 are published. The slot and its bytes stay valid until the consumer
// releases it; the consumer must not change its Buf. Consumer only.
func (r *Ring) Peek(i int) *Slot {
	h := r.head.Load()
	if uint64(i) >= r.tailCache-h {
		// Only touch the producer's cache line when the cached view is
		// exhausted.
		r.tailCache = r.tail.Load()
		if uint64(i) >= r.tailCache-h {
			return nil
		}
	}
	return &r.slots[(h+uint64(i))&r.mask]
}

// Release hands the n oldest unreleased slots back to the producer with one
// release store, and wakes the producer if it is blocked in WaitFree. It
// panics if n exceeds the unreleased slots. Consumer only.
func (r *Ring) Release(n int) {
	if n <= 0 {
		return
	}
	h := r.head.Load()
	if uint64(n) > r.tailCache-h && n > r.Len() {
		panic(fmt.Sprintf("ud: Ring.Release(%d) with only %d slots lent", n, r.Len()))
	}
	r.head.Store(h + uint64(n))
	if r.prodWaiting.Load() {
		select {
		case r.freeReady <- struct{}{}:
		default:
		}
	}
}

// Wait blocks until at least one slot is published, the timeout passes, or
// the ring is closed. It returns nil in the first two cases (the caller checks
// with Peek), and ErrClosed once the ring is closed and empty: published slots
// can still be drained after Close. A timeout <= 0 does not block. Its
// resolution is the Go timer's (about a millisecond here); consumers that need
// better spin on Peek instead. Consumer only.
func (r *Ring) Wait(timeout time.Duration) error {
	return r.wait(timeout, true)
}

// WaitFree blocks until at least one slot is free, the timeout passes, or the
// ring is closed (ErrClosed). It returns nil when a slot is free or on
// timeout. A timeout <= 0 does not block. Producer only.
func (r *Ring) WaitFree(timeout time.Duration) error {
	return r.wait(timeout, false)
}

// wait is Wait (consumer) and WaitFree (producer). Each side has its own flag,
// channel and timer, so the two never share mutable state here.
func (r *Ring) wait(timeout time.Duration, consumer bool) error {
	ready, flag, wake, timer := r.Len, &r.consWaiting, r.dataReady, r.consTimer
	if !consumer {
		ready, flag, wake, timer = r.Free, &r.prodWaiting, r.freeReady, r.prodTimer
	}
	if ready() > 0 {
		return nil
	}
	if r.closed.Load() {
		return ErrClosed
	}
	if timeout <= 0 {
		return nil
	}
	flag.Store(true)
	defer flag.Store(false)
	// Re-check after announcing: the other side may have moved its index
	// before it could see the flag.
	if ready() > 0 {
		return nil
	}
	timer.Reset(timeout)
	defer timer.Stop()
	for {
		select {
		case <-wake:
			if ready() > 0 {
				return nil
			}
			// A stale token from an earlier episode: keep waiting.
		case <-timer.C:
			return nil
		case <-r.done:
			if ready() > 0 {
				return nil
			}
			return ErrClosed
		}
	}
}

// Close wakes both sides; from then on Wait and WaitFree return ErrClosed
// instead of blocking (Wait only once the ring is empty). Slots stay readable.
// Close is idempotent and safe to call from any goroutine.
func (r *Ring) Close() {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		close(r.done)
	})
}

// Closed reports whether Close has been called.
func (r *Ring) Closed() bool { return r.closed.Load() }

// prefault writes to every page of b, so that the kernel maps them now: a
// ring's first lap then takes no page faults on the receive path (a
// fault costs a few µs, and the first lap of four rings at 300k msg/s
// took thousands of them in its first tenth of a second). The ring's
// memory is all in use after one lap anyway.
func prefault(b []byte) {
	const page = 4096
	for i := 0; i < len(b); i += page {
		b[i] = 0
	}
}
