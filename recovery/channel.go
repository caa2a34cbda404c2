package recovery

import (
	"sync"
	"sync/atomic"

	"github.com/tickcast/tickcast/mold"
)

// Channel is the recovery data of one channel: its retransmission store and
// its snapshot state. The publisher gives it every data packet it sends
// (OnPacket); a Server answers subscribers' requests from it.
//
// The store keeps the latest messages of the channel's current session,
// byte-identical to those sent, so that a retransmission is the original
// bytes; it looks them up by sequence in O(1) and evicts the oldest beyond
// StoreConfig's MaxMessages or MaxBytes. A read of a range no longer held
// gets a *TooOldError naming the oldest sequence still held: the subscriber
// then loads the snapshot instead. The snapshot state keeps, per
// instrument, the last definition, status, quote and trade, byte-identical,
// its price levels as the level deltas describe them, and the channel
// sequence they reflect.
//
// The store and the state are fed together from each packet, in one pass under
// one lock, so that a snapshot reflecting sequence S and the store agree: the
// store's next sequence is S+1 at that moment, and a subscriber that loads
// the snapshot can retransmit S+1 onwards. With ApplyInBackground the state
// is applied by a goroutine of its own and may lag the store, never past a
// message the store still holds; Snapshot first applies what is pending, so
// the agreement holds for every snapshot taken.
//
// # Locking
//
// A Channel is safe for one goroutine calling OnPacket (the publisher's) and
// any number calling the other methods. It uses a sync.RWMutex: OnPacket
// validates the packet first, then takes the write lock only for indexing
// and copying the packet's messages into the store and the state (a memcpy
// of at most one datagram; a growth of the store's rings, rare, copies the
// held bytes). Read and Snapshot hold the read lock for the whole call,
// including the calls of their callback. Since OnPacket runs on the
// publisher's goroutine, a callback must be quick and must not block (copy
// the message into a reply buffer; send it after Read returns), and a reader
// should read a bounded range at a time: while a reader holds the lock the
// publisher waits for it.
type Channel struct {
	mu    sync.RWMutex
	store ring
	state state
	ended bool                // the current session's end of session was stored
	trim  func([]byte) []byte // StoreConfig.Trim

	// With ApplyInBackground: the state lags the store and a goroutine
	// applies it; wake (capacity 1) tells it there is work, once the lag
	// reaches wakeLag messages.
	background atomic.Bool
	wake       chan struct{}
}

// wakeLag is how many messages the state of a Channel applied in the
// background may lag the store before OnPacket wakes the applier: waking
// it for every packet would cost the publisher a futex call a packet.
const wakeLag = 2048

// applyBatch is the most messages the background applier applies under
// one hold of the lock, so the publisher waits a few microseconds at most.
const applyBatch = 64

// NewChannel returns an empty channel whose store has the limits of cfg
// (zero fields take their defaults).
func NewChannel(cfg StoreConfig) (*Channel, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Channel{trim: cfg.Trim}
	c.store.init(cfg)
	return c, nil
}

