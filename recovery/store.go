package recovery

import (
	"errors"
	"fmt"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/mold"
)

// Default limits of a Channel's retransmission store.
const (
	// DefaultMaxMessages is the default StoreConfig.MaxMessages.
	DefaultMaxMessages = 1 << 20
	// DefaultMaxBytes is the default StoreConfig.MaxBytes.
	DefaultMaxBytes = 64 << 20
)

// StoreConfig configures the retransmission store of a Channel.
type StoreConfig struct {
	// MaxMessages is the most messages the store holds; older ones are
	// evicted. 0 means DefaultMaxMessages.
	MaxMessages int
	// MaxBytes is the size of the byte ring holding the messages' bytes
	// (wasted ring tails count against it); 0 means DefaultMaxBytes. It must
	// be at least mold.MaxMessageLen so that any message fits.
	MaxBytes int
	// Trim, if set, is applied to each message of a packet before the
	// Channel stores it and applies it to the snapshot state: the feed
	// handler cuts the padding its publisher adds to a packet's last
	// message (feed.Trim), so that neither holds it and recovery answers
	// carry messages at their size. It must return a prefix of its
	// argument and not allocate.
	Trim func(msg []byte) []byte
}

// The store allocates both rings at their limits when it is made: 16
// bytes per message of MaxMessages plus MaxBytes (StoreBytes; 80 MiB at
// the defaults), resident as the store fills. A store larger than the
// host's memory is refused.

var storeCheck = config.Checker{Pkg: "recovery", Struct: "StoreConfig"}

// withDefaults returns c with its zero fields set to their defaults.
func (c StoreConfig) withDefaults() StoreConfig {
	config.Default(&c.MaxMessages, DefaultMaxMessages)
	config.Default(&c.MaxBytes, DefaultMaxBytes)
	return c
}

// validate checks a StoreConfig whose defaults are set.
func (c StoreConfig) validate() error {
	switch {
	case c.MaxMessages < 1 || int64(c.MaxMessages) > maxStoreLimit:
		return storeCheck.Invalid("MaxMessages", c.MaxMessages, "want 1..2^40")
	case c.MaxBytes < mold.MaxMessageLen:
		return storeCheck.Invalid("MaxBytes", c.MaxBytes, "below %d, the largest message a packet can carry", mold.MaxMessageLen)
	case int64(c.MaxBytes) > maxStoreLimit:
		return storeCheck.Invalid("MaxBytes", c.MaxBytes, "above 2^40")
	}
	if need, host := StoreBytes(c), HostMemory(); host > 0 && need > host {
		return storeCheck.Invalid("MaxBytes", c.MaxBytes, "with MaxMessages %d the store allocates %d bytes at start, more than this host's memory (%d bytes)",
			c.MaxMessages, need, host)
	}
	return nil
}

// maxStoreLimit bounds StoreConfig's limits (2^40).
const maxStoreLimit = 1 << 40

// ErrUnknownSession is returned by Read and Snapshot when the channel is not
// publishing the session asked for (or has not published anything yet).
var ErrUnknownSession = errors.New("recovery: unknown session")

// ErrTooOld is matched (errors.Is) by a *TooOldError.
var ErrTooOld = errors.New("recovery: messages no longer held")

// ErrNotYet is matched (errors.Is) by a *NotYetError.
var ErrNotYet = errors.New("recovery: messages not published yet")

// TooOldError reports a Read whose range starts before the oldest message
// the store still holds. The requester should load a snapshot.
type TooOldError struct {
	Session mold.Session
	From    uint64 // first sequence requested
	Count   int    // messages requested
	Oldest  uint64 // oldest sequence the store holds
}

// Error names the session, the range asked for and the oldest sequence held.
func (e *TooOldError) Error() string {
	return fmt.Sprintf("recovery: session %s messages %d..%d: too old, the oldest held is %d",
		e.Session, e.From, e.From+uint64(e.Count)-1, e.Oldest)
}

// Is reports whether target is ErrTooOld.
func (e *TooOldError) Is(target error) bool { return target == ErrTooOld }

// NotYetError reports a Read whose range ends at or past the next sequence
// to be published.
type NotYetError struct {
	Session mold.Session
	From    uint64 // first sequence requested
	Count   int    // messages requested
	Next    uint64 // next sequence the channel will publish
}

