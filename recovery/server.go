package recovery

import (
	"errors"
	"fmt"
	"github.com/tickcast/tickcast/config"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Feed names the feed in the subjects; default DefaultFeed.
	Feed string
	// Seal, if set, seals every reply part (retransmissions, repairs and
	// snapshots: MoldUDP64 packets) of channel ch as the channel's data
	// packets are (package seal), so that a subscriber opens them with
	// the same keys (ClientConfig.Open). p has seal.Overhead bytes of
	// spare capacity.
	Seal func(ch int, p []byte) ([]byte, error)
	// Channels are the feed's channels, index = channel number.
	Channels []*Channel
	// MaxRetransmit is the most messages one request may ask for,
	// 1..mold.MaxCount; default DefaultMaxRetransmit.
	MaxRetransmit int
	// RateLimit is the messages per second one requester may be sent, with a
	// burst of as many; default DefaultRateLimit.
	RateLimit float64
	// Live says when Live publishes a channel's datagrams: LiveOnDemand
	// (the zero value), LiveAlways or LiveOff.
	Live LiveMode
	// LiveLease is how long one demand message on a channel's demand
	// subject (DemandSubject; docs/recovery.md) keeps its live feed on;
	// default DefaultLiveLease. A consumer repeats its demand well within
	// the lease (every DemandEvery), so the feed stops a lease after the
	// last consumer went away.
	LiveLease time.Duration
	// LiveInterest, if set, tells whether anyone subscribes to a live
	// subject: the embedded NATS server's subscription interest, which
	// also covers consumers that never announce demand. A channel's live
	// feed is on while it reports a subscriber or a demand lease runs. It
	// is asked from a goroutine of the server's, every LiveInterestEvery,
	// never from Live. Nil: demand is the only signal (an external NATS
	// server, whose interest the feed handler cannot see cheaply).
	LiveInterest func(subject string) bool
	// LiveQueue is how many datagrams may wait for publication on the live
	// subjects (see Live); default DefaultLiveQueue. Each slot takes the
	// size of the longest datagram it has held.
	LiveQueue int
	// RepairWindow is how long after publishing a repair the server
	// answers further requests of the same channel, session and range with
	// a pointer to it instead of publishing it again (requests that ask for
	// repairs, HeaderAnswer); default DefaultRepairWindow.
	RepairWindow time.Duration
	// Queue, if set, is the NATS queue group the server takes requests in,
	// so that several feed handlers serving the same sessions share them.
	// The server then also listens to the repair subjects, so that a
	// request for a range another member has just repaired is answered
	// with a pointer to that repair.
	Queue string
	// Hold makes NewServer leave the request subjects alone until Serve
	// is called: a feed handler that is still catching up with the
	// sessions it joins must not answer for them.
	Hold bool
	// Archive, if set, answers a retransmission that the store can no
	// longer make, because the range has been evicted, before the
	// requester falls back to the snapshot: the answer carries
	// HeaderSource SourceArchive. A range Archive does not hold either is
	// refused as too old, as without it.
	Archive ArchiveReader
	// Log receives one line per rejected request (rate-limited to a few per
	// second) and the server's lifecycle.
	Log zerolog.Logger
}

// ErrNotYetArchived is matched by an ArchiveReader's error for a range
// past the last record stored: it is answered CodeNotYet, and asked again.
var ErrNotYetArchived = errors.New("recovery: not archived yet")

// ArchiveReader reads ranges of a channel's messages back from the feed's
// archive (archive.Retriever).
type ArchiveReader interface {
	// Read calls fn with each message of channel ch's session from seq,
	// count of them, in order; an error if it cannot give them all.
	Read(ch int, session mold.Session, seq uint64, count int, fn func(seq uint64, msg []byte) error) error
}

// LiveMode says when a Server publishes a channel's datagrams on its live
// subject (ServerConfig.Live).
type LiveMode uint8

// Live modes.
const (
	// LiveOnDemand publishes a channel's datagrams only while they are
	// wanted: while a demand lease runs (a consumer announced demand on
	// the channel's demand subject within ServerConfig.LiveLease) or
	// ServerConfig.LiveInterest reports a subscriber.
	LiveOnDemand LiveMode = iota
	// LiveAlways publishes every datagram, wanted or not: for consumers
	// of the live subjects that cannot announce demand, on a NATS server
	// whose subscriptions the feed handler does not see. Demands are
	// answered and counted.
	LiveAlways
	// LiveOff publishes none; Live counts every datagram as skipped, and
	// demands are not listened to (nor answered).
	LiveOff
)

// String returns the mode's name: on-demand, always or off.
func (m LiveMode) String() string {
	switch m {
	case LiveOnDemand:
		return "on-demand"
	case LiveAlways:
		return "always"
	case LiveOff:
		return "off"
	}
	return "LiveMode(" + strconv.Itoa(int(m)) + ")"
}

