package tickcast

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seal"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
)

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Channels is the feed's number of channels (as the publisher's),
	// 1..config.MaxChannels. Required.
	Channels int
	// Join lists the channels to receive, each in 0..Channels-1; empty
	// means all, or with Symbols the channels that carry them (ChannelsOf).
	Join []int
	// Symbols, if not empty, filters the joined channels to these
	// instruments' messages: the handler gets only the messages (snapshots'
	// included) of instruments whose last definition named one of them; the
	// other stream messages are counted as SubscriberStats.Filtered. Gaps
	// are requested whatever instruments they held. See docs/operations.md
	// ("Symbol filters").
	Symbols []string
	// GroupA and GroupB are channel 0's A and B line groups, as the
	// publisher's; GroupB's zero value means no B line.
	GroupA, GroupB netip.AddrPort
	// NewReceiver opens the transport of one line: the channel, A or B,
	// and the line's group (ChannelGroup of GroupA or GroupB). Each
	// transport package provides one (udp.Receivers, rdma.Receivers). A
	// receiver with a receive loop must signal n whenever it publishes
	// datagrams: Run sleeps on n when every ring is empty. A receiver
	// without one (ud.Filler, modes Direct and DirectSpin) is filled by
	// Poll itself, and a Direct one registers its socket with n
	// (Notifier.Watch), so that Run sleeps in one epoll_wait over every
	// line. Required.
	NewReceiver ud.NewReceiverFunc
	// Spin makes Run poll without ever sleeping, on a thread of its own:
	// for DirectSpin receivers, which nothing else fills. With Backoff it
	// sleeps about 50 µs in the kernel after a run of empty polls, for
	// hosts with fewer cores than spinning threads.
	Spin, Backoff bool
	// SpinWait makes Run keep polling for this long after its last
	// message before it sleeps: spin, then wait. Messages that come closer
	// together than SpinWait are then taken without a wake-up, for a core
	// kept busy meanwhile. Zero sleeps at once; Spin never sleeps.
	SpinWait time.Duration
	// Tracker tunes gap handling (window, gap delay, lost-after, stale);
	// zero fields take seqgap's defaults.
	Tracker seqgap.Config
	// Recovery, if set, fills gaps over NATS; nil means none: gaps wait
	// Tracker.LostAfter for late packets and are then reported lost.
	Recovery *recovery.Client
	// Keys, if set, opens every data packet (package seal) before it
	// touches the channel's sequence, session or window: one that does
	// not verify is dropped, counted (SubscriberStats.Unauthenticated, or
	// NoKey for a session or epoch it holds no key for, which also asks
	// Keys to fetch) and never delivered. Heartbeats and ends of session
	// are not sealed: what they claim is checked with Recovery
	// (seqgap.Config.UnsealedControl). natskeys.Fetcher is the source the
	// command uses. The keys of an encrypted channel (feed handler
	// --encrypt) decrypt its messages as they verify them; a subscriber
	// without Keys must not join such a channel (natskeys.Encrypted says
	// which are), since it would take the ciphertext for messages.
	Keys KeySource
	// Observer, if set, is told the latency of every stream message as it
	// is released and of every recovery answer (see
	// tickprom.LatencyMetrics). It costs one clock read per packet.
	Observer Observer
	// Conflate, when On, delivers each instrument's latest quote instead
	// of every quote while a channel is behind (see ConflateConfig).
	Conflate ConflateConfig
}

var subscriberCheck = config.Checker{Pkg: "tickcast", Struct: "SubscriberConfig"}

// withDefaults returns c with its zero fields set to their defaults: an
// empty Join lists the channels of Symbols, or without Symbols every
// channel, of a valid Channels. A SubscriberConfig
// has no default of its own beside this; Tracker's zero fields take
// seqgap's defaults in seqgap.New.
func (c SubscriberConfig) withDefaults() SubscriberConfig {
	if len(c.Join) == 0 && len(c.Symbols) > 0 && c.Channels >= 1 && c.Channels <= config.MaxChannels {
		c.Join, _ = ChannelsOf(c.Symbols, c.Channels) // nil for a bad symbol, which validate reports
	}
	if len(c.Join) == 0 && c.Channels >= 1 && c.Channels <= config.MaxChannels {
		c.Join = make([]int, c.Channels)
		for ch := range c.Join {
			c.Join[ch] = ch
		}
	}
	c.Conflate = c.Conflate.withDefaults()
	return c
}

// validate checks a SubscriberConfig whose defaults are set.
func (c SubscriberConfig) validate() error {
	bad := subscriberCheck.Invalid
	if err := subscriberCheck.Channels("Channels", c.Channels); err != nil {
		return err
	}
	if c.NewReceiver == nil {
		return bad("NewReceiver", nil, "required")
	}
	for _, s := range c.Symbols {
		if _, err := feed.MakeSymbol(s); err != nil {
			return bad("Symbols", s, "%v", err)
		}
	}
	if err := c.Conflate.validate(); err != nil {
		return err
	}
	for _, ch := range c.Join {
		if ch < 0 || ch >= c.Channels {
			return bad("Join", ch, "the feed has channels 0..%d", c.Channels-1)
		}
	}
	if _, err := ChannelGroup(c.GroupA, c.Channels-1); err != nil {
		return bad("GroupA", c.GroupA, "%v", err)
	}
	if c.GroupB.IsValid() {
		if _, err := ChannelGroup(c.GroupB, c.Channels-1); err != nil {
			return bad("GroupB", c.GroupB, "%v", err)
		}
	}
	if c.SpinWait < 0 || c.SpinWait > time.Second {
		return bad("SpinWait", c.SpinWait, "want 0..1s")
	}
	return nil
}

