package tickcast

import (
	"sync"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
)

// Counters for other goroutines.
//
// A Subscriber's and a Publisher's counters are plain fields written by the
// one goroutine that polls (or publishes): making each of them atomic would
// put a locked instruction on the hot path for every message, for the
// benefit of a reader that comes once a second. Instead, the polling
// goroutine copies them into a snapshot under a mutex at most every
// statsInterval, using the clock reading it already has, and readers on
// other goroutines (a Prometheus scrape) take the snapshot under the same
// mutex. The copy goes into memory allocated once, so publishing allocates
// nothing; a reader sees counters at most statsInterval (plus one poll) old.

// statsInterval is how often the polling goroutine publishes the counters.
// Tests shorten it.
var statsInterval = 100 * time.Millisecond

// LineStats are the transport counters of one line of a joined channel.
type LineStats struct {
	ud.RecvStats
	// RingUsed is how many received datagrams waited in the receive ring
	// when the counters were published; RingCap is the ring's size. Both
	// are 0 when the transport does not tell (ud.RingReporter).
	RingUsed, RingCap int
}

// ChannelStats are the counters of one joined channel.
type ChannelStats struct {
	Channel int
	Tracker seqgap.Stats
	// Messages counts the messages released to the handler by where they
	// came from first: line A, line B, or recovery (index 2).
	Messages [3]uint64
	// Filtered counts the messages released in order that the symbol
	// filter held back (SubscriberConfig.Symbols).
	Filtered uint64
	// Missing counts the messages declared lost, by seqgap.LossReason.
	Missing [lossReasons]uint64
	// Foreign and Malformed count the packets dropped on the channel's
	// groups: another channel's or an older session's, and unparsable.
	Foreign, Malformed uint64
	// Unauthenticated and NoKey count the data packets dropped because
	// their seal did not verify, or came under a key not held
	// (SubscriberConfig.Keys).
	Unauthenticated, NoKey uint64
	// Conflated counts the quotes superseded by a later quote of their
	// instrument while the channel conflated (ConflateConfig).
	Conflated uint64
	// Stale is true while the channel receives nothing, not even
	// heartbeats, and its session has not ended (Tracker.Stale counts the
	// times it went stale).
	Stale bool
	// Lines are the channel's lines: A, then B if there is one.
	Lines    [2]LineStats
	NumLines int
}

// lossReasons bounds seqgap.LossReason values (1..4; 0 is unused).
const lossReasons = 5

// channelCounts are the per-channel counters the polling goroutine keeps
// beside the tracker's.
type channelCounts struct {
	messages           [3]uint64
	missing            [lossReasons]uint64
	foreign, malformed uint64
	unauth, noKey      uint64
	stale              bool
}

// event counts what a tracker event tells.
func (c *channelCounts) event(ev *seqgap.Event) {
	switch ev.Kind {
	case seqgap.EventLost:
		if int(ev.Reason) < len(c.missing) {
			c.missing[ev.Reason] += ev.Range.Len()
		}
	case seqgap.EventStale:
		c.stale = true
	case seqgap.EventFresh, seqgap.EventSessionStart:
		c.stale = false
	}
}

// lineIndex maps a seqgap line (LineA, LineB, LineRecovery) to an index of
// ChannelStats.Messages.
func lineIndex(line int) int {
	switch line {
	case 0, 1:
		return line
	}
	return 2
}

// statsSnapshot is a Subscriber's published counters.
type statsSnapshot struct {
	due int64 // when the next publication is due; polling goroutine only

	mu          sync.Mutex
	total       SubscriberStats
	chans       []ChannelStats
	recN, recNs uint64 // recovery answers applied and their latency sum
	recMaxNs    uint64
}

func (s *Subscriber) initSnapshot() {
	s.snap.chans = make([]ChannelStats, len(s.chans))
	for i, sc := range s.chans {
		s.snap.chans[i].Channel = sc.idx
		s.snap.chans[i].NumLines = len(sc.lines)
	}
}