// Defaults of a ServerConfig.
const (
	// DefaultMaxRetransmit is the default ServerConfig.MaxRetransmit.
	DefaultMaxRetransmit = 10000
	// DefaultRateLimit is the default ServerConfig.RateLimit.
	DefaultRateLimit = 1e6
	// DefaultLiveQueue is the default ServerConfig.LiveQueue: at 100,000
	// datagrams a second, 40 ms of live feed.
	DefaultLiveQueue = 4096
	// DefaultRepairWindow is the default ServerConfig.RepairWindow: long
	// enough for every subscriber that lost the same datagram to ask, far
	// shorter than a client's timeout.
	DefaultRepairWindow = 250 * time.Millisecond
	// DefaultLiveLease is the default ServerConfig.LiveLease: five demand
	// intervals (DemandEvery), so that a consumer's demand survives a few
	// lost or late refreshes.
	DefaultLiveLease = 5 * DemandEvery
)

// maxLiveLease bounds ServerConfig.LiveLease.
const maxLiveLease = time.Hour

// maxRepairWindow bounds ServerConfig.RepairWindow.
const maxRepairWindow = time.Minute

// maxLiveQueue bounds ServerConfig.LiveQueue (about 100 MB of slots).
const maxLiveQueue = 1 << 16

var serverCheck = config.Checker{Pkg: "recovery", Struct: "ServerConfig"}

// withDefaults returns c with its zero fields set to their defaults.
func (c ServerConfig) withDefaults() ServerConfig {
	config.Default(&c.Feed, DefaultFeed)
	config.Default(&c.MaxRetransmit, DefaultMaxRetransmit)
	config.Default(&c.RateLimit, DefaultRateLimit)
	config.Default(&c.LiveQueue, DefaultLiveQueue)
	config.Default(&c.RepairWindow, DefaultRepairWindow)
	config.Default(&c.LiveLease, DefaultLiveLease)
	return c
}

// validate checks a ServerConfig whose defaults are set.
func (c ServerConfig) validate() error {
	if err := ValidateFeed(c.Feed); err != nil {
		return serverCheck.Invalid("Feed", c.Feed, "%v", err)
	}
	switch {
	case len(c.Channels) == 0:
		return serverCheck.Invalid("Channels", len(c.Channels), "the server needs at least one channel")
	case c.MaxRetransmit < 1 || c.MaxRetransmit > mold.MaxCount:
		return serverCheck.Invalid("MaxRetransmit", c.MaxRetransmit, "want 1..%d", mold.MaxCount)
	case !(c.RateLimit > 0):
		return serverCheck.Invalid("RateLimit", c.RateLimit, "want more than 0 messages per second")
	case c.LiveQueue < 1 || c.LiveQueue > maxLiveQueue:
		return serverCheck.Invalid("LiveQueue", c.LiveQueue, "want 1..%d datagrams", maxLiveQueue)
	case c.Live > LiveOff:
		return serverCheck.Invalid("Live", c.Live, "want LiveOnDemand, LiveAlways or LiveOff")
	case c.LiveLease < LiveInterestEvery || c.LiveLease > maxLiveLease:
		return serverCheck.Invalid("LiveLease", c.LiveLease, "want %v..%v", LiveInterestEvery, maxLiveLease)
	case c.RepairWindow < 0 || c.RepairWindow > maxRepairWindow:
		return serverCheck.Invalid("RepairWindow", c.RepairWindow, "want 0..%v", maxRepairWindow)
	case strings.ContainsAny(c.Queue, " \t\r\n"):
		return serverCheck.Invalid("Queue", c.Queue, "a NATS queue group name has no white space")
	}
	return nil
}

// ServerStats are a server's cumulative counters.
type ServerStats struct {
	Requests       uint64 // retransmit requests received
	MessagesServed uint64 // messages sent in retransmit replies and repairs
	// Answers counts retransmit answers that carried messages: inline
	// replies and repairs published (each repair once, however many
	// requests it answered).
	Answers uint64
	// Repairs counts repairs published on the repair subjects.
	Repairs uint64
	// Suppressed counts requests answered with a pointer to a repair
	// already published (by this server, or a member of its queue group)
	// within ServerConfig.RepairWindow.
	Suppressed uint64
	// ArchiveAnswers counts retransmissions answered from the archive
	// (ServerConfig.Archive), and ArchiveMessages the messages they
	// carried; ArchiveMisses the evicted ranges it did not hold either.
	ArchiveAnswers, ArchiveMessages, ArchiveMisses uint64
	Snapshots                                      uint64 // snapshots served
	SnapshotMessages                               uint64 // messages sent in snapshots
	SessionQueries                                 uint64 // session queries answered with the channel's session
	Rejected                                       map[ErrorCode]uint64
	LivePublished                                  uint64 // datagrams published on live subjects
	LivePublishErrors                              uint64
	// LiveSkipped counts datagrams not published: nobody wanted the
	// channel's live feed (no demand lease, no subscriber seen by
	// LiveInterest).
	LiveSkipped uint64
	LiveDropped uint64 // datagrams not published: the live queue was full (ServerConfig.LiveQueue)
	// LiveDemands counts demand messages received on the demand subjects
	// (DemandSubject), those of every channel of the feed.
	LiveDemands uint64
}