// EventKind says what an Event reports. The subscriber's kinds are its own:
// those that come from the tracker are mapped from seqgap's kinds one by one
// (trackerKinds), so neither numbering depends on the other.
type EventKind uint8

// Event kinds.
const (
	// EventSessionStart: the first packet of a new session arrived.
	EventSessionStart EventKind = iota + 1
	// EventSessionEnd: the session's end of session arrived; LastSeq is its
	// last sequence.
	EventSessionEnd
	// EventSessionAbrupt: a new session replaced one that never sent end of
	// session; LastSeq is the last sequence known of the old one.
	EventSessionAbrupt
	// EventGap: Range went missing; it will be recovered or reported lost.
	EventGap
	// EventRequest: Range was requested from recovery.
	EventRequest
	// EventLost: Range is lost for good; Reason says why.
	EventLost
	// EventStale: the channel received nothing, not even a heartbeat, for
	// the tracker's StaleAfter.
	EventStale
	// EventFresh: packets again after EventStale.
	EventFresh
	// EventForeign: a packet of another channel or of an older session
	// arrived on this channel's group and was dropped.
	EventForeign
	// EventMalformed: a datagram that is not a valid MoldUDP64 packet was
	// dropped; Err says why.
	EventMalformed
	// EventInstrumentGap: Instrument's per-instrument sequence skipped Range:
	// those of its messages were in a lost range (or before a late join).
	EventInstrumentGap
	// EventSnapshot: the channel's state as of sequence LastSeq follows, as
	// Message calls with sequence 0 (each instrument's last definition,
	// status, quote and trade, then its price levels as new-level deltas:
	// package book); the stream resumes at LastSeq+1. It answers
	// Range, missing because of a late join or too old to replay.
	EventSnapshot
	// EventCompeting: packets of Session, another session than the one
	// followed, arrive on the channel's groups while the followed one is
	// alive: another publisher on the feed's groups, or a restart still
	// unconfirmed. Reported once per competing session; its packets are
	// counted (SubscriberStats.Competing) and never delivered. The
	// subscriber follows it only once the followed session ends, goes
	// silent (seqgap.Config.StaleAfter), or recovery names it.
	EventCompeting
	// EventSessionNamed: before the channel's first packet, recovery named
	// Session as the one the channel publishes. A first packet of that
	// session is delivered at once; one of another session waits for
	// recovery's word (seqgap.Config.ConfirmFirst).
	EventSessionNamed
	// EventUnauthenticated: a data packet that does not verify (forged,
	// altered, or under a key not held) was dropped; Err says why.
	EventUnauthenticated
)

// KeySource gives a subscriber the keys of each channel (package seal).
type KeySource interface {
	// Keys returns channel ch's keys, or nil if it has none. It is called
	// for every data packet and must not block.
	Keys(ch int) *seal.Keys
	// Miss says that a packet of channel ch came under session, or an
	// epoch of it, whose key is not held: fetch the keys. It must not
	// block.
	Miss(ch int, session mold.Session)
}

