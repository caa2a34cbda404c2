package tickcast

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
)

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Channels is the feed's number of channels (as the publisher's).
	Channels int
	// Join lists the channels to receive; empty means all. ChannelsOf
	// computes the channels of chosen instruments.
	Join []int
	// GroupA and GroupB are channel 0's A and B line groups, as the
	// publisher's; GroupB's zero value means no B line.
	GroupA, GroupB netip.AddrPort
	// NewReceiver opens the transport for one group. The receiver must
	// signal n whenever it publishes datagrams: Run sleeps on n when every
	// ring is empty. Required.
	NewReceiver func(group netip.AddrPort, n *ud.Notifier) (ud.Receiver, error)
}

func (c *SubscriberConfig) validate() error {
	if c.Channels < 1 || c.Channels > 1296 {
		return fmt.Errorf("tickcast: channels %d, want 1..1296", c.Channels)
	}
	if c.NewReceiver == nil {
		return errors.New("tickcast: subscriber config: NewReceiver is required")
	}
	for _, ch := range c.Join {
		if ch < 0 || ch >= c.Channels {
			return fmt.Errorf("tickcast: join channel %d: the feed has channels 0..%d", ch, c.Channels-1)
		}
	}
	if _, err := ChannelGroup(c.GroupA, c.Channels-1); err != nil {
		return fmt.Errorf("tickcast: group: %w", err)
	}
	if c.GroupB.IsValid() {
		if _, err := ChannelGroup(c.GroupB, c.Channels-1); err != nil {
			return fmt.Errorf("tickcast: group-b: %w", err)
		}
	}
	return nil
}

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	// EventSessionStart: the first packet of a new session arrived.
	EventSessionStart EventKind = iota + 1
	// EventSessionEnd: the session's end-of-session packet arrived.
	EventSessionEnd
	// EventSessionAbrupt: a new session replaced one that never sent end of
	// session; LastSeq is the last sequence released from the old one.
	EventSessionAbrupt
	// EventGap: messages Gap.From..Gap.To are missing.
	EventGap
	// EventForeign: a packet of another channel or of an older session
	// arrived on this channel's group and was dropped.
	EventForeign
	// EventMalformed: a datagram that is not a valid MoldUDP64 packet was
	// dropped; Err says why.
	EventMalformed
)

var eventNames = [...]string{"", "session-start", "session-end", "session-abrupt", "gap", "foreign", "malformed"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// Event is a stream event of one channel.
type Event struct {
	Kind    EventKind
	Channel int
	Line    Line
	Session mold.Session
	Gap     seqgap.Range // EventGap
	LastSeq uint64       // EventSessionAbrupt, EventSessionEnd: last sequence of the session
	Err     error        // EventMalformed
}

// Handler receives a subscriber's messages, in sequence order per channel,
// and its events. msg is valid only during the call: copy what you keep.
type Handler interface {
	Message(ch int, seq uint64, msg []byte, recvNs int64)
	Event(ev *Event)
}

// SubscriberStats are a subscriber's cumulative counters over all joined
// channels.
type SubscriberStats struct {
	Packets     uint64 // datagrams taken from the receive rings
	Messages    uint64 // messages released to the handler
	Gaps        uint64 // gap events
	Missing     uint64 // messages in gaps
	DupPackets  uint64 // packets that carried nothing new
	DupMessages uint64 // messages dropped as already released
	Foreign     uint64 // packets of other channels or older sessions
	Malformed   uint64 // datagrams that failed to parse
	Sessions    uint64 // sessions started
	Ended       uint64 // sessions that ended with end of session
	Abrupt      uint64 // sessions replaced without end of session
	KernelDrops uint64 // datagrams the kernel dropped for our sockets
	RingFull    uint64 // times a receive ring was full
	Truncated   uint64 // datagrams larger than a slot
	WinsA       uint64 // packets whose messages were first seen on line A
	WinsB       uint64 // ... on line B
}

// Subscriber receives channels of a tickcast feed and releases their
// messages in order. Poll and Run are called from one goroutine.
type Subscriber struct {
	cfg    SubscriberConfig
	notify *ud.Notifier
	chans  []*subChannel
	stats  SubscriberStats
	ev     Event // scratch, so events do not escape per call
}

type subChannel struct {
	idx     int
	lines   []ud.Receiver
	tracker seqgap.Tracker
	ended   bool
}

// ChannelsOf returns the channels that carry the given symbols, ascending,
// without duplicates.
func ChannelsOf(symbols []string, channels int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, s := range symbols {
		sym, err := feed.MakeSymbol(s)
		if err != nil {
			return nil, err
		}
		ch := feed.ChannelOf(sym, channels)
		if !seen[ch] {
			seen[ch] = true
			out = append(out, ch)
		}
	}
	slices.Sort(out)
	return out, nil
}

// NewSubscriber joins the configured channels' groups.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	join := cfg.Join
	if len(join) == 0 {
		for ch := 0; ch < cfg.Channels; ch++ {
			join = append(join, ch)
		}
	}
	s := &Subscriber{cfg: cfg, notify: ud.NewNotifier()}
	for _, ch := range join {
		sc := &subChannel{idx: ch}
		s.chans = append(s.chans, sc)
		bases := []netip.AddrPort{cfg.GroupA}
		if cfg.GroupB.IsValid() {
			bases = append(bases, cfg.GroupB)
		}
		for li, base := range bases {
			g, _ := ChannelGroup(base, ch)
			r, err := cfg.NewReceiver(g, s.notify)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("tickcast: channel %d line %s: join %s: %w", ch, Line(li), g, err)
			}
			sc.lines = append(sc.lines, r)
		}
	}
	return s, nil
}