// Server answers retransmit and snapshot requests over NATS from the
// channels' stores and publishes live datagrams.
//
// Each request is answered on the NATS client's subscription goroutine. The
// requested messages are copied out of the store under its read lock and
// sent after it is released, so a slow NATS connection never holds the lock
// the publisher appends under.
type Server struct {
	nc   *nats.Conn
	cfg  ServerConfig
	subs []*nats.Subscription

	mu       sync.Mutex
	buckets  map[string]*bucket
	rejected map[ErrorCode]uint64
	lastLog  time.Time

	// token names this server's repairs (HeaderRepair); repairN numbers
	// them, and recent holds those that may still answer a request, by
	// channel and range (under mu).
	token     string
	repairN   uint64
	recent    map[repairKey]repairEntry
	lastSweep time.Time

	answers, repairs, suppressed, sessionQueries atomic.Uint64

	requests, served, snapshots, snapMsgs, live, liveErrs, liveSkipped, liveDropped atomic.Uint64
	archiveAnswers, archiveMsgs, archiveMisses                                      atomic.Uint64

	// liveOn is, by channel, whether Live publishes the channel's
	// datagrams; nil with LiveAlways. The publisher's path
	// reads it, one atomic load per datagram; demand and watchLive write
	// it, under liveMu.
	liveOn []atomic.Bool
	liveMu sync.Mutex
	// leaseEnd is, by channel, when its demand lease ends (under liveMu).
	leaseEnd     []time.Time
	demandSub    *nats.Subscription
	demands      atomic.Uint64
	leaseMs      string        // the lease in milliseconds, the HeaderLease value
	liveStop     chan struct{} // closed by Close: ends watchLive
	liveStopped  chan struct{}
	liveFree     chan *liveDatagram // the live queue's free slots
	liveQ        chan *liveDatagram // datagrams waiting for publishLive
	liveSubjects []string           // by channel
	livePubDone  chan struct{}      // closed when publishLive returns
	// liveQueued counts datagrams Live queued, liveDone those publishLive
	// handed to NATS (FlushLive compares them).
	liveQueued, liveDone atomic.Uint64
}

// repairKey identifies what a repair carries.
type repairKey struct {
	ch  int
	req mold.Request
}

