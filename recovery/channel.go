package recovery

import (
	"sync"

	"github.com/tickcast/tickcast/mold"
)

// Channel is the recovery data of one channel: its retransmission store and
// its snapshot state, fed together from each data packet under one lock, so
// that a snapshot reflecting sequence S and the store agree: the store's
// next sequence is S+1 at that moment, and a subscriber that loads the
// snapshot can retransmit S+1 onwards.
//
// A Channel is safe for one goroutine calling OnPacket (the publisher's) and
// any number calling the other methods. Readers hold the read lock while
// their callback runs; see the top of store.go.
type Channel struct {
	mu    sync.RWMutex
	store ring
	state state
	ended bool // the current session's end of session was stored
}

// NewChannel returns an empty channel whose store has the limits of cfg
// (zero fields take their defaults).
func NewChannel(cfg StoreConfig) (*Channel, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Channel{}
	c.store.init(cfg)
	return c, nil
}

// OnPacket records a MoldUDP64 data packet of session whose first message
// has sequence firstSeq, exactly as sent (it has the shape of
// PublisherConfig.OnPacket without the channel number). Every message is
// appended to the store and applied to the state in one pass under the
// write lock. The rules of Store.Append apply: a new session resets store
// and state and must start at sequence 1, and within a session firstSeq
// must be the next sequence, else OnPacket returns a *SequenceError and
// records nothing. pkt is not retained. OnPacket does not allocate once the
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
	for {
		msg, seq, ok := it.Next()
		if !ok {
			break
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

// Read calls fn for each message of session from .. from+count-1, in order,
// under the read lock; see Store.Read for the errors and the rules for fn.
func (c *Channel) Read(session mold.Session, from uint64, count int, fn func(seq uint64, msg []byte) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.store.read(session, from, count, fn)
}

// Snapshot calls fn with every message of the channel's snapshot state under
// the read lock and returns the session and the sequence S it reflects; the
// channel's next sequence is then S+1. See State.Snapshot for the order and
// the rules for fn.
func (c *Channel) Snapshot(fn func(msg []byte) error) (session mold.Session, seq uint64, err error) {
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