// eventNames are the names logs and JSON show.
var eventNames = [...]string{
	EventSessionStart:    "session-start",
	EventSessionEnd:      "session-end",
	EventSessionAbrupt:   "session-abrupt",
	EventGap:             "gap",
	EventRequest:         "request",
	EventLost:            "lost",
	EventStale:           "stale",
	EventFresh:           "fresh",
	EventForeign:         "foreign",
	EventMalformed:       "malformed",
	EventInstrumentGap:   "instrument-gap",
	EventSnapshot:        "snapshot",
	EventCompeting:       "competing",
	EventSessionNamed:    "session-named",
	EventUnauthenticated: "unauthenticated",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k != 0 {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// trackerKinds maps the tracker's event kinds to the subscriber's.
var trackerKinds = [...]EventKind{
	seqgap.EventSessionStart:  EventSessionStart,
	seqgap.EventSessionEnd:    EventSessionEnd,
	seqgap.EventSessionAbrupt: EventSessionAbrupt,
	seqgap.EventGap:           EventGap,
	seqgap.EventLost:          EventLost,
	seqgap.EventStale:         EventStale,
	seqgap.EventFresh:         EventFresh,
	seqgap.EventCompeting:     EventCompeting,
	seqgap.EventSessionNamed:  EventSessionNamed,
}

// Event is a stream event of one channel.
type Event struct {
	Kind    EventKind
	Channel int
	// Line is the line whose packet caused the event (LineA, LineB), or
	// LineRecovery.
	Line       Line
	Session    mold.Session
	Range      seqgap.Range      // EventGap, EventRequest, EventLost, EventInstrumentGap
	LastSeq    uint64            // EventSessionEnd, EventSessionAbrupt
	Reason     seqgap.LossReason // EventLost
	Instrument uint32            // EventInstrumentGap
	Err        error             // EventMalformed
}

// Handler receives a subscriber's messages, in sequence order per channel,
// and its events. msg is valid only during the call: copy what you keep.
// A message with sequence 0 is part of a snapshot (see EventSnapshot).
// A conflating subscriber (SubscriberConfig.Conflate) delivers a held quote
// with its own sequence after later messages of other instruments, and
// after later trades of its own; a quote that replaced earlier ones carries
// feed.FlagConflated.
type Handler interface {
	Message(ch int, seq uint64, msg []byte, recvNs int64)
	Event(ev *Event)
}

// SubscriberStats are a subscriber's cumulative counters over all joined
// channels. Each counter has one name from seqgap.Stats to the
// subscriber's JSON summary (cmd/subscriber): the Go name is the summary
// key in CamelCase (Reordered is "reordered", WindowFull "window_full",
// Missing "missing"). Messages and Truncated are not in the summary (its
// "received" is the handler's own count). The Prometheus names of package
// tickprom are listed in docs/operations.md; a few say more than the key
// (Missing is tickcast_subscriber_messages_lost_total by reason, WindowFull
// window_overflow_messages_total, Duplicates duplicate_messages_total,
// Stale stale_events_total).
type SubscriberStats struct {
	Packets   uint64 // datagrams taken from the receive rings
	Messages  uint64 // messages released to the handler
	Filtered  uint64 // messages released in order that the symbol filter held back (SubscriberConfig.Symbols)
	Gaps      uint64 // gaps detected
	Requests  uint64 // ranges requested from recovery
	Recovered uint64 // messages released that came from recovery, Filtered ones included
	// RecoveredArchive counts those of Recovered that the feed handler
	// read from its archive: evicted from its store.
	RecoveredArchive uint64
	Reordered        uint64 // messages that waited out of order in the window
	Missing          uint64 // messages declared lost
	LostRanges       uint64 // lost ranges reported
	WindowFull       uint64 // messages that arrived beyond the window and forced a loss
	DuplicatePackets uint64 // packets that carried nothing new
	Duplicates       uint64 // messages dropped as already had
	Foreign          uint64 // packets of other channels or older sessions
	Competing        uint64 // packets of a competing session (EventCompeting), dropped
	// Unvetted counts messages delivered of a session that recovery then
	// named a competitor: one alone on the group while recovery could not
	// yet tell (seqgap.Stats.Unvetted). Above zero: see the runbook,
	// "Competing publishers".
	Unvetted  uint64
	Malformed uint64 // datagrams that failed to parse
	// Unauthenticated counts data packets dropped because their seal did
	// not verify (SubscriberConfig.Keys): forged or altered. NoKey counts
	// those of a session or key epoch not held (a new session before its
	// keys came, or a forgery under another session); their messages, if
	// genuine, are recovered as a gap.
	Unauthenticated uint64
	NoKey           uint64
	Sessions        uint64 // sessions started
	SessionsEnded   uint64 // sessions that ended with end of session
	SessionsAbrupt  uint64 // sessions replaced without end of session
	Stale           uint64 // times a channel went stale
	InstrumentGaps  uint64 // per-instrument sequence skips
	KernelDrops     uint64 // datagrams the kernel dropped for our sockets
	RingFull        uint64 // times a receive ring was full
	Coalesced       uint64 // packets that arrived coalesced (UDP GRO) and were cut apart
	Truncated       uint64 // datagrams larger than a slot
	Snapshots       uint64 // snapshots applied
	Conflated       uint64 // quotes superseded by a later quote of their instrument (ConflateConfig), not released
	PacketsA        uint64 // packets received on line A
	PacketsB        uint64 // ... on line B
	WinsA           uint64 // packets that brought new messages first on line A
	WinsB           uint64 // ... on line B
}

// Subscriber receives channels of a tickcast feed and releases their
// messages in order. Poll and Run are called from one goroutine.
type Subscriber struct {
	cfg    SubscriberConfig
	notify *ud.Notifier
	chans  []*subChannel
	byIdx  []*subChannel // by channel number; nil if not joined
	h      Handler       // the handler of the Poll in progress
	ev     Event         // scratch, so events do not escape per call
	now    int64         // the clock of the Poll in progress
	apply  func(*recovery.Result)

	recoveryResults, recoveryLatencySum, recoveryLatencyMax, snapshots uint64
	recoveredArchive                                                   uint64 // messages released from answers read from the archive

	foreign, malformed, packets, ended, instGaps uint64
	unauth, noKey                                uint64

	lastPoll int64 // when Poll last ran (Now)
	// stallNs is pollStall in ns; tests raise it to see what the readiness
	// marks do without the stall's reset.
	stallNs int64

	snap  statsSnapshot // the counters as last published for other goroutines (StatsSnapshot)
	relNs int64         // release time given to the Observer: the clock read before the packet's messages are released
}

// subChannel is one joined channel: its lines, its tracker, and the
// seqgap.Output that forwards to the subscriber's handler.
type subChannel struct {
	s       *Subscriber
	idx     int
	lines   []ud.Receiver
	fill    []ud.Filler // by line: receivers Poll fills itself; nil when none is
	tracker *seqgap.Tracker
	instSeq []uint32 // per-instrument sequence seen last, by instrument id
	filter  channelFilter
	counts  channelCounts
	conf    *conflator // nil unless SubscriberConfig.Conflate.On
	// keyWaitNs is when packets began to wait for their session's keys
	// (waitKeys), 0 when none waits.
	keyWaitNs int64
}

// maxTrackedInstrument bounds the per-instrument table: ids above it are not
// checked for per-instrument gaps.
const maxTrackedInstrument = 1 << 20

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
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Subscriber{cfg: cfg, notify: ud.NewNotifier(), byIdx: make([]*subChannel, cfg.Channels), stallNs: int64(pollStall)}
	s.apply = s.applyRecovered // one method value, not one per Poll
	want := newSymbolSet(cfg.Symbols)
	if cfg.Recovery != nil {
		cfg.Recovery.SetNotify(s.notify.Signal)
	}
	tcfg := cfg.Tracker
	tcfg.Recovery = cfg.Recovery != nil
	tcfg.ConfirmFirst = tcfg.Recovery
	tcfg.Trim = feed.Trim
	tcfg.UnsealedControl = cfg.Keys != nil
	for _, ch := range cfg.Join {
		tr, err := seqgap.New(tcfg)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("tickcast: channel %d: %w", ch, err)
		}
		// Recovery is asked at once which session the channel publishes,
		// so the first session met is checked against the answer without
		// waiting for it (seqgap.Config.ConfirmFirst).
		tr.Probe(Now())
		sc := &subChannel{s: s, idx: ch, tracker: tr, filter: newChannelFilter(want)}
		if cfg.Conflate.On {
			sc.conf = newConflator(cfg.Conflate, sc.deliver)
		}
		s.chans = append(s.chans, sc)
		s.byIdx[ch] = sc
		lines := channelLines(cfg.GroupA, cfg.GroupB, ch)
		for li, id := range lines {
			r, err := cfg.NewReceiver(id, s.notify)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("tickcast: channel %d line %s: join %s: %w", ch, id.Line, id.Group, err)
			}
			sc.lines = append(sc.lines, r)
			if f, ok := r.(ud.Filler); ok {
				if sc.fill == nil {
					sc.fill = make([]ud.Filler, len(lines))
				}
				sc.fill[li] = f
			}
		}
	}
	s.initSnapshot()
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
	s.notify.Close()
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

