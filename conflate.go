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

// conflator is one channel's conflation state. Its tables are indexed by
// instrument id and grow when a definition names a larger id, never per
// quote: holding a quote copies it into memory allocated before.
type conflator struct {
	threshold uint64
	every     uint64 // while conflating, held quotes go every this many messages (ConflateConfig.Interval)
	on        bool   // conflating now
	backlog   uint64 // messages released since the lines were last found empty
	defined   []bool // by instrument id: its definition arrived in this session
	held      []heldQuote
	order     []uint32 // instruments with a held quote, in the order they were first held
	conflated uint64   // quotes superseded by a later quote of their instrument
	deliver   func(seq uint64, msg []byte, line int, recvNs int64)
}

func newConflator(cfg ConflateConfig, deliver func(seq uint64, msg []byte, line int, recvNs int64)) *conflator {
	return &conflator{threshold: uint64(cfg.Threshold), every: uint64(cfg.Interval), deliver: deliver}
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

// hold takes msg if it is to be conflated: a quote of a defined instrument
// while the channel conflates. It returns false for a message to be
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

// flushOne delivers inst's held quote, if any.
func (c *conflator) flushOne(inst uint32) {
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

// flush delivers every held quote, in the order they were first held.
func (c *conflator) flush() {
	for _, inst := range c.order {
		c.release(inst)
	}
	c.order = c.order[:0]
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

// pending returns how many quotes are held.
func (c *conflator) pending() int { return len(c.order) }