// publishStats copies the counters into the snapshot. It runs on the
// polling goroutine and allocates nothing.
func (s *Subscriber) publishStats(now int64) {
	s.snap.due = now + int64(statsInterval)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Flush()
	}
	total := s.Stats()
	s.snap.mu.Lock()
	defer s.snap.mu.Unlock()
	s.snap.total = total
	s.snap.recN, s.snap.recNs, s.snap.recMaxNs = s.recoveryResults, s.recoveryLatencySum, s.recoveryLatencyMax
	for i, sc := range s.chans {
		cs := &s.snap.chans[i]
		cs.Tracker = sc.tracker.Stats()
		cs.Messages, cs.Missing = sc.counts.messages, sc.counts.missing
		cs.Filtered = sc.filter.filtered
		cs.Foreign, cs.Malformed = sc.counts.foreign, sc.counts.malformed
		cs.Unauthenticated, cs.NoKey = sc.counts.unauth, sc.counts.noKey
		if sc.conf != nil {
			cs.Conflated = sc.conf.conflated
		}
		cs.Stale = sc.counts.stale && !sc.tracker.Complete()
		for l, r := range sc.lines {
			ls := &cs.Lines[l]
			ls.RecvStats = r.Stats()
			if rr, ok := r.(ud.RingReporter); ok {
				ls.RingUsed, ls.RingCap = rr.RingLen(), rr.RingCap()
			}
		}
	}
}

// StatsSnapshot returns the counters as the polling goroutine last
// published them (at most about 100 ms old while Poll or Run is being
// called), the total and per joined channel, in Channels order. Unlike
// Stats, it is safe to call from any goroutine. The channels are appended
// to dst.
func (s *Subscriber) StatsSnapshot(dst []ChannelStats) (SubscriberStats, []ChannelStats) {
	s.snap.mu.Lock()
	defer s.snap.mu.Unlock()
	return s.snap.total, append(dst, s.snap.chans...)
}

// RecoveryStats returns the counters of the recovery client
// (SubscriberConfig.Recovery), zero without one. Like StatsSnapshot, it is
// safe to call from any goroutine.
func (s *Subscriber) RecoveryStats() recovery.ClientStats {
	if s.cfg.Recovery == nil {
		return recovery.ClientStats{}
	}
	return s.cfg.Recovery.Stats()
}

// pubSnapshot is a Publisher's published counters.
type pubSnapshot struct {
	due int64 // when the next publication is due; publishing goroutine only

	mu    sync.Mutex
	total PublisherStats
	in    [256]uint64
	chans []PublisherChannelStats
}

// PublisherChannelStats are the counters of one channel of a Publisher.
type PublisherChannelStats struct {
	Channel    int
	Messages   uint64 // messages published on the channel
	Packets    uint64 // data packets sent (per line counted once)
	Heartbeats uint64
	NextSeq    uint64 // sequence of the channel's next message
	// Lines are the senders' counters: A, then B if there is one (B
	// alone for a publisher of line B only); LineOf names each.
	Lines    [2]ud.SendStats
	LineOf   [2]Line
	NumLines int
}

func (p *Publisher) initSnapshot() {
	p.snap.chans = make([]PublisherChannelStats, len(p.chans))
	for i, pc := range p.chans {
		p.snap.chans[i] = PublisherChannelStats{Channel: i, NumLines: len(pc.lines), NextSeq: 1}
		copy(p.snap.chans[i].LineOf[:], pc.lineOf)
	}
}

// publishStats copies the counters into the snapshot. It runs on the
// publishing goroutine and allocates nothing.
func (p *Publisher) publishStats(now int64) {
	p.snap.due = now + int64(statsInterval)
	p.snap.mu.Lock()
	defer p.snap.mu.Unlock()
	p.snap.total = p.stats
	p.snap.in = p.in
	for i, pc := range p.chans {
		cs := &p.snap.chans[i]
		cs.Messages, cs.Packets, cs.Heartbeats = pc.messages, pc.packets, pc.beats
		cs.NextSeq = pc.builders[pc.queued].NextSeq()
		for l, s := range pc.lines {
			cs.Lines[l] = s.Stats()
		}
	}
}

// StatsSnapshot returns the counters as the publishing goroutine last
// published them (at most about 100 ms old while Run or Poll is being
// called, and current after End): the total, the messages given to Publish
// by type, and per channel. Unlike Stats, it is safe to call from any
// goroutine. The channels are appended to dst.
func (p *Publisher) StatsSnapshot(dst []PublisherChannelStats) (PublisherStats, MessagesByType, []PublisherChannelStats) {
	p.snap.mu.Lock()
	defer p.snap.mu.Unlock()
	return p.snap.total, MessagesByType(p.snap.in), append(dst, p.snap.chans...)
}

// MessagesByType counts messages by their feed.Type.
type MessagesByType [256]uint64

// Of returns the count of type t.
func (m *MessagesByType) Of(t feed.Type) uint64 { return m[t] }