// AllEnded reports whether every joined channel has seen end of session and
// has nothing outstanding (every gap recovered or reported lost).
func (s *Subscriber) AllEnded() bool {
	for _, sc := range s.chans {
		if !sc.tracker.Complete() {
			return false
		}
	}
	return true
}

// Stats returns the counters, including the transports' kernel drop counts.
func (s *Subscriber) Stats() SubscriberStats {
	st := SubscriberStats{Packets: s.packets, Foreign: s.foreign, Malformed: s.malformed, SessionsEnded: s.ended, InstrumentGaps: s.instGaps, Snapshots: s.snapshots,
		Unauthenticated: s.unauth, NoKey: s.noKey, RecoveredArchive: s.recoveredArchive}
	for _, sc := range s.chans {
		ts := sc.tracker.Stats()
		st.Messages += ts.Messages - sc.filter.filtered
		st.Filtered += sc.filter.filtered
		st.Gaps += ts.Gaps
		st.Requests += ts.Requests
		st.Recovered += ts.Recovered
		st.Reordered += ts.Reordered
		st.Missing += ts.Missing
		st.LostRanges += ts.LostRanges
		st.WindowFull += ts.WindowFull
		st.DuplicatePackets += ts.DuplicatePackets
		st.Duplicates += ts.Duplicates
		st.Sessions += ts.Sessions
		st.SessionsAbrupt += ts.SessionsAbrupt
		st.Competing += ts.Competing
		st.Unvetted += ts.Unvetted
		st.Stale += ts.Stale
		st.PacketsA += ts.PacketsOnLine[0]
		st.PacketsB += ts.PacketsOnLine[1]
		st.WinsA += ts.WinsPerLine[0]
		st.WinsB += ts.WinsPerLine[1]
		if sc.conf != nil {
			st.Conflated += sc.conf.conflated
			st.Messages -= sc.conf.conflated + uint64(sc.conf.pending())
		}
		for _, r := range sc.lines {
			rs := r.Stats()
			st.KernelDrops += rs.KernelDrops
			st.RingFull += rs.RingFull
			st.Coalesced += rs.Coalesced
			st.Truncated += rs.Truncated
		}
	}
	return st
}

