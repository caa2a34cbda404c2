package tickcast

import (
	"encoding/binary"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
)

// Conflation (SubscriberConfig.Conflate; docs/slow-consumers.md).
//
// A handler slower than the feed falls behind: the receive rings fill, then
// the sockets' buffers, and the kernel drops what no longer fits. With
// conflation on, a channel that is behind delivers each instrument's latest
// quote instead of every quote, so the handler gets through the backlog and
// nothing is lost. Conflation sits after the gap tracker: every message is
// received and sequenced as usual, so nothing conflated is ever requested
// from recovery, and the per-instrument sequence check sees every message
// before conflation, so none is reported as an instrument gap.

// Defaults of a ConflateConfig.
const (
	// DefaultConflateThreshold is the default ConflateConfig.Threshold.
	DefaultConflateThreshold = 128
	// DefaultConflateInterval is the default ConflateConfig.Interval.
	DefaultConflateInterval = 1024
)

// ConflateConfig configures conflation.
type ConflateConfig struct {
	// On turns conflation on.
	On bool
	// Threshold is the backlog, in messages, past which a channel
	// conflates quotes. A channel's backlog is the number of messages
	// released (from its lines, its reorder window or recovery) since its
	// lines were last found empty (every ring empty, and for receivers
	// that Poll fills, their sockets too): a subscriber that keeps up
	// finds them empty every few messages; one that falls behind does not
	// until it has caught up. The channel conflates from the message that
	// passes Threshold until its lines are found empty again. Zero means
	// DefaultConflateThreshold.
	Threshold int
	// Interval: while a channel conflates, its held quotes are delivered
	// every Interval messages of the backlog, so that none waits longer,
	// and all of them when the channel has caught up. Each delivery costs
	// a handler call per instrument with a held quote, so Interval is
	// kept apart from, and larger than, a low Threshold. Zero means
	// DefaultConflateInterval.
	Interval int
}

func (c ConflateConfig) withDefaults() ConflateConfig {
	config.Default(&c.Threshold, DefaultConflateThreshold)
	config.Default(&c.Interval, DefaultConflateInterval)
	return c
}

func (c ConflateConfig) validate() error {
	if c.Threshold < 1 {
		return subscriberCheck.Invalid("Conflate.Threshold", c.Threshold, "must be positive")
	}
	if c.Interval < 1 {
		return subscriberCheck.Invalid("Conflate.Interval", c.Interval, "must be positive")
	}
	return nil
}

// heldQuote is the latest quote of one instrument, held by a conflating
// channel until it is delivered.
type heldQuote struct {
	seq        uint64
	recvNs     int64
	line       int
	n          int  // length of msg
	held       bool // a quote is held
	superseded bool // it replaced at least one quote, now counted as conflated
	msg        [feed.QuoteLen]byte
}

// levelKey names one price level of one instrument's book.
type levelKey struct {
	inst uint32
	side feed.Side
	px   int64
}

// heldLevel is the latest state of one price level, held by a conflating
// channel until it is delivered: the latest delta, and the action of the
// first one held, which says what the handler knew of the level before.
type heldLevel struct {
	key    levelKey
	seq    uint64
	recvNs int64
	line   int
	first  byte // action of the first delta held
	folded int  // deltas held in it (the latest and those it superseded)
	msg    [feed.LevelDeltaLen]byte
}

// levelAction is the action that brings the handler from what it knew of a
// level before the first held delta (first) to the state after the latest
// (latest); ok is false when there is nothing to deliver: a level created
// and deleted while held.
func levelAction(first, latest byte) (action byte, ok bool) {
	switch {
	case first == feed.ActionNew && latest == feed.ActionDelete:
		return 0, false // never seen, gone again
	case first == feed.ActionNew:
		return feed.ActionNew, true // never seen: new, with its latest state
	case latest == feed.ActionDelete:
		return feed.ActionDelete, true
	}
	return feed.ActionChange, true // it existed before, and does after
}

// conflator is one channel's conflation state. Its tables are indexed by
// instrument id and grow when a definition names a larger id, never per
// quote: holding a quote copies it into memory allocated before. Held
// price levels live in a slice and a map that grow with the most levels
// held at once, and are reused after each delivery.
type conflator struct {
	threshold uint64
	every     uint64 // while conflating, held quotes go every this many messages (ConflateConfig.Interval)
	on        bool   // conflating now
	backlog   uint64 // messages released since the lines were last found empty
	defined   []bool // by instrument id: its definition arrived in this session
	held      []heldQuote
	order     []uint32           // instruments with a held quote, in the order they were first held
	conflated uint64             // quotes and level deltas superseded, and levels created and deleted while held
	levels    []heldLevel        // held price levels, in the order first held
	levelAt   map[levelKey]int32 // index in levels by level
	deliver   func(seq uint64, msg []byte, line int, recvNs int64)
}

func newConflator(cfg ConflateConfig, deliver func(seq uint64, msg []byte, line int, recvNs int64)) *conflator {
	return &conflator{threshold: uint64(cfg.Threshold), every: uint64(cfg.Interval), deliver: deliver, levelAt: map[levelKey]int32{}}
}

// endPoll ends a Poll of the channel: when the lines were found empty
// (caughtUp) the backlog is over, every held quote is delivered, and
// quotes flow one by one again.
func (c *conflator) endPoll(caughtUp bool) {
	if caughtUp {
		c.flush()
		c.on, c.backlog = false, 0
	}
}