// repairEntry is a repair published within the repair window.
type repairEntry struct {
	id    string
	parts int
	at    time.Time
	// pointer holds the headers of the pointer to the repair that answers
	// the request it was published for, repeat those of the pointers that
	// answer the same range asked for again (HeaderRepeat); built once,
	// only read after.
	pointer, repeat nats.Header
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewServer starts the live feed and, unless ServerConfig.Hold is set,
// answers requests (Serve).
func NewServer(nc *nats.Conn, cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{nc: nc, cfg: cfg, buckets: map[string]*bucket{}, rejected: map[ErrorCode]uint64{},
		token: nuid.Next(), recent: map[repairKey]repairEntry{}}
	s.startLive()
	if cfg.Live == LiveOff {
		s.liveOn = make([]atomic.Bool, len(cfg.Channels)) // all off, for good
	} else if err := s.startDemand(); err != nil {
		s.Close()
		return nil, err
	}
	if !cfg.Hold {
		if err := s.Serve(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Serve subscribes to the feed's retransmit, snapshot and session subjects
// (and, with a queue group, its repair subjects), from when the server
// answers requests. NewServer calls it unless ServerConfig.Hold is set;
// calling it again does nothing.
func (s *Server) Serve() error {
	if len(s.subs) > 0 {
		return nil
	}
	cfg := s.cfg
	subs := []struct {
		subj, queue string
		h           nats.MsgHandler
	}{
		{"tickcast." + cfg.Feed + ".retransmit.*", cfg.Queue, s.retransmit},
		{"tickcast." + cfg.Feed + ".snapshot.*", cfg.Queue, s.snapshot},
		{"tickcast." + cfg.Feed + ".session.*", cfg.Queue, s.session},
	}
	if cfg.Queue != "" {
		subs = append(subs, struct {
			subj, queue string
			h           nats.MsgHandler
		}{"tickcast." + cfg.Feed + ".repair.*", "", s.peerRepair})
	}
	for _, sb := range subs {
		sub, err := s.nc.QueueSubscribe(sb.subj, sb.queue, sb.h)
		if err != nil {
			return fmt.Errorf("recovery: subscribe %s: %w", sb.subj, err)
		}
		// Requests may come in bursts; do not let NATS drop them.
		sub.SetPendingLimits(-1, -1)
		s.subs = append(s.subs, sub)
	}
	if err := s.nc.Flush(); err != nil {
		return fmt.Errorf("recovery: flush subscriptions: %w", err)
	}
	return nil
}

// Pause stops answering requests until Serve is called again; the live
// feed goes on. A feed handler that leaves a queue group pauses first, so
// that its question to the group reaches a peer.
func (s *Server) Pause() {
	for _, sub := range s.subs {
		sub.Unsubscribe()
	}
	s.subs = nil
	s.nc.Flush()
}

// LiveInterestEvery is how often a server that publishes on demand ends
// the demand leases that ran out and, with ServerConfig.LiveInterest, asks
// whether its live subjects have subscribers. A subscriber that joins the
// live feed without announcing demand may miss up to this much of it,
// which it recovers like any gap.
const LiveInterestEvery = 20 * time.Millisecond

// startDemand subscribes to the demand subjects and, with LiveOnDemand,
// turns every channel's live feed off until it is wanted and starts
// watchLive. Every server of the feed hears every demand (no queue group):
// each publishes its own live feed. With LiveAlways demands are answered
// and counted, nothing more.
func (s *Server) startDemand() error {
	s.leaseMs = strconv.FormatInt(s.cfg.LiveLease.Milliseconds(), 10)
	if s.cfg.Live == LiveOnDemand {
		n := len(s.cfg.Channels)
		s.liveOn = make([]atomic.Bool, n)
		s.leaseEnd = make([]time.Time, n)
	}
	subj := "tickcast." + s.cfg.Feed + ".demand.*"
	sub, err := s.nc.Subscribe(subj, s.demand)
	if err != nil {
		return fmt.Errorf("recovery: subscribe %s: %w", subj, err)
	}
	sub.SetPendingLimits(-1, -1)
	s.demandSub = sub
	if s.cfg.Live == LiveOnDemand {
		s.refreshLive(time.Now())
		s.liveStop, s.liveStopped = make(chan struct{}), make(chan struct{})
		go s.watchLive()
	}
	return nil
}

// demand takes a demand message: channel ch's live feed is on from now
// until a lease from now, and a request is answered with the lease
// (HeaderLease) so that the consumer knows a feed handler publishes for it.
func (s *Server) demand(m *nats.Msg) {
	s.demands.Add(1)
	ch, _, ok := s.channel(m)
	if !ok {
		return
	}
	was := true // LiveAlways: the feed is on anyway
	if s.liveOn != nil {
		now := time.Now()
		s.liveMu.Lock()
		s.leaseEnd[ch] = now.Add(s.cfg.LiveLease)
		was = s.liveOn[ch].Swap(true)
		s.liveMu.Unlock()
	}
	if !was {
		s.cfg.Log.Info().Int("channel", ch).Str("subject", s.liveSubjects[ch]).Msg("live feed on: demand")
	}
	if m.Reply != "" {
		s.nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{HeaderLease: []string{s.leaseMs}}})
	}
}

// refreshLive sets each channel's live feed on while its demand lease runs
// or LiveInterest reports a subscriber, off otherwise.
func (s *Server) refreshLive(now time.Time) {
	for ch := range s.liveOn {
		interest := s.cfg.LiveInterest != nil && s.cfg.LiveInterest(s.liveSubjects[ch])
		s.liveMu.Lock()
		lease := now.Before(s.leaseEnd[ch])
		was := s.liveOn[ch].Swap(interest || lease)
		s.liveMu.Unlock()
		if was && !interest && !lease {
			s.cfg.Log.Info().Int("channel", ch).Str("subject", s.liveSubjects[ch]).Msg("live feed off: no demand, no subscriber")
		}
	}
}

func (s *Server) watchLive() {
	defer close(s.liveStopped)
	t := time.NewTicker(LiveInterestEvery)
	defer t.Stop()
	for {
		select {
		case <-s.liveStop:
			return
		case now := <-t.C:
			s.refreshLive(now)
		}
	}
}

// Close stops answering requests.
func (s *Server) Close() {
	for _, sub := range s.subs {
		sub.Unsubscribe()
	}
	s.subs = nil
	if s.demandSub != nil {
		s.demandSub.Unsubscribe()
		s.demandSub = nil
	}
	if s.liveStop != nil {
		close(s.liveStop)
		<-s.liveStopped
		s.liveStop = nil
	}
	if s.liveQ != nil {
		close(s.liveQ)
		<-s.livePubDone
		s.liveQ = nil
	}
}

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	st := ServerStats{
		Requests: s.requests.Load(), MessagesServed: s.served.Load(), Snapshots: s.snapshots.Load(),
		ArchiveAnswers: s.archiveAnswers.Load(), ArchiveMessages: s.archiveMsgs.Load(), ArchiveMisses: s.archiveMisses.Load(),
		Answers: s.answers.Load(), Repairs: s.repairs.Load(), Suppressed: s.suppressed.Load(),
		SnapshotMessages: s.snapMsgs.Load(), LivePublished: s.live.Load(), LivePublishErrors: s.liveErrs.Load(), LiveSkipped: s.liveSkipped.Load(),
		LiveDropped: s.liveDropped.Load(), LiveDemands: s.demands.Load(), SessionQueries: s.sessionQueries.Load(), Rejected: map[ErrorCode]uint64{},
	}
	s.mu.Lock()
	for k, v := range s.rejected {
		st.Rejected[k] = v
	}
	s.mu.Unlock()
	return st
}

// Live queues one datagram of channel ch for publication on its live
// subject and returns at once: a goroutine of the server's publishes the
// queue in order. The publisher's path never waits for NATS, whose Publish
// blocks while the connection's write buffer is flushed to a slow server
// or while a large retransmit reply holds the connection. When the queue
// (ServerConfig.LiveQueue datagrams) is full, the datagram is dropped and
// counted in ServerStats.LiveDropped; a live subscriber sees the gap and
// recovers it like any other. Unless ServerConfig.Live is LiveAlways, a
// datagram is queued only while the channel's live feed is wanted (a
// demand lease runs, or LiveInterest reports a subscriber), and otherwise
// counted as skipped, at the cost of one atomic load. Live copies datagram and allocates nothing once each queue slot
// has held a datagram as long as the longest it is given. It is called by
// one goroutine at a time (the publisher's), never after Close.
func (s *Server) Live(ch int, datagram []byte) {
	if s.liveOn != nil && !s.liveOn[ch].Load() {
		s.liveSkipped.Add(1)
		return
	}
	var b *liveDatagram
	select {
	case b = <-s.liveFree:
	default:
		s.liveDropped.Add(1)
		return
	}
	b.ch = ch
	b.data = append(b.data[:0], datagram...)
	s.liveQueued.Add(1)
	s.liveQ <- b // never blocks: the queue has a place for every slot
}

// liveDatagram is one slot of the live queue.
type liveDatagram struct {
	ch   int
	data []byte
}

// startLive allocates the live queue and starts its publishing goroutine.
func (s *Server) startLive() {
	n := s.cfg.LiveQueue
	s.liveFree = make(chan *liveDatagram, n)
	s.liveQ = make(chan *liveDatagram, n)
	s.liveSubjects = make([]string, len(s.cfg.Channels))
	for ch := range s.liveSubjects {
		s.liveSubjects[ch] = LiveSubject(s.cfg.Feed, ch)
	}
	for range n {
		// A slot's buffer is allocated when it is first used, so that a
		// feed handler without a live feed does not pay for the queue.
		s.liveFree <- &liveDatagram{}
	}
	s.livePubDone = make(chan struct{})
	go s.publishLive()
}

// publishLive publishes the live queue until Close closes it.
func (s *Server) publishLive() {
	defer close(s.livePubDone)
	for b := range s.liveQ {
		if err := s.nc.Publish(s.liveSubjects[b.ch], b.data); err != nil {
			s.liveErrs.Add(1)
		} else {
			s.live.Add(1)
		}
		s.liveDone.Add(1)
		s.liveFree <- b
	}
}

// FlushLive waits until every datagram queued by Live so far has been
// handed to NATS (published or counted as an error), or timeout passes; it
// reports whether the queue drained. A feed handler calls it before it
// stops serving, so that the end of session reaches live subscribers.
func (s *Server) FlushLive(timeout time.Duration) bool {
	want := s.liveQueued.Load()
	deadline := time.Now().Add(timeout)
	for s.liveDone.Load() < want {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (s *Server) channel(m *nats.Msg) (int, *Channel, bool) {
	ch, err := channelOf(m.Subject)
	if err != nil || ch >= len(s.cfg.Channels) || s.cfg.Channels[ch] == nil {
		s.reject(m, &ReplyError{Code: CodeUnknownChannel, Reason: fmt.Sprintf("subject %s names no channel of this feed (0..%d)", m.Subject, len(s.cfg.Channels)-1)})
		return 0, nil, false
	}
	return ch, s.cfg.Channels[ch], true
}

// allow takes n tokens from the requester's bucket.
func (s *Server) allow(who string, n int) bool {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[who]
	if b == nil {
		if len(s.buckets) > 100000 {
			// Bounded memory under a flood of distinct inboxes.
			clear(s.buckets)
		}
		b = &bucket{tokens: s.cfg.RateLimit, last: now}
		s.buckets[who] = b
	}
	b.tokens = min(s.cfg.RateLimit, b.tokens+now.Sub(b.last).Seconds()*s.cfg.RateLimit)
	b.last = now
	if b.tokens < float64(n) {
		return false
	}
	b.tokens -= float64(n)
	return true
}

func (s *Server) retransmit(m *nats.Msg) {
	s.requests.Add(1)
	if m.Reply == "" {
		return // nowhere to answer
	}
	ch, c, ok := s.channel(m)
	if !ok {
		return
	}
	req, err := mold.ParseRequest(m.Data)
	if err != nil {
		s.reject(m, &ReplyError{Code: CodeBadRequest, Reason: fmt.Sprintf("channel %d: %v", ch, err)})
		return
	}
	if int(req.Count) > s.cfg.MaxRetransmit {
		s.reject(m, &ReplyError{Code: CodeTooMany, Reason: fmt.Sprintf("channel %d session %s: %d messages from %d asked, at most %d per request",
			ch, req.Session, req.Count, req.Seq, s.cfg.MaxRetransmit)})
		return
	}
	repair := m.Header.Get(HeaderAnswer) == AnswerRepair
	key := repairKey{ch: ch, req: req}
	if repair {
		if e, ok := s.recentRepair(key); ok {
			// Someone asked for this range moments ago: the repair
			// already went to every client of the feed.
			s.suppressed.Add(1)
			s.point(m.Reply, e.repeat)
			return
		}
	}
	if !s.allow(requester(m.Reply), int(req.Count)) {
		s.reject(m, &ReplyError{Code: CodeRateLimited, Reason: fmt.Sprintf("channel %d: more than %.0f messages per second asked by %s", ch, s.cfg.RateLimit, requester(m.Reply))})
		return
	}
	parts, err := s.readParts(ch, c, req)
	var source nats.Header
	if err != nil {
		var re *ReplyError
		errors.As(err, &re)
		if re.Code == CodeTooOld && s.cfg.Archive != nil {
			parts, err = s.readArchived(ch, req)
			switch {
			case err == nil:
				source = nats.Header{HeaderSource: []string{SourceArchive}}
			case errors.Is(err, ErrNotYetArchived):
				// Evicted from the store and not yet stored in the
				// archive: ask again in a moment.
				re = &ReplyError{Code: CodeNotYet, Next: req.Seq, Reason: fmt.Sprintf("channel %d: %v", ch, err)}
			default:
				s.archiveMisses.Add(1)
				re.Reason += "; not in the archive either: " + err.Error()
			}
		}
		if err != nil {
			if re.Code == CodeNotYet && !errors.Is(err, ErrNotYetArchived) {
				re.Ended = c.Ended()
			}
			s.reject(m, re)
			return
		}
	}
	if repair {
		s.publishRepair(m.Reply, key, parts, source)
		return
	}
	if s.send(m.Reply, parts, source) == nil {
		if source != nil {
			s.archiveAnswers.Add(1)
			s.archiveMsgs.Add(uint64(req.Count))
		}
		s.answers.Add(1)
		s.served.Add(uint64(req.Count))
	}
}

// publishRepair publishes parts, the answer to key, on the channel's repair
// subject, records it for the repair window and points the requester at
// it.
func (s *Server) publishRepair(reply string, key repairKey, parts [][]byte, source nats.Header) {
	s.mu.Lock()
	s.repairN++
	e := repairEntry{id: repairID(s.token, s.repairN), parts: len(parts)}
	s.mu.Unlock()
	hdr := rangeHeader(key, &e)
	for k, v := range source {
		hdr[k], e.pointer[k], e.repeat[k] = v, v, v
	}
	if s.send(RepairSubject(s.cfg.Feed, key.ch), parts, hdr) != nil {
		// The requester's pointer would lead nowhere: let it time out
		// and ask again.
		return
	}
	s.repairs.Add(1)
	s.answers.Add(1)
	s.served.Add(uint64(key.req.Count))
	if source != nil {
		s.archiveAnswers.Add(1)
		s.archiveMsgs.Add(uint64(key.req.Count))
	}
	e.at = time.Now()
	s.remember(key, e)
	s.point(reply, e.pointer)
}

// rangeHeader returns the headers that name repair e of key, and sets
// e.pointer to them with the final marker added.
func rangeHeader(key repairKey, e *repairEntry) nats.Header {
	hdr := nats.Header{}
	hdr.Set(HeaderRepair, e.id)
	hdr.Set(HeaderSession, key.req.Session.String())
	hdr.Set(HeaderFirst, strconv.FormatUint(key.req.Seq, 10))
	hdr.Set(HeaderCount, strconv.Itoa(int(key.req.Count)))
	e.pointer = nats.Header{HeaderFinal: []string{strconv.Itoa(e.parts)}}
	e.repeat = nats.Header{HeaderFinal: []string{strconv.Itoa(e.parts)}, HeaderRepeat: []string{"true"}}
	for k, v := range hdr {
		e.pointer[k] = v
		e.repeat[k] = v
	}
	return hdr
}

// point answers a request with a pointer to a repair: a final marker on the
// reply subject that names the repair, its range and its part count
// (repairEntry.pointer or .repeat).
func (s *Server) point(reply string, hdr nats.Header) {
	s.nc.PublishMsg(&nats.Msg{Subject: reply, Header: hdr})
}

// recentRepair returns the repair of key published within the repair
// window, if any.
func (s *Server) recentRepair(key repairKey) (repairEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.recent[key]
	if !ok || time.Since(e.at) > s.cfg.RepairWindow {
		return repairEntry{}, false
	}
	return e, true
}

// remember records repair e of key for the repair window, and forgets the
// repairs whose window has passed.
func (s *Server) remember(key repairKey, e repairEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.at.Sub(s.lastSweep) > s.cfg.RepairWindow {
		for k, old := range s.recent {
			if e.at.Sub(old.at) > s.cfg.RepairWindow {
				delete(s.recent, k)
			}
		}
		s.lastSweep = e.at
	}
	s.recent[key] = e
}

// peerRepair learns, from the final marker of a repair another member of
// the server's queue group published, that its range was just repaired.
func (s *Server) peerRepair(m *nats.Msg) {
	id := m.Header.Get(HeaderRepair)
	token, _, ok := parseRepairID(id)
	if !ok || token == s.token || m.Header.Get(HeaderFinal) == "" {
		return
	}
	ch, err := channelOf(m.Subject)
	session, err2 := mold.ParseSession(m.Header.Get(HeaderSession))
	first, err3 := strconv.ParseUint(m.Header.Get(HeaderFirst), 10, 64)
	count, err4 := strconv.ParseUint(m.Header.Get(HeaderCount), 10, 16)
	parts, err5 := strconv.Atoi(m.Header.Get(HeaderFinal))
	if errors.Join(err, err2, err3, err4, err5) != nil {
		return
	}
	key := repairKey{ch: ch, req: mold.Request{Session: session, Seq: first, Count: uint16(count)}}
	e := repairEntry{id: id, parts: parts, at: time.Now()}
	rangeHeader(key, &e)
	s.remember(key, e)
}

// partBuilder frames reply parts, sealed when the server seals.
type partBuilder struct {
	b    *mold.Builder
	ch   int
	seal func(ch int, p []byte) ([]byte, error)
	err  error // the first sealing error
}

func (s *Server) newParts(ch int) *partBuilder {
	b, _ := mold.NewBuilder(MaxPartBytes)
	if s.cfg.Seal != nil {
		b.SetTail(seal.Overhead)
	}
	return &partBuilder{b: b, ch: ch, seal: s.cfg.Seal}
}

// finish returns the part built, a copy, sealed.
func (pb *partBuilder) finish() []byte {
	p := pb.b.Finish()
	out := append(make([]byte, 0, len(p)+seal.Overhead), p...)
	if pb.seal == nil {
		return out
	}
	sealed, err := pb.seal(pb.ch, out)
	if err != nil && pb.err == nil {
		pb.err = fmt.Errorf("seal a reply part of channel %d: %w", pb.ch, err)
	}
	return sealed
}

// readParts copies the requested messages of channel ch out of the store
// into packets.
func (s *Server) readParts(ch int, c *Channel, req mold.Request) ([][]byte, error) {
	parts, err := s.buildParts(ch, req, func(fn func(uint64, []byte) error) error {
		return c.Read(req.Session, req.Seq, int(req.Count), fn)
	})
	var pe *partError
	switch {
	case errors.As(err, &pe):
		return nil, &ReplyError{Code: CodeBadRequest, Reason: pe.Error()}
	case err != nil:
		return nil, storeError(req, err)
	}
	return parts, nil
}

// readArchived reads the requested messages of channel ch from the
// archive into packets, as readParts does from the store.
func (s *Server) readArchived(ch int, req mold.Request) ([][]byte, error) {
	return s.buildParts(ch, req, func(fn func(uint64, []byte) error) error {
		return s.cfg.Archive.Read(ch, req.Session, req.Seq, int(req.Count), fn)
	})
}

// partError is a reply part that could not be sealed.
type partError struct{ error }

// buildParts frames the messages read calls its function with into
// packets of channel ch, from req's first sequence.
func (s *Server) buildParts(ch int, req mold.Request, read func(fn func(uint64, []byte) error) error) ([][]byte, error) {
	pb := s.newParts(ch)
	b := pb.b
	var parts [][]byte
	b.Start(req.Session, req.Seq)
	err := read(func(seq uint64, msg []byte) error {
		if !b.Add(msg) {
			parts = append(parts, pb.finish())
			b.Start(req.Session, seq)
			if !b.Add(msg) {
				return fmt.Errorf("message %d of %d bytes does not fit a part", seq, len(msg))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if b.Count() > 0 {
		parts = append(parts, pb.finish())
	}
	if pb.err != nil {
		return nil, &partError{pb.err}
	}
	return parts, nil
}

// storeError turns a store error into the reply error it calls for.
func storeError(req mold.Request, err error) error {
	var old *TooOldError
	var notYet *NotYetError
	switch {
	case errors.Is(err, ErrUnknownSession):
		return &ReplyError{Code: CodeUnknownSession, Reason: fmt.Sprintf("session %s is not this channel's current session", req.Session)}
	case errors.As(err, &old):
		return &ReplyError{Code: CodeTooOld, Oldest: old.Oldest, Reason: fmt.Sprintf("session %s: %d..%d asked, oldest held is %d: load the snapshot", req.Session, req.Seq, req.Seq+uint64(req.Count)-1, old.Oldest)}
	case errors.As(err, &notYet):
		return &ReplyError{Code: CodeNotYet, Next: notYet.Next, Reason: fmt.Sprintf("session %s: %d..%d asked, next to be published is %d", req.Session, req.Seq, req.Seq+uint64(req.Count)-1, notYet.Next)}
	}
	return &ReplyError{Code: CodeBadRequest, Reason: err.Error()}
}

func (s *Server) snapshot(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	ch, c, ok := s.channel(m)
	if !ok {
		return
	}
	// A snapshot costs the channel's read lock, which the publisher waits
	// for: it is charged as a full-size retransmit against the rate limit.
	if !s.allow(requester(m.Reply), s.cfg.MaxRetransmit) {
		s.reject(m, &ReplyError{Code: CodeRateLimited, Reason: fmt.Sprintf("channel %d: snapshots asked faster than %.0f messages per second allow (one costs %d)", ch, s.cfg.RateLimit, s.cfg.MaxRetransmit)})
		return
	}
	// Copy the state out under the lock; frame it after, outside.
	var msgs [][]byte
	session, seq, err := c.Snapshot(func(msg []byte) error {
		msgs = append(msgs, append([]byte(nil), msg...))
		return nil
	})
	if errors.Is(err, ErrUnknownSession) {
		s.reject(m, &ReplyError{Code: CodeUnknownSession, Reason: fmt.Sprintf("%s: the channel has not started a session yet", m.Subject)})
		return
	}
	if err != nil {
		s.reject(m, &ReplyError{Code: CodeBadRequest, Reason: err.Error()})
		return
	}
	// Every part is a packet of the snapshot's session whose sequence field
	// is the sequence the snapshot reflects.
	var parts [][]byte
	pb := s.newParts(ch)
	b := pb.b
	b.Start(session, seq)
	for _, msg := range msgs {
		if !b.Add(msg) {
			parts = append(parts, pb.finish())
			b.Start(session, seq)
			b.Add(msg)
		}
	}
	if b.Count() > 0 {
		parts = append(parts, pb.finish())
	}
	if pb.err != nil {
		s.reject(m, &ReplyError{Code: CodeBadRequest, Reason: pb.err.Error()})
		return
	}
	count := uint64(len(msgs))
	hdr := nats.Header{}
	hdr.Set(HeaderSession, session.String())
	hdr.Set(HeaderSnapshotSeq, strconv.FormatUint(seq, 10))
	hdr.Set(HeaderNext, strconv.FormatUint(seq+1, 10))
	if s.send(m.Reply, parts, hdr) == nil {
		s.snapshots.Add(1)
		s.snapMsgs.Add(count)
	}
}

// session answers a session query: a final marker with no parts whose
// Tickcast-Session names the channel's session and Tickcast-Next its next
// sequence (Tickcast-Ended when it has ended), or unknown-session before the
// channel's first packet. It costs a read lock and is not rate-limited.
func (s *Server) session(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	ch, c, ok := s.channel(m)
	if !ok {
		return
	}
	session, ok := c.Session()
	if !ok {
		// Routine: subscribers ask as they start, often before the first
		// packet. An answer, not a refused request: counted as a session
		// query, logged at debug.
		e := &ReplyError{Code: CodeUnknownSession, Reason: fmt.Sprintf("channel %d has not started a session yet", ch)}
		s.cfg.Log.Debug().Str("code", string(e.Code)).Str("subject", m.Subject).Msg(e.Reason)
		s.answerError(m, e)
		s.sessionQueries.Add(1)
		return
	}
	hdr := nats.Header{}
	hdr.Set(HeaderSession, session.String())
	hdr.Set(HeaderNext, strconv.FormatUint(c.Next(), 10))
	if c.Ended() {
		hdr.Set(HeaderEnded, "true")
	}
	if s.send(m.Reply, nil, hdr) == nil {
		s.sessionQueries.Add(1)
	}
}

// send publishes parts and the final marker to reply. extra headers go on
// every message.
func (s *Server) send(reply string, parts [][]byte, extra nats.Header) error {
	for i, p := range parts {
		msg := &nats.Msg{Subject: reply, Data: p, Header: nats.Header{}}
		for k, v := range extra {
			msg.Header[k] = v
		}
		msg.Header.Set(HeaderPart, strconv.Itoa(i+1))
		if err := s.nc.PublishMsg(msg); err != nil {
			return err
		}
	}
	final := &nats.Msg{Subject: reply, Header: nats.Header{}}
	for k, v := range extra {
		final.Header[k] = v
	}
	final.Header.Set(HeaderFinal, strconv.Itoa(len(parts)))
	return s.nc.PublishMsg(final)
}

// reject sends an error reply and counts it.
func (s *Server) reject(m *nats.Msg, e *ReplyError) {
	level := zerolog.WarnLevel
	if e.Code == CodeNotYet {
		// Nothing there yet: the answer to a probe past a quiet stream's
		// end, or to a request that another feed handler of the feed is
		// ahead of this one for; routine, not a fault.
		level = zerolog.DebugLevel
	}
	s.mu.Lock()
	s.rejected[e.Code]++
	logIt := time.Since(s.lastLog) > 200*time.Millisecond
	if logIt {
		s.lastLog = time.Now()
	}
	s.mu.Unlock()
	if logIt {
		s.cfg.Log.WithLevel(level).Str("code", string(e.Code)).Str("subject", m.Subject).Str("reply", m.Reply).Msg(e.Reason)
	}
	s.answerError(m, e)
}

// answerError sends e as the reply to m, if m asks for one.
func (s *Server) answerError(m *nats.Msg, e *ReplyError) {
	if m.Reply == "" {
		return
	}
	msg := &nats.Msg{Subject: m.Reply, Header: nats.Header{}}
	msg.Header.Set(HeaderError, string(e.Code))
	msg.Header.Set(HeaderReason, e.Reason)
	msg.Header.Set(HeaderFinal, "0")
	if e.Oldest != 0 {
		msg.Header.Set(HeaderOldest, strconv.FormatUint(e.Oldest, 10))
	}
	if e.Next != 0 {
		msg.Header.Set(HeaderNext, strconv.FormatUint(e.Next, 10))
	}
	if e.Ended {
		msg.Header.Set(HeaderEnded, "true")
	}
	s.nc.PublishMsg(msg)
}