// SyncKernelDrops asks every receiver that can (ud.DropSyncer) for its
// kernel drop count as of now, so that Stats counts drops after the last
// datagram received too. It reads files: call it before a final report,
// not per packet. It returns the first error.
func (s *Subscriber) SyncKernelDrops() error {
	var firstErr error
	for _, sc := range s.chans {
		for _, r := range sc.lines {
			if d, ok := r.(ud.DropSyncer); ok {
				if err := d.SyncDrops(); err != nil && firstErr == nil {
					firstErr = err
				}
			}
		}
	}
	return firstErr
}

// ReceiverStats returns the transport counters of channel index i (in
// Channels order) and line l.
func (s *Subscriber) ReceiverStats(i int, l Line) ud.RecvStats {
	return s.chans[i].lines[l].Stats()
}

// Receiver returns the transport of channel index i (in Channels order) and
// line l, for transport-specific information.
func (s *Subscriber) Receiver(i int, l Line) ud.Receiver { return s.chans[i].lines[l] }

// Poll takes what the receive rings hold, up to about max messages, hands it
// to h, and enforces the trackers' deadlines. It never blocks and returns
// the number of messages released. It allocates nothing unless a malformed
// packet arrives.
func (s *Subscriber) Poll(h Handler, max int) int {
	s.h = h
	released := uint64(0)
	now := Now()
	if s.lastPoll != 0 && now-s.lastPoll > s.stallNs {
		// This goroutine was held (a slow handler, a blocking recovery
		// call, the scheduler): the epoll readiness marks are old. Ask
		// every socket before judging any channel silent.
		s.notify.SetAllReady()
	}
	s.lastPoll = now
	s.now = now
	if s.cfg.Recovery != nil {
		before := s.releasedTotal()
		s.cfg.Recovery.Drain(s.apply)
		released += s.releasedTotal() - before
	}
	for _, sc := range s.chans {
		released += s.pollChannel(sc, max, now)
	}
	if now >= s.snap.due {
		s.publishStats(now)
	}
	s.h = nil
	return int(released)
}

// pollChannel takes up to about max messages of one channel from its
// lines' rings, runs the tracker's deadlines and sends its requests. It
// returns the messages released.
func (s *Subscriber) pollChannel(sc *subChannel, max int, now int64) uint64 {
	before := sc.tracker.Released()
	tried := 0 // lines filled empty in this Poll, as bits: each is tried once
	empty, asked := false, false
	for sc.tracker.Released()-before < uint64(max) {
		best := sc.nextLine(&tried)
		if best < 0 && sc.conf.behind() && !asked {
			// A conflating channel ends its backlog only on lines truly
			// empty: the readiness marks of direct receivers are as old
			// as the epoll wait before a slow handler's Poll, so ask
			// every socket once more.
			s.notify.SetAllReady()
			asked, tried = true, 0
			best = sc.nextLine(&tried)
		}
		if best < 0 {
			empty = true
			break
		}
		r := sc.lines[best]
		slot := r.Peek(0)
		if s.mustWait(sc, slot) {
			break
		}
		s.packet(sc, best, slot, now)
		r.Release(1)
	}
	if s.cfg.Observer != nil {
		s.relNs = time.Now().UnixNano() // releases by Tick (wall clock, as sendNs)
	}
	sc.tracker.Tick(now, sc)
	s.sendRequests(sc)
	if sc.conf != nil {
		sc.conf.endPoll(empty)
	}
	return sc.tracker.Released() - before
}

// nextLine returns the line whose head packet has the lowest sequence, or
// -1 when every line is empty: the other line's copy of a packet lost on
// one line is then usually taken before the gap is even seen. A line
// without a receive loop is filled here, and one that comes back empty is
// marked in tried and not asked again in this Poll (in DirectSpin each ask
// is a system call).
func (sc *subChannel) nextLine(tried *int) int {
	best, bestSeq := -1, uint64(0)
	for li, r := range sc.lines {
		slot := r.Peek(0)
		if slot == nil && sc.fill != nil && sc.fill[li] != nil && *tried&(1<<li) == 0 {
			if sc.fill[li].Fill() == 0 {
				*tried |= 1 << li
			}
			slot = r.Peek(0)
		}
		if slot == nil {
			continue
		}
		hdr, err := mold.DecodeHeader(slot.Data())
		seq := hdr.Seq
		if err != nil {
			seq = 0 // malformed packets first: they go nowhere
		}
		if best < 0 || seq < bestSeq {
			best, bestSeq = li, seq
		}
	}
	return best
}

// mustWait reports whether slot's packet must stay queued: a late join
// waits for its snapshot and the window is full. It lets the snapshot in
// first if it came; a packet left queued waits in the ring, then the
// socket buffer, rather than the join's prefix being declared lost.
func (s *Subscriber) mustWait(sc *subChannel, slot *ud.Slot) bool {
	if s.cfg.Keys != nil && !slot.Opened && s.waitKeys(sc, slot) {
		return true
	}
	hdr, err := mold.DecodeHeader(slot.Data())
	if err != nil || !sc.tracker.MustWait(hdr.Session, hdr.Seq, hdr.Messages()) {
		return false
	}
	if s.cfg.Recovery != nil {
		s.cfg.Recovery.Drain(s.apply)
	}
	return sc.tracker.MustWait(hdr.Session, hdr.Seq, hdr.Messages())
}