// hold takes msg if it is to be conflated: a quote or level delta of a
// defined instrument while the channel conflates. It returns false for a message to be
// delivered now. A definition, status or trade bust first delivers its
// instrument's held quote, so that it never overtakes them; a trade does
// not (see docs/slow-consumers.md).
func (c *conflator) hold(seq uint64, msg []byte, line int, recvNs int64) bool {
	c.backlog++
	if c.backlog > c.threshold {
		c.on = true // the message that passes the threshold is the first conflated
		if (c.backlog-c.threshold)%c.every == 0 {
			// Every Interval messages of a backlog the held quotes go:
			// none waits longer, however long the backlog lasts.
			c.flush()
		}
	}
	if len(msg) < feed.HeaderLen {
		return false
	}
	inst := binary.LittleEndian.Uint32(msg[4:])
	if inst >= maxTrackedInstrument {
		return false
	}
	switch feed.Type(msg[0]) {
	case feed.TypeDefinition:
		c.flushOne(inst)
		c.define(inst)
		return false
	case feed.TypeStatus, feed.TypeTradeBust:
		c.flushOne(inst)
		return false
	case feed.TypeQuote:
	case feed.TypeLevelDelta:
		if !c.on || int(inst) >= len(c.defined) || !c.defined[inst] || len(msg) != feed.LevelDeltaLen {
			return false
		}
		c.holdLevel(inst, seq, msg, line, recvNs)
		return true
	default:
		return false
	}
	if !c.on || int(inst) >= len(c.defined) || !c.defined[inst] || len(msg) > feed.QuoteLen {
		return false
	}
	h := &c.held[inst]
	if h.held {
		c.conflated++
		h.superseded = true
	} else {
		h.held = true
		c.order = append(c.order, inst) // within its capacity: one per instrument
	}
	h.seq, h.line, h.recvNs, h.n = seq, line, recvNs, copy(h.msg[:], msg)
	return true
}

// holdLevel holds level delta msg of inst: the first of its level, or the
// latest, superseding the one held.
func (c *conflator) holdLevel(inst uint32, seq uint64, msg []byte, line int, recvNs int64) {
	body := msg[feed.HeaderLen:]
	key := levelKey{inst: inst, side: feed.Side(body[0]), px: int64(binary.LittleEndian.Uint64(body[8:]))}
	i, ok := c.levelAt[key]
	if !ok {
		i = int32(len(c.levels))
		c.levels = append(c.levels, heldLevel{key: key, first: body[1]})
		c.levelAt[key] = i
	} else {
		c.conflated++
	}
	h := &c.levels[i]
	h.seq, h.line, h.recvNs = seq, line, recvNs
	h.folded++
	copy(h.msg[:], msg)
}

// define marks inst's definition as arrived, growing the tables if inst is
// new and larger than any before.
func (c *conflator) define(inst uint32) {
	if int(inst) >= len(c.defined) {
		n := int(inst) + 1
		c.defined = append(c.defined, make([]bool, n-len(c.defined))...)
		c.held = append(c.held, make([]heldQuote, n-len(c.held))...)
		order := make([]uint32, len(c.order), n)
		copy(order, c.order)
		c.order = order
	}
	c.defined[inst] = true
}

// flushOne delivers inst's held price levels and quote, if any.
func (c *conflator) flushOne(inst uint32) {
	if len(c.levels) > 0 {
		kept := c.levels[:0]
		for i := range c.levels {
			h := &c.levels[i]
			if h.key.inst == inst {
				c.releaseLevel(h)
				delete(c.levelAt, h.key)
				continue
			}
			c.levelAt[h.key] = int32(len(kept))
			kept = append(kept, *h)
		}
		c.levels = kept
	}
	if int(inst) >= len(c.held) || !c.held[inst].held {
		return
	}
	c.release(inst)
	for i, id := range c.order {
		if id == inst {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

// flush delivers every held price level, then every held quote, each in
// the order they were first held.
func (c *conflator) flush() {
	for i := range c.levels {
		c.releaseLevel(&c.levels[i])
	}
	c.levels = c.levels[:0]
	clear(c.levelAt)
	for _, inst := range c.order {
		c.release(inst)
	}
	c.order = c.order[:0]
}

// releaseLevel delivers held level h as the action that brings the handler
// to its latest state, flagged feed.FlagConflated when it folded several
// deltas; a level created and deleted while held is delivered as nothing,
// and its last delta too counts as conflated.
func (c *conflator) releaseLevel(h *heldLevel) {
	action, ok := levelAction(h.first, h.msg[feed.HeaderLen+1])
	if !ok {
		c.conflated++
		return
	}
	msg := h.msg[:]
	msg[feed.HeaderLen+1] = action
	if h.folded > 1 {
		f := binary.LittleEndian.Uint16(msg[2:]) | uint16(feed.FlagConflated)
		binary.LittleEndian.PutUint16(msg[2:], f)
	}
	c.deliver(h.seq, msg, h.line, h.recvNs)
}

// release delivers inst's held quote, flagged feed.FlagConflated when it
// superseded others.
func (c *conflator) release(inst uint32) {
	h := &c.held[inst]
	msg := h.msg[:h.n]
	if h.superseded {
		f := binary.LittleEndian.Uint16(msg[2:]) | uint16(feed.FlagConflated)
		binary.LittleEndian.PutUint16(msg[2:], f)
	}
	h.held, h.superseded = false, false
	c.deliver(h.seq, msg, h.line, h.recvNs)
}

// sessionStart delivers what is held and forgets the definitions: a new
// session numbers its instruments anew.
func (c *conflator) sessionStart() {
	c.flush()
	clear(c.defined)
	c.on, c.backlog = false, 0
}

// behind reports whether c is not nil and conflating: the channel is
// behind its feed.
func (c *conflator) behind() bool { return c != nil && c.on }

// pending returns how many messages are held: quotes and price levels.
func (c *conflator) pending() int { return len(c.order) + len(c.levels) }