// Close leaves every group.
func (s *Subscriber) Close() error {
	var firstErr error
	for _, sc := range s.chans {
		for _, r := range sc.lines {
			if err := r.Close(); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// Channels returns the joined channels.
func (s *Subscriber) Channels() []int {
	out := make([]int, len(s.chans))
	for i, sc := range s.chans {
		out[i] = sc.idx
	}
	return out
}

// AllEnded reports whether every joined channel has seen end of session.
func (s *Subscriber) AllEnded() bool {
	for _, sc := range s.chans {
		if !sc.ended {
			return false
		}
	}
	return true
}

// Stats returns the counters, including the transports' kernel drop counts.
func (s *Subscriber) Stats() SubscriberStats {
	st := s.stats
	for _, sc := range s.chans {
		for _, r := range sc.lines {
			rs := r.Stats()
			st.KernelDrops += rs.KernelDrops
			st.RingFull += rs.RingFull
			st.Truncated += rs.Truncated
		}
	}
	return st
}

// ReceiverStats returns the transport counters of channel index i (in
// Channels order) and line l.
func (s *Subscriber) ReceiverStats(i int, l Line) ud.RecvStats {
	return s.chans[i].lines[l].Stats()
}

// Poll takes what the receive rings hold, up to about max messages, and
// hands it to h. It never blocks and returns the number of messages
// released. It allocates nothing unless a malformed packet arrives.
func (s *Subscriber) Poll(h Handler, max int) int {
	released := 0
	for _, sc := range s.chans {
		for released < max {
			// Take the packet with the lowest sequence among the lines'
			// heads, so that a packet lost on one line is filled by the
			// other line's copy whenever it has already arrived.
			best, bestSeq := -1, uint64(0)
			for li, r := range sc.lines {
				slot := r.Peek(0)
				if slot == nil {
					continue
				}
				hdr, err := mold.DecodeHeader(slot.Data())
				seq := hdr.Seq
				if err != nil {
					seq = 0 // handle malformed packets first: they go nowhere
				}
				if best < 0 || seq < bestSeq {
					best, bestSeq = li, seq
				}
			}
			if best < 0 {
				break
			}
			r := sc.lines[best]
			slot := r.Peek(0)
			released += s.packet(sc, Line(best), slot, h)
			r.Release(1)
		}
	}
	return released
}

func (s *Subscriber) packet(sc *subChannel, line Line, slot *ud.Slot, h Handler) int {
	s.stats.Packets++
	p, err := mold.Parse(slot.Data())
	ev := &s.ev
	*ev = Event{Channel: sc.idx, Line: line}
	if err != nil {
		s.stats.Malformed++
		ev.Kind, ev.Err = EventMalformed, err
		h.Event(ev)
		return 0
	}
	ev.Session = p.Session
	if SessionChannel(p.Session) != sc.idx || s.older(sc, p.Session) {
		s.stats.Foreign++
		ev.Kind = EventForeign
		h.Event(ev)
		return 0
	}
	v := sc.tracker.Packet(int(line), p.Header)
	if v.NewSession {
		if v.HadPrev && !v.PrevEndedClean {
			s.stats.Abrupt++
			ev.Kind, ev.Session, ev.LastSeq = EventSessionAbrupt, v.PrevSession, v.PrevLastSeq
			h.Event(ev)
			ev.Session = p.Session
		}
		s.stats.Sessions++
		sc.ended = false
		ev.Kind = EventSessionStart
		h.Event(ev)
	}
	if v.Gap.Len() > 0 {
		s.stats.Gaps++
		s.stats.Missing += v.Gap.Len()
		ev.Kind, ev.Gap = EventGap, v.Gap
		h.Event(ev)
	}
	if v.EndOfSession {
		s.stats.Ended++
		sc.ended = true
		ev.Kind, ev.LastSeq = EventSessionEnd, p.Seq-1
		h.Event(ev)
	}
	if p.Messages() > 0 && v.Release == 0 {
		s.stats.DupPackets++
	}
	s.stats.DupMessages += uint64(v.Skip)
	if v.Release == 0 {
		return 0
	}
	if line == LineA {
		s.stats.WinsA++
	} else {
		s.stats.WinsB++
	}
	it := p.Iter()
	for i := 0; i < v.Skip; i++ {
		it.Next()
	}
	for msg, seq, ok := it.Next(); ok; msg, seq, ok = it.Next() {
		h.Message(sc.idx, seq, msg, slot.RecvNs)
	}
	s.stats.Messages += uint64(v.Release)
	return v.Release
}

// older reports whether session is older than the channel's current one: its
// start time (the eight digits after the channel) sorts before. Such packets
// come from a feed handler that has been replaced and are dropped.
func (s *Subscriber) older(sc *subChannel, session mold.Session) bool {
	cur, ok := sc.tracker.Session()
	if !ok || cur == session {
		return false
	}
	return string(session[2:]) < string(cur[2:])
}

// Run polls until ctx is done or stop (if not nil), checked after each
// poll, returns true. When every ring is empty it sleeps until a receiver
// signals new data; the wakeup costs a scheduler round trip (microseconds),
// the price of not spinning. Programs that want the lowest latency call Poll
// in their own spinning loop instead.
func (s *Subscriber) Run(ctx context.Context, h Handler, stop func() bool) error {
	done := ctx.Done()
	poll := func() int { return s.Poll(h, 4096) }
	for {
		n := poll()
		if stop != nil && stop() {
			return nil
		}
		if n > 0 {
			continue
		}
		// The timeout only bounds how late stop is checked on an idle feed.
		if !s.notify.Wait(50*time.Millisecond, done, poll) {
			return ctx.Err()
		}
	}
}