func (s *Subscriber) packet(sc *subChannel, line int, slot *ud.Slot, now int64) {
	s.packets++
	data := slot.Data()
	if s.cfg.Keys != nil && !slot.Opened {
		if n, ok := mold.MessageCount(data); ok && n > 0 {
			var err error
			if data, err = s.open(sc, data); err != nil {
				s.ev = Event{Kind: EventUnauthenticated, Channel: sc.idx, Line: Line(line), Err: err}
				if se := (*seal.Error)(nil); errors.As(err, &se) {
					s.ev.Session = se.Session
				}
				s.h.Event(&s.ev)
				return
			}
		}
	}
	p, err := mold.Parse(data)
	if err != nil {
		s.malformed++
		sc.counts.malformed++
		s.ev = Event{Kind: EventMalformed, Channel: sc.idx, Line: Line(line), Err: err}
		s.h.Event(&s.ev)
		return
	}
	if SessionChannel(p.Session) != sc.idx || s.older(sc, p.Session) {
		s.foreign++
		sc.counts.foreign++
		s.ev = Event{Kind: EventForeign, Channel: sc.idx, Line: Line(line), Session: p.Session}
		s.h.Event(&s.ev)
		return
	}
	if s.cfg.Observer != nil {
		s.relNs = time.Now().UnixNano()
	}
	sc.tracker.Packet(line, p, slot.RecvNs, now, sc)
}

// open verifies the seal of data packet b of channel sc and returns it
// without the seal, or counts why it does not verify.
func (s *Subscriber) open(sc *subChannel, b []byte) ([]byte, error) {
	ks := s.cfg.Keys.Keys(sc.idx)
	if ks == nil {
		ks = &noKeys
	}
	out, err := ks.Open(b)
	if err == nil {
		return out, nil
	}
	var se *seal.Error
	errors.As(err, &se)
	switch {
	case se == nil || se.Err == seal.ErrNotSealable:
		// Not a well-formed MoldUDP64 packet: no seal to judge.
		s.malformed++
		sc.counts.malformed++
	case !ks.HasSession(se.Session):
		// A session whose keys are not held: a new one (its keys are
		// fetched now, its first messages recovered), or a forgery.
		s.noKey++
		sc.counts.noKey++
		s.cfg.Keys.Miss(sc.idx, se.Session)
	default:
		// A session whose keys are held: forged or altered (or, at a
		// rotation, under a key fetched late: fetch it).
		if se.Err == seal.ErrUnknownEpoch {
			s.cfg.Keys.Miss(sc.idx, se.Session)
		}
		s.unauth++
		sc.counts.unauth++
	}
	return nil, err
}

// keyWait bounds how long a channel's data packets wait in their ring for
// the keys of their session (SubscriberConfig.Keys), which are fetched as
// they arrive: a subscriber started before its feed handler, or one whose
// feed handler restarted with a new session, fetches them when the feed
// handler's first packet shows it is up.
const keyWait = 2 * time.Second

// waitKeys reports whether slot, a data packet of a session whose keys are
// not held, must wait for them. It waits only while the channel has no
// live session (none yet, only heartbeats so far, or the one followed
// ended or went silent), so a forger cannot stall a live stream: there,
// such a packet is dropped at once (NoKey) and the keys fetched. A session
// known only from its heartbeats, which are not sealed, is not live yet: a
// feed handler that starts idle sends a heartbeat before its first data
// packet, and that packet waits for the keys as any first one does. A wait lasts at most keyWait, until a
// packet of a held session comes; then the packet is dropped as NoKey.
func (s *Subscriber) waitKeys(sc *subChannel, slot *ud.Slot) bool {
	b := slot.Data()
	if n, ok := mold.MessageCount(b); !ok || n == 0 {
		return false
	}
	session := mold.Session(b[:len(mold.Session{})])
	if ks := s.cfg.Keys.Keys(sc.idx); ks != nil && ks.HasSession(session) {
		sc.keyWaitNs = 0
		return false
	}
	if _, ok := sc.tracker.Session(); ok && sc.tracker.Released() > 0 && !sc.tracker.Ended() && !sc.tracker.Stale() {
		return false
	}
	if sc.keyWaitNs == 0 {
		sc.keyWaitNs = s.now
	}
	if s.now-sc.keyWaitNs >= int64(keyWait) {
		return false
	}
	s.cfg.Keys.Miss(sc.idx, session)
	return true
}

// noKeys holds no key: the keys of a channel whose source has none.
var noKeys seal.Keys

// older reports whether session is older than the channel's current one: its
// start time (the eight digits after the channel) sorts before. Such packets
// come from a feed handler that has been replaced and are dropped.
//
// Only while the current session is alive: once it has ended or gone silent,
// a session that sorts older is taken anyway (its feed handler's clock may be
// behind, or stepped back), so a channel can never be stuck on a dead stream.
func (s *Subscriber) older(sc *subChannel, session mold.Session) bool {
	cur, ok := sc.tracker.Session()
	if !ok || cur == session || sc.tracker.Ended() || sc.tracker.Stale() {
		return false
	}
	return string(session[2:]) < string(cur[2:])
}