// Error names the session, the range asked for and the next sequence.
func (e *NotYetError) Error() string {
	return fmt.Sprintf("recovery: session %s messages %d..%d: not published yet, the next is %d",
		e.Session, e.From, e.From+uint64(e.Count)-1, e.Next)
}

// Is reports whether target is ErrNotYet.
func (e *NotYetError) Is(target error) bool { return target == ErrNotYet }

// SequenceError reports an append that does not continue the stream.
type SequenceError struct {
	Session  mold.Session
	Expected uint64 // the channel's Next(), or 1 for a new session
	Got      uint64 // the packet's first sequence
}

// Error names the session and the expected and actual sequences.
func (e *SequenceError) Error() string {
	return fmt.Sprintf("recovery: session %s: packet starts at sequence %d, expected %d", e.Session, e.Got, e.Expected)
}

type entry struct {
	pos uint64 // logical position in the byte ring
	n   uint32 // message length
}

// ring is the retransmission store of one channel: the latest messages of
// its current session (one MoldUDP64 stream), kept byte-identical so that
// lost messages can be sent again, looked up by sequence in O(1). It has no
// lock of its own; Channel uses it under its lock. It has two rings:
//
//   - an index ring of entries {pos, len}, one per message, where the
//     message with sequence s lives at entries[s % len(entries)]. The held
//     messages are the contiguous range oldest..next-1, so a lookup by
//     sequence is one modulo and one load: O(1), no search.
//   - a byte ring holding the message bytes back to back. Positions are
//     logical (they only grow); a message at logical position p starts at
//     byte p % len(buf). A message never wraps: if it does not fit between
//     the write position and the end of the ring, the write position
//     skips to the start of the ring and the skipped tail counts as used
//     until the message before it is evicted. The bytes in use, wasted
//     tails included, are therefore write position - position of the
//     oldest message, which is what is compared with the ring's size.
//
// Eviction: before a message is written, the oldest messages are dropped
// while the index ring is full (MaxMessages) or the new message would make
// the span of used bytes exceed the byte ring (MaxBytes). A read of an
// evicted message gets a *TooOldError naming the oldest sequence still held;
// the subscriber then loads the snapshot instead.
//
// Memory: both rings are allocated at their limits (MaxMessages entries of
// 16 bytes, MaxBytes bytes) when the store is made, before anything is
// published, and never grow: an append never allocates, copies the held
// messages or waits on the garbage collector for a large allocation. The
// rings hold no pointers, so the collector never scans them. Pages the
// store has not written yet are not resident: a channel that carries
// little traffic holds little memory, and a busy one holds its limits.
//
// A new session (the feed handler restarted the stream) resets the ring;
// its first packet must start at sequence 1. Packets must continue the
// stream exactly: begin rejects a packet whose first sequence is not next,
// so the ring never holds a hole it does not know about.
type ring struct {
	cfg        StoreConfig
	session    mold.Session
	hasSession bool
	oldest     uint64 // oldest sequence held
	next       uint64 // next sequence to append
	entries    []entry
	buf        []byte
	w          uint64 // logical write position
	bytes      int    // message bytes held (without wasted tails)
	// beforeEvict, if set, is called with the sequence about to be
	// evicted while its message is still held: a Channel whose state is
	// applied in the background applies it first.
	beforeEvict func(seq uint64)
}

// init sets up an empty ring with the limits of cfg, which is valid and has
// its defaults set.
func (r *ring) init(cfg StoreConfig) {
	r.cfg = cfg
	r.entries = make([]entry, cfg.MaxMessages)
	r.buf = make([]byte, cfg.MaxBytes)
	r.oldest, r.next = 1, 1
}

// checkPacket validates pkt and that its header names session and firstSeq.
func checkPacket(session mold.Session, firstSeq uint64, pkt []byte) (mold.Packet, error) {
	p, err := mold.Parse(pkt)
	if err != nil {
		return p, fmt.Errorf("recovery: session %s sequence %d: %w", session, firstSeq, err)
	}
	if p.Session != session || p.Seq != firstSeq {
		return p, fmt.Errorf("recovery: packet header says session %s sequence %d, caller says session %s sequence %d",
			p.Session, p.Seq, session, firstSeq)
	}
	if p.Messages() > 0 && firstSeq > ^uint64(0)-uint64(p.Messages()) {
		return p, fmt.Errorf("recovery: session %s: packet at sequence %d with %d messages overflows the sequence", session, firstSeq, p.Messages())
	}
	return p, nil
}