// ApplyInBackground moves the snapshot state's work off the caller of
// OnPacket: OnPacket then only stores the messages, and a goroutine applies
// them to the state, a bounded batch per hold of the lock. The state never
// misses a message: one about to be evicted from the store is applied
// first, and Snapshot applies what is pending before it reads, so a
// snapshot reflects every message stored, as without it. stop ends the
// goroutine (the state stays correct: what is pending is applied by the
// next Snapshot or eviction); call it once. The feed handler uses this so
// that publishing does not wait on the order of the books the state keeps.
func (c *Channel) ApplyInBackground() (stop func()) {
	c.mu.Lock()
	c.background.Store(true)
	c.wake = make(chan struct{}, 1)
	c.store.beforeEvict = func(seq uint64) {
		if c.state.hasSession && seq > c.state.seq {
			c.applyThrough(seq)
		}
	}
	c.mu.Unlock()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-c.wake:
			}
			for {
				c.mu.Lock()
				n := c.applyThrough(c.state.seq + applyBatch)
				c.mu.Unlock()
				if n == 0 {
					break
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// applyThrough applies the stored messages after the state's sequence, up
// to seq and at most to the last one stored, and returns how many. The
// caller holds the write lock.
func (c *Channel) applyThrough(seq uint64) int {
	if !c.state.hasSession || c.state.session != c.store.session {
		return 0
	}
	end := min(seq, c.store.next-1)
	n := 0
	for s := c.state.seq + 1; s <= end; s++ {
		c.state.apply(s, c.store.msg(s))
		n++
	}
	return n
}

// OnPacket records a MoldUDP64 data packet of session whose first message
// has sequence firstSeq, exactly as sent (it has the shape of
// PublisherConfig.OnPacket without the channel number). Every message is
// appended to the store and applied to the state in one pass under the
// write lock. The packet's header must agree with session and firstSeq. A
// session other than the channel's resets store and state; its first packet
// must start at sequence 1. Within a session firstSeq must equal Next(),
// else OnPacket returns a *SequenceError and records nothing. A packet
// without messages (heartbeat, end of session) records nothing but is
// checked the same way and may start a session. pkt is not retained. OnPacket does not allocate once the
// store has reached its limits, except when the state meets a new
// instrument or a longer message than before for a slot.
func (c *Channel) OnPacket(session mold.Session, firstSeq uint64, pkt []byte) error {
	p, err := checkPacket(session, firstSeq, pkt)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.store.begin(session, firstSeq); err != nil {
		return err
	}
	if !c.state.hasSession || c.state.session != session {
		c.state.reset(session, firstSeq-1)
		c.ended = false
	}
	if p.IsEndOfSession() {
		c.ended = true
	}
	it := p.Iter()
	if c.background.Load() {
		for msg, _, ok := it.Next(); ok; msg, _, ok = it.Next() {
			if c.trim != nil {
				msg = c.trim(msg)
			}
			c.store.put(msg)
		}
		if c.store.next-1-c.state.seq >= wakeLag {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
		return nil
	}
	for {
		msg, seq, ok := it.Next()
		if !ok {
			break
		}
		if c.trim != nil {
			msg = c.trim(msg)
		}
		c.store.put(msg)
		c.state.apply(seq, msg)
	}
	return nil
}

// Ended reports whether the current session has ended (an end-of-session
// packet was given to OnPacket).
func (c *Channel) Ended() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ended
}

// Read calls fn for each message of session with sequence from ..
// from+count-1, in order, under the read lock. msg is the message's bytes as
// sent; it aliases the store and is valid only during the call: fn must not
// retain it and must not block (see Locking above). The whole range is
// checked before fn is first called: Read returns ErrUnknownSession if
// session is not the channel's, a *TooOldError if part of the range was
// evicted, a *NotYetError if part of it was not published yet. An error
// returned by fn stops Read and is returned as is.
func (c *Channel) Read(session mold.Session, from uint64, count int, fn func(seq uint64, msg []byte) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.store.read(session, from, count, fn)
}

// Snapshot calls fn with every message of the channel's snapshot state,
// under the read lock: instruments in ascending id order, and for each its
// definition, status, quote and trade, those it has, byte-identical to the
// messages published, then its price levels (bids best first, then asks
// best first), each the last level delta of its price with action new. It
// returns the session and the sequence S the
// snapshot reflects (every message up to and including S, none after); the
// channel's next sequence is then S+1. msg is valid only during the call,
// and fn must be quick and must not block (see Locking above). Snapshot
// returns ErrUnknownSession if no packet was recorded yet, and stops at and
// returns the first error of fn.
func (c *Channel) Snapshot(fn func(msg []byte) error) (session mold.Session, seq uint64, err error) {
	if c.background.Load() {
		// The state may lag: apply what is pending, under the write
		// lock, held through the snapshot so that it stays current.
		c.mu.Lock()
		defer c.mu.Unlock()
		c.applyThrough(c.store.next - 1)
		return c.state.snapshot(fn)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state.snapshot(fn)
}

// Session returns the channel's session, and false if no packet was recorded
// yet.
func (c *Channel) Session() (mold.Session, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.store.session, c.store.hasSession
}

// Oldest returns the oldest sequence the store holds, or Next() when it is
// empty.
func (c *Channel) Oldest() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.store.oldest
}

// Next returns the sequence the channel's next message will have.
func (c *Channel) Next() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.store.next
}

// Len returns the number of messages the store holds and the sum of their
// lengths.
func (c *Channel) Len() (messages, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return int(c.store.count()), c.store.bytes
}