// Release implements seqgap.Output: it checks the message's per-instrument
// sequence and hands it to the handler, unless the symbol filter holds it
// back.
func (sc *subChannel) Release(seq uint64, msg []byte, line int, recvNs int64) {
	s := sc.s
	if !sc.filter.stream(msg) {
		return
	}
	if len(msg) >= feed.HeaderLen {
		inst := binary.LittleEndian.Uint32(msg[4:])
		iseq := binary.LittleEndian.Uint32(msg[8:])
		if inst < maxTrackedInstrument {
			if int(inst) >= len(sc.instSeq) {
				// Grows only when a new, larger instrument id appears.
				sc.instSeq = append(sc.instSeq, make([]uint32, int(inst)+1-len(sc.instSeq))...)
			}
			if last := sc.instSeq[inst]; iseq > last+1 {
				s.instGaps++
				s.ev = Event{Kind: EventInstrumentGap, Channel: sc.idx, Line: Line(line), Instrument: inst,
					Range: seqgap.Range{From: uint64(last) + 1, To: uint64(iseq) - 1}}
				s.ev.Session, _ = sc.tracker.Session()
				s.h.Event(&s.ev)
			}
			sc.instSeq[inst] = iseq
		}
	}
	if sc.conf != nil && sc.conf.hold(seq, msg, line, recvNs) {
		return
	}
	sc.deliver(seq, msg, line, recvNs)
}

// deliver hands a released message to the handler: at once, or when a
// conflating channel lets a held quote go.
func (sc *subChannel) deliver(seq uint64, msg []byte, line int, recvNs int64) {
	s := sc.s
	sc.counts.messages[lineIndex(line)]++
	if s.cfg.Observer != nil && len(msg) >= feed.HeaderLen {
		sendNs := int64(binary.LittleEndian.Uint64(msg[feed.SendNsOffset:]))
		s.cfg.Observer.Released(sc.idx, sendNs, recvNs, s.relNs)
	}
	s.h.Message(sc.idx, seq, msg, recvNs)
}

// Event implements seqgap.Output.
func (sc *subChannel) Event(ev *seqgap.Event) {
	s := sc.s
	switch ev.Kind {
	case seqgap.EventSessionStart:
		clear(sc.instSeq)
		if sc.conf != nil {
			sc.conf.sessionStart() // the old session's held quotes go first
		}
	case seqgap.EventSessionEnd:
		s.ended++
	}
	sc.counts.event(ev)
	s.ev = Event{Kind: trackerKinds[ev.Kind], Channel: sc.idx, Line: Line(ev.Line), Session: ev.Session,
		Range: ev.Range, LastSeq: ev.LastSeq, Reason: ev.Reason}
	s.h.Event(&s.ev)
}

func (s *Subscriber) releasedTotal() uint64 {
	n := uint64(0)
	for _, sc := range s.chans {
		n += sc.tracker.Released()
	}
	return n
}

// sendRequests hands the tracker's requests to recovery, each once, and
// reports each to the handler (EventRequest). Handing over never waits for
// NATS: the recovery client sends on its own goroutine.
func (s *Subscriber) sendRequests(sc *subChannel) {
	for _, r := range sc.tracker.Requests() {
		s.cfg.Recovery.Request(sc.idx, r)
		if r.Query {
			continue // asks which session the channel publishes, no messages
		}
		s.ev = Event{Kind: EventRequest, Channel: sc.idx, Line: seqgap.LineRecovery, Session: r.Session, Range: r.Range}
		s.h.Event(&s.ev)
	}
}

// applyRecovered hands a recovery answer to its channel's tracker, on the
// polling goroutine. A snapshot goes to the handler first.
func (s *Subscriber) applyRecovered(r *recovery.Result) {
	if r.Channel < 0 || r.Channel >= len(s.byIdx) || s.byIdx[r.Channel] == nil {
		return
	}
	sc := s.byIdx[r.Channel]
	a := r.Answer()
	if r.Snapshot != nil {
		if !s.applySnapshot(sc, r) {
			a.Outcome = seqgap.AnswerRefused
		}
		sc.tracker.Answer(a, s.now, sc)
		return
	}
	if a.Outcome == seqgap.AnswerSession {
		// Which session the channel publishes: control, not recovery of
		// messages; it counts in no recovery figure.
		sc.tracker.Answer(a, s.now, sc)
		return
	}
	s.recoveryResults++
	lat := uint64(r.Latency)
	s.recoveryLatencySum += lat
	s.recoveryLatencyMax = max(s.recoveryLatencyMax, lat)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Recovered(sc.idx, r.Latency)
		s.relNs = time.Now().UnixNano()
	}
	if r.Archive {
		before := sc.tracker.Stats().Recovered
		sc.tracker.Answer(a, s.now, sc)
		s.recoveredArchive += sc.tracker.Stats().Recovered - before
		return
	}
	sc.tracker.Answer(a, s.now, sc)
}