// begin checks that a packet of session starting at firstSeq continues the
// stream, resetting the ring for a new session.
func (r *ring) begin(session mold.Session, firstSeq uint64) error {
	if !r.hasSession || session != r.session {
		if firstSeq != 1 {
			return &SequenceError{Session: session, Expected: 1, Got: firstSeq}
		}
		r.reset(session)
		return nil
	}
	if firstSeq != r.next {
		return &SequenceError{Session: session, Expected: r.next, Got: firstSeq}
	}
	return nil
}

// reset empties the ring for a new session, keeping its buffers.
func (r *ring) reset(session mold.Session) {
	r.session, r.hasSession = session, true
	r.oldest, r.next = 1, 1
	r.w = 0
	r.bytes = 0
}

func (r *ring) count() uint64 { return r.next - r.oldest }

// put appends msg as sequence r.next, evicting as needed.
func (r *ring) put(msg []byte) {
	n := uint64(len(msg))
	if r.count() == uint64(len(r.entries)) {
		r.evict()
	}
	size := uint64(len(r.buf))
	start := r.place(n)
	for r.count() > 0 && start+n-r.entries[r.oldest%uint64(len(r.entries))].pos > size {
		r.evict()
	}
	phys := start % size
	copy(r.buf[phys:phys+n], msg)
	r.entries[r.next%uint64(len(r.entries))] = entry{pos: start, n: uint32(n)}
	r.next++
	r.w = start + n
	r.bytes += len(msg)
}

// place returns the logical position a message of n bytes is written at:
// the write position, or the start of the ring's next lap if the message
// would run past the end of the ring.
func (r *ring) place(n uint64) uint64 {
	size := uint64(len(r.buf))
	phys := r.w % size
	if phys+n > size {
		return r.w + size - phys
	}
	return r.w
}

func (r *ring) evict() {
	if r.beforeEvict != nil {
		r.beforeEvict(r.oldest)
	}
	e := &r.entries[r.oldest%uint64(len(r.entries))]
	r.bytes -= int(e.n)
	r.oldest++
}

// msg returns the stored message seq, which must be held (oldest <= seq <
// next); it aliases the ring.
func (r *ring) msg(seq uint64) []byte {
	e := r.entries[seq%uint64(len(r.entries))]
	phys := e.pos % uint64(len(r.buf))
	return r.buf[phys : phys+uint64(e.n) : phys+uint64(e.n)]
}

// read calls fn for each message of session with sequence from ..
// from+count-1, in order; msg aliases the ring and is valid only during the
// call. The whole range is checked before fn is first called: read returns
// ErrUnknownSession if session is not the ring's, a *TooOldError if part of
// the range was evicted, a *NotYetError if part of it was not appended yet.
// An error returned by fn stops read and is returned as is.
func (r *ring) read(session mold.Session, from uint64, count int, fn func(seq uint64, msg []byte) error) error {
	if !r.hasSession || session != r.session {
		return ErrUnknownSession
	}
	if count <= 0 || from == 0 {
		return fmt.Errorf("recovery: session %s: read of %d messages from sequence %d: want sequence >= 1 and count >= 1", session, count, from)
	}
	if from < r.oldest {
		return &TooOldError{Session: session, From: from, Count: count, Oldest: r.oldest}
	}
	if from >= r.next || uint64(count) > r.next-from {
		return &NotYetError{Session: session, From: from, Count: count, Next: r.next}
	}
	ne, size := uint64(len(r.entries)), uint64(len(r.buf))
	end := from + uint64(count)
	for seq := from; seq < end; seq++ {
		e := r.entries[seq%ne]
		phys := e.pos % size
		n := uint64(e.n)
		if err := fn(seq, r.buf[phys:phys+n:phys+n]); err != nil {
			return err
		}
	}
	return nil
}