// applySnapshot hands a channel's snapshot to the handler (EventSnapshot,
// then each state message that passes the symbol filter, with sequence 0);
// the tracker then resumes the stream after the sequence the snapshot
// reflects. It returns false, and hands nothing over, when the snapshot
// cannot fill the range.
func (s *Subscriber) applySnapshot(sc *subChannel, r *recovery.Result) bool {
	snap := r.Snapshot
	if snap.Session != r.Session || snap.Seq+1 < sc.tracker.Next() {
		// The feed handler moved to another session, or the snapshot is
		// older than what was released: it cannot fill the range.
		return false
	}
	s.snapshots++
	if sc.conf != nil {
		sc.conf.flush() // held quotes are older than the snapshot
	}
	s.ev = Event{Kind: EventSnapshot, Channel: sc.idx, Line: LineRecovery, Session: snap.Session,
		LastSeq: snap.Seq, Range: r.Range}
	s.h.Event(&s.ev)
	for _, msg := range snap.Messages {
		if len(msg) >= feed.HeaderLen {
			// Per-instrument sequences continue from the snapshot's.
			inst := binary.LittleEndian.Uint32(msg[4:])
			if inst < maxTrackedInstrument {
				if int(inst) >= len(sc.instSeq) {
					sc.instSeq = append(sc.instSeq, make([]uint32, int(inst)+1-len(sc.instSeq))...)
				}
				sc.instSeq[inst] = max(sc.instSeq[inst], binary.LittleEndian.Uint32(msg[8:]))
				if sc.conf != nil && feed.Type(msg[0]) == feed.TypeDefinition {
					sc.conf.define(inst)
				}
			}
		}
		if sc.filter.pass(msg) {
			s.h.Message(sc.idx, 0, msg, 0)
		}
	}
	return true
}

// RecoveryLatency returns how many recovery answers were applied and their
// mean and maximum latency (request queued to answer received).
func (s *Subscriber) RecoveryLatency() (n uint64, mean, maxLat time.Duration) {
	if s.recoveryResults == 0 {
		return 0, 0, 0
	}
	return s.recoveryResults, time.Duration(s.recoveryLatencySum / s.recoveryResults), time.Duration(s.recoveryLatencyMax)
}

// Run polls until ctx is done or stop (if not nil), checked after each
// poll, returns true. When every ring is empty it sleeps until a receiver
// signals new data or, with Direct receivers, until a socket is readable
// (one epoll_wait over all of them, on this goroutine's thread). With
// SubscriberConfig.Spin it never sleeps: it polls on a thread locked to
// this goroutine.
func (s *Subscriber) Run(ctx context.Context, h Handler, stop func() bool) error {
	done := ctx.Done()
	poll := func() int { return s.Poll(h, 4096) }
	if s.cfg.Spin {
		return s.spin(ctx, poll, stop)
	}
	idleSince := int64(0) // when polls started to come back empty, for SpinWait
	for {
		n := poll()
		if stop != nil && stop() {
			return nil
		}
		if n > 0 {
			// Busy: the readiness marks are as old as the last wait.
			// Refresh them, or a socket found empty once is not read
			// again while another channel keeps this loop busy.
			s.notify.Refresh()
			idleSince = 0
			continue
		}
		if s.cfg.SpinWait > 0 {
			// Spin, then wait: poll on until SpinWait has passed with
			// nothing (Poll read the clock), asking epoll for
			// readiness without waiting.
			if idleSince == 0 {
				idleSince = s.lastPoll
			}
			if s.lastPoll-idleSince < int64(s.cfg.SpinWait) {
				s.notify.Refresh()
				continue
			}
			idleSince = 0
		}
		// The timeout bounds how late deadlines and stop are checked on an
		// idle feed; gap deadlines are milliseconds or more.
		if !s.notify.Wait(time.Millisecond, done, poll) {
			return ctx.Err()
		}
	}
}

// pollStall is the gap between two Polls past which the direct receivers'
// readiness marks are no longer trusted (see Poll). It is well above Run's
// idle wait (1 ms) and well below any staleness limit.
const pollStall = 5 * time.Millisecond

// spinEmptyPolls is how many empty polls in a row a spinning Run makes
// before it backs off (Backoff: ud.BackoffSleep) and checks for cancellation.
const spinEmptyPolls = 256

// spin is Run for SubscriberConfig.Spin.
func (s *Subscriber) spin(ctx context.Context, poll func() int, stop func() bool) error {
	done := ctx.Done()
	_ = ud.LockThread(-1, s.cfg.Backoff) // no CPU asked: cannot fail
	defer runtime.UnlockOSThread()
	idle := ud.Spinner{Polls: spinEmptyPolls, Backoff: s.cfg.Backoff}
	for {
		n := poll()
		if stop != nil && stop() {
			return nil
		}
		if n > 0 {
			idle.Busy()
			continue
		}
		if !idle.Empty() {
			continue
		}
		select {
		case <-done:
			return ctx.Err()
		default:
		}
	}
}
