package recovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Feed names the feed in the subjects; default DefaultFeed.
	Feed string
	// Timeout bounds one request, from sending it to the final marker;
	// default DefaultTimeout.
	Timeout time.Duration
	// MaxInflight is how many requests may await their replies at once;
	// more wait in a queue. Default DefaultMaxInflight.
	MaxInflight int
	// QueueLen bounds the requests waiting to be sent; a request that finds
	// the queue full fails at once (seqgap.AnswerRetry: its range is asked
	// for again within the gap's deadline). Default DefaultQueueLen.
	QueueLen int
	// MaxPerRequest splits larger ranges into several requests,
	// 1..mold.MaxCount; default DefaultMaxPerRequest.
	MaxPerRequest int
	// SnapshotAbove: a missing range that starts at sequence 1 and is longer
	// than this is answered by loading the channel's snapshot instead of
	// replaying it; so is a range the store no longer holds (too-old).
	// Default DefaultSnapshotAbove; negative: never for these (a request
	// marked seqgap.Request.Snapshot, a late join's prefix, always loads
	// it).
	SnapshotAbove int
	// InlineOnly asks for every answer on the request's own reply subject,
	// as clients did before repair subjects, and does not listen to them:
	// for NATS accounts whose subscriber users may not subscribe to
	// tickcast.FEED.repair.> (docs/recovery.md). Each request then costs
	// the server a reply of its own, however many ask for the same range.
	InlineOnly bool
	// RepairBackoff bounds the random wait before a range is asked for
	// while the client shares its losses with other subscribers: within
	// sharedKeep of a sign that it does (a pointer marked HeaderRepeat, a
	// repair of a range it was about to ask for). A range whose repair is
	// heard during the wait is not asked for at all. The wait is drawn
	// from a window that adapts, as SRM's request timers do: it opens at
	// the client's smoothed request round trip (at least minBackoff, at
	// most RepairBackoff), widens by half whenever a request of this client turns
	// out to repeat another's, and narrows by a quarter whenever one is the
	// first, so that about one request in a group of subscribers repeats
	// the first, whatever their number and round trip. A client that has
	// seen no shared loss lately asks at once, so a lone subscriber's
	// recovery never waits (docs/recovery.md). Default
	// DefaultRepairBackoff; negative: never wait. Not used with
	// InlineOnly.
	RepairBackoff time.Duration
	// Open, if set, verifies each reply part of channel ch (sealed by the
	// feed handler: ServerConfig.Seal) and returns it without its seal. A
	// part that does not open is dropped and counted
	// (ClientStats.Unverified): its call then lacks a part and is asked
	// for again.
	Open func(ch int, p []byte) ([]byte, error)
	// Channels, if any, are the channels whose repair subjects the client
	// listens to; none: every channel's (tickcast.FEED.repair.*). A user
	// entitled to some channels only may not subscribe to the others'
	// (docs/security.md), so a subscriber names those it joined.
	Channels []int
}

// Defaults of a ClientConfig.
const (
	// DefaultTimeout is the default ClientConfig.Timeout.
	DefaultTimeout = 2 * time.Second
	// DefaultMaxInflight is the default ClientConfig.MaxInflight.
	DefaultMaxInflight = 256
	// DefaultQueueLen is the default ClientConfig.QueueLen.
	DefaultQueueLen = 65536
	// DefaultMaxPerRequest is the default ClientConfig.MaxPerRequest: the
	// server's default limit.
	DefaultMaxPerRequest = DefaultMaxRetransmit
	// DefaultSnapshotAbove is the default ClientConfig.SnapshotAbove.
	DefaultSnapshotAbove = 10000
	// DefaultRepairBackoff is the default ClientConfig.RepairBackoff.
	DefaultRepairBackoff = 100 * time.Millisecond
)

// minBackoff is the narrowest a client's back-off window gets
// (ClientConfig.RepairBackoff).
const minBackoff = time.Millisecond

// maxRepairBackoff bounds ClientConfig.RepairBackoff.
const maxRepairBackoff = time.Second

// sharedKeep is how long a sign of shared losses keeps a client backing off
// (ClientConfig.RepairBackoff).
const sharedKeep = 10 * time.Second

var clientCheck = config.Checker{Pkg: "recovery", Struct: "ClientConfig"}

// withDefaults returns c with its zero fields set to their defaults.
func (c ClientConfig) withDefaults() ClientConfig {
	config.Default(&c.Feed, DefaultFeed)
	config.Default(&c.Timeout, DefaultTimeout)
	config.Default(&c.MaxInflight, DefaultMaxInflight)
	config.Default(&c.QueueLen, DefaultQueueLen)
	config.Default(&c.MaxPerRequest, DefaultMaxPerRequest)
	config.Default(&c.SnapshotAbove, DefaultSnapshotAbove)
	config.Default(&c.RepairBackoff, DefaultRepairBackoff)
	return c
}

// validate checks a ClientConfig whose defaults are set.
func (c ClientConfig) validate() error {
	if err := ValidateFeed(c.Feed); err != nil {
		return clientCheck.Invalid("Feed", c.Feed, "%v", err)
	}
	switch {
	case c.Timeout < 0:
		return clientCheck.Invalid("Timeout", c.Timeout, "negative")
	case c.MaxInflight < 1:
		return clientCheck.Invalid("MaxInflight", c.MaxInflight, "want 1 or more")
	case c.QueueLen < 1:
		return clientCheck.Invalid("QueueLen", c.QueueLen, "want 1 or more")
	case c.MaxPerRequest < 1 || c.MaxPerRequest > mold.MaxCount:
		return clientCheck.Invalid("MaxPerRequest", c.MaxPerRequest, "want 1..%d", mold.MaxCount)
	case c.RepairBackoff > maxRepairBackoff:
		return clientCheck.Invalid("RepairBackoff", c.RepairBackoff, "want at most %v (negative: never wait)", maxRepairBackoff)
	}
	return nil
}

// Result is the answer to one request, handed to the polling goroutine by
// Drain. The client sorts every reply into an Outcome, so that the caller
// hands it to its tracker (Answer) without reading error codes.
type Result struct {
	Channel int
	Session mold.Session
	Range   seqgap.Range
	// Outcome is what the answer means for the range: recovered packets, a
	// snapshot, refused, to be retried (failed in transit), or refused
	// because the session ended at Next.
	Outcome seqgap.Outcome
	// Next is one past the session's last message (seqgap.AnswerEnded), or
	// the sequence after the snapshot (seqgap.AnswerSnapshot).
	Next uint64
	// Packets are the recovered MoldUDP64 packets, owned by the receiver
	// (seqgap.AnswerPackets).
	Packets [][]byte
	// Err says why the range could not be recovered (seqgap.AnswerRefused,
	// AnswerRetry, AnswerEnded).
	Err error
	// Latency is from the request being made to the answer.
	Latency time.Duration
	// Archive says the packets were read from the feed's archive
	// (HeaderSource): the range had left the feed handler's store.
	Archive bool
	// Snapshot, when set, answers the range instead of Packets
	// (seqgap.AnswerSnapshot): the caller applies the state and resumes the
	// stream at Next, after Snapshot.Seq.
	Snapshot *Snapshot
}

// Answer returns r as the tracker takes it.
func (r *Result) Answer() seqgap.Answer {
	return seqgap.Answer{Outcome: r.Outcome, Session: r.Session, Range: r.Range, Packets: r.Packets, Next: r.Next}
}

// outcomeOf sorts a failed request's error: failed in transit (no code:
// timeout, nobody answering, queue full, malformed reply) is retried, and so
// is not-yet; a session that ended refuses what lies past its end; any other
// error reply refuses the range.
func outcomeOf(err error) (seqgap.Outcome, uint64) {
	var re *ReplyError
	switch {
	case !errors.As(err, &re) || re.Code == "":
		return seqgap.AnswerRetry, 0
	case re.Code == CodeNotYet && re.Ended:
		return seqgap.AnswerEnded, re.Next
	case re.Code == CodeNotYet:
		// The range is past what the answering feed handler has
		// published. A subscriber asks for a gap only once it has seen a
		// later message, so another feed handler of the feed, one that is
		// ahead of this one (hot-hot, docs/hot-hot.md), published it: ask
		// again. A probe past a stale stream's end has no gap to retry.
		return seqgap.AnswerRetry, 0
	}
	return seqgap.AnswerRefused, 0
}

// ClientStats are a client's cumulative counters.
type ClientStats struct {
	Requests  uint64 // requests sent
	Failed    uint64 // requests that failed (error reply, timeout, queue full)
	Recovered uint64 // messages received in replies
	// RecoveredArchive counts those of Recovered that the feed handler
	// read from its archive (HeaderSource): evicted from its store.
	RecoveredArchive uint64
	// Heard counts ranges answered by a repair the client heard on a
	// repair subject (asked for by another client, or by this one before)
	// before it sent a request for them, or while it waited to
	// (ClientConfig.RepairBackoff).
	Heard uint64
	// BackedOff counts requests that waited a random back-off before they
	// were sent or answered by a repair heard meanwhile.
	BackedOff uint64
	// Unverified counts reply and repair parts dropped because they did
	// not open (ClientConfig.Open): forged, or under a key not held yet.
	Unverified uint64
}

// Client is the subscriber side of recovery. The trackers' requests are
// handed over (Request) and sent by the client's own goroutine; every reply
// comes to one inbox subscription, where the parts are collected, and every
// repair to a subscription to the repair subjects, where it answers the
// requests of its range; the completed answers wait for the polling
// goroutine to apply them (Drain).
// The polling goroutine never waits for NATS: Request and Drain take only
// locks that nothing holds across a publish (a publish can wait while the
// connection reconnects), and one slow request does not hold up the others.
type Client struct {
	nc     *nats.Conn
	cfg    ClientConfig
	inbox  string // reply subjects are inbox + "." + request id
	sub    *nats.Subscription
	notify atomic.Pointer[func()]
	done   chan struct{}
	close  sync.Once
	wg     sync.WaitGroup

	// Requests handed over by the polling goroutine, for the sender.
	outMu   sync.Mutex
	out     []outgoing
	outNext []outgoing // the sender's batch, reused
	wake    chan struct{}

	mu       sync.Mutex // held while publishing
	closed   bool
	unsent   []*call // could not be sent; failed once the lock is released
	nextID   uint64
	inflight map[uint64]*call
	queue    []*call // requests waiting for an in-flight slot

	resMu   sync.Mutex // never held while publishing
	results []*Result
	pending atomic.Int64

	requests, failed, recovered, heard, backedOff, unverified atomic.Uint64
	recoveredArchive                                          atomic.Uint64
	// sharedAt is when the client last saw a sign that other subscribers
	// lose what it loses (Unix nanoseconds; see ClientConfig.RepairBackoff).
	sharedAt atomic.Int64
	// window is the back-off window (ClientConfig.RepairBackoff), in
	// nanoseconds; 0 until the first shared loss.
	window atomic.Int64
	// rtt is the smoothed round trip of requests (sampleRTT), where the
	// window opens: about when the first request's repair is heard.
	rtt atomic.Int64
	// held are the requests waiting out their back-off, sent by the
	// sender goroutine when due; under mu.
	held []*call
	// jitter draws a back-off below its argument (rand.N; tests choose).
	jitter func(time.Duration) time.Duration

	// Repairs heard on the repair subjects (see repaired).
	repSubs  []*nats.Subscription
	repMu    sync.Mutex // never held while publishing, nor while taking mu
	partial  map[string]*heardRepair
	byID     map[string]*heardRepair
	byRange  map[repairKey]*heardRepair
	heardQ   []*heardRepair // oldest first
	heardLen int            // bytes of the parts in heardQ
	highest  map[string]uint64
}

// heardRepair is a repair heard on a repair subject.
type heardRepair struct {
	id    string
	key   repairKey
	parts [][]byte
	bytes int
	at    time.Time
	given bool // its parts were handed out once: later takers get copies
	// archive: read from the feed's archive (HeaderSource).
	archive bool
}

// take returns r's parts for one answer; c.repMu is held.
func (r *heardRepair) take() [][]byte {
	if !r.given {
		r.given = true
		return r.parts
	}
	cp := make([][]byte, len(r.parts))
	for i, p := range r.parts {
		cp[i] = append([]byte(nil), p...)
	}
	return cp
}

// How long and how many repairs a client keeps: long enough for the
// pointer of a request the server answered with a repair already sent
// (ServerConfig.RepairWindow) to find it.
const (
	heardKeep     = 2 * time.Second
	maxHeard      = 4096
	maxHeardBytes = 32 << 20
	maxPartial    = 1024
	// repairGrace is how long a call waits for the repair its pointer
	// names before it asks inline: the repair precedes the pointer on the
	// wire, so only a repair published before this client listened, or
	// lost, takes longer.
	repairGrace = 100 * time.Millisecond
)

// call is one request in flight.
type call struct {
	id       uint64
	subject  string
	payload  []byte
	res      *Result
	want     mold.Request // for retransmits: what the reply must carry
	wait     chan *answer // for callers that wait (Retransmit, Snapshot) instead of Drain
	sendErr  error        // why send failed
	snap     bool         // an asynchronous snapshot answering res.Range
	query    bool         // a session query (seqgap.Request.Query)
	direct   bool         // answered inline, not by a repair (see askRepair)
	archive  bool         // answered from the feed's archive (HeaderSource)
	pointed  time.Time    // when a pointer to a repair not heard yet came
	due      time.Time    // the end of its back-off, while held
	parts    [][]byte
	start    time.Time
	sent     time.Time
	deadline time.Time
}

// outgoing is a request handed over for channel ch at start.
type outgoing struct {
	ch    int
	req   seqgap.Request
	start time.Time
}

type answer struct {
	parts [][]byte
	final *nats.Msg
	err   error
}

// NewClient subscribes to the client's reply inbox.
func NewClient(nc *nats.Conn, cfg ClientConfig) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{nc: nc, cfg: cfg, inbox: nc.NewInbox(), done: make(chan struct{}), wake: make(chan struct{}, 1), inflight: map[uint64]*call{},
		jitter:  rand.N[time.Duration],
		partial: map[string]*heardRepair{}, byID: map[string]*heardRepair{}, byRange: map[repairKey]*heardRepair{}, highest: map[string]uint64{}}
	// The repair subscription goes out on the connection before any
	// request (NATS sends subscriptions first when it connects or
	// reconnects), so no repair answering one of this client's requests is
	// published before the server has it.
	if !cfg.InlineOnly {
		subjects := []string{"tickcast." + cfg.Feed + ".repair.*"}
		if len(cfg.Channels) > 0 {
			subjects = subjects[:0]
			for _, ch := range cfg.Channels {
				subjects = append(subjects, RepairSubject(cfg.Feed, ch))
			}
		}
		for _, subj := range subjects {
			rsub, err := nc.Subscribe(subj, c.repaired)
			if err != nil {
				c.unsubscribeRepairs()
				return nil, fmt.Errorf("recovery: subscribe to the repair subject %s: %w", subj, err)
			}
			rsub.SetPendingLimits(-1, -1)
			c.repSubs = append(c.repSubs, rsub)
		}
	}
	sub, err := nc.Subscribe(c.inbox+".*", c.reply)
	if err != nil {
		c.unsubscribeRepairs()
		return nil, fmt.Errorf("recovery: subscribe to the reply inbox %s: %w", c.inbox, err)
	}
	sub.SetPendingLimits(-1, -1)
	c.sub = sub
	c.wg.Add(2)
	go c.expire()
	go c.sendLoop()
	return c, nil
}

func (c *Client) unsubscribeRepairs() {
	for _, s := range c.repSubs {
		s.Unsubscribe()
	}
}

// SetNotify sets the function called when an answer is ready to Drain.
func (c *Client) SetNotify(f func()) { c.notify.Store(&f) }

// Close stops the client; requests in flight are dropped.
func (c *Client) Close() {
	c.close.Do(func() {
		close(c.done)
		c.sub.Unsubscribe()
		c.unsubscribeRepairs()
		c.wg.Wait()
		// Fail whatever is in flight or queued, so no caller waits forever.
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		// Requests handed over but not sent fail as closed.
		c.sendOutgoing()
		c.mu.Lock()
		var left []*call
		for _, k := range c.inflight {
			left = append(left, k)
		}
		left = append(left, c.queue...)
		left = append(left, c.held...)
		clear(c.inflight)
		c.queue, c.held = nil, nil
		c.mu.Unlock()
		for _, k := range left {
			c.fail(k, errClosed(k))
		}
	})
}

func errClosed(k *call) error {
	return &ReplyError{Reason: k.subject + ": the recovery client is closed"}
}

// Stats returns the counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Requests: c.requests.Load(), Failed: c.failed.Load(), Recovered: c.recovered.Load(), RecoveredArchive: c.recoveredArchive.Load(), Heard: c.heard.Load(),
		BackedOff: c.backedOff.Load(), Unverified: c.unverified.Load()}
}

// open verifies part p of channel ch (ClientConfig.Open); false: drop it.
func (c *Client) open(ch int, p []byte) ([]byte, bool) {
	if c.cfg.Open == nil {
		return p, true
	}
	out, err := c.cfg.Open(ch, p)
	if err != nil {
		c.unverified.Add(1)
		return nil, false
	}
	return out, true
}

// Request hands over a request of channel ch's tracker; the client's
// goroutine sends it. It never blocks and never waits for NATS: it is
// called on the polling goroutine.
func (c *Client) Request(ch int, req seqgap.Request) {
	c.outMu.Lock()
	c.out = append(c.out, outgoing{ch: ch, req: req, start: time.Now()})
	c.outMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// sendLoop sends the requests handed over by Request.
func (c *Client) sendLoop() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-c.done:
			timer.Stop()
			return
		case <-c.wake:
			c.sendOutgoing()
		case <-timer.C:
		}
		if next := c.sendHeld(time.Now()); !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
}

// sendOutgoing sends every request handed over so far.
func (c *Client) sendOutgoing() {
	c.outMu.Lock()
	batch := c.out
	c.out = c.outNext[:0]
	c.outMu.Unlock()
	for i, o := range batch {
		c.startRequest(o)
		batch[i] = outgoing{}
	}
	c.outMu.Lock()
	c.outNext = batch[:0]
	c.outMu.Unlock()
}

// startRequest sends o: a snapshot call for a late join's prefix or a
// range too long to replay from its start, else retransmit calls in
// chunks the server accepts.
func (c *Client) startRequest(o outgoing) {
	session, rng := o.req.Session, o.req.Range
	if o.req.Query {
		c.start(&call{subject: SessionSubject(c.cfg.Feed, o.ch), query: true, start: o.start,
			res: &Result{Channel: o.ch, Session: session}})
		return
	}
	if o.req.Snapshot || c.cfg.SnapshotAbove >= 0 && rng.From == 1 && rng.Len() > uint64(c.cfg.SnapshotAbove) {
		c.start(c.snapshotCall(o.ch, session, rng, o.start))
		return
	}
	for from := rng.From; from <= rng.To; {
		n := min(rng.To-from+1, uint64(c.cfg.MaxPerRequest))
		req := mold.Request{Session: session, Seq: from, Count: uint16(n)}
		k := &call{
			subject: RetransmitSubject(c.cfg.Feed, o.ch),
			payload: req.Append(nil),
			want:    req,
			res:     &Result{Channel: o.ch, Session: session, Range: seqgap.Range{From: from, To: from + n - 1}},
			start:   o.start,
			direct:  c.cfg.InlineOnly,
		}
		from += n
		if parts, archived, ok := c.heardRange(repairKey{ch: o.ch, req: req}); ok {
			// Another client asked for this range moments ago and its
			// repair reached this one too: nothing to ask.
			k.archive = archived
			c.completeHeard(k, parts)
			continue
		}
		if d := c.backoff(); d > 0 {
			c.hold(k, d)
			continue
		}
		c.start(k)
	}
}

// completeHeard answers call k, not sent, with the parts of a repair asked
// for by another client: a loss this client shares.
func (c *Client) completeHeard(k *call, parts [][]byte) {
	c.heard.Add(1)
	c.shared()
	k.parts = parts
	c.complete(k, nil, nil)
}

// shared records a sign that other subscribers lose what this client
// loses, and opens the back-off window if it is shut.
func (c *Client) shared() {
	c.sharedAt.Store(time.Now().UnixNano())
	c.adapt(1, 1)
}

// sampleRTT folds the round trip of one request, from sending it to its
// final answer, into the smoothed round trip (an eighth at a time).
func (c *Client) sampleRTT(d time.Duration) {
	for {
		r := c.rtt.Load()
		n := int64(d)
		if r != 0 {
			n = r + (int64(d)-r)/8
		}
		if c.rtt.CompareAndSwap(r, n) {
			return
		}
	}
}

// repeated records that a request of this client repeated another
// client's: a shared loss, and the back-off window opens if shut and
// widens by half.
func (c *Client) repeated() {
	c.sharedAt.Store(time.Now().UnixNano())
	c.adapt(3, 2)
}

// first records that a request of this client was the first for its range,
// and narrows the back-off window by a quarter, if it is open.
func (c *Client) first() {
	if c.window.Load() != 0 {
		c.adapt(3, 4)
	}
}

// adapt scales the back-off window by num/den within minBackoff and
// RepairBackoff, opening a shut one first at the smoothed round trip.
func (c *Client) adapt(num, den int64) {
	lo, hi := int64(minBackoff), max(int64(c.cfg.RepairBackoff), int64(minBackoff))
	for {
		w := c.window.Load()
		from := w
		if from == 0 {
			from = min(max(c.rtt.Load(), lo), hi)
		}
		n := min(max(from*num/den, lo), hi)
		if c.window.CompareAndSwap(w, n) {
			return
		}
	}
}

// backoff returns how long a request for a range waits before it is sent:
// a random share of the back-off window while losses are shared, else 0.
func (c *Client) backoff() time.Duration {
	if c.cfg.RepairBackoff <= 0 || c.cfg.InlineOnly || time.Now().UnixNano()-c.sharedAt.Load() > int64(sharedKeep) {
		return 0
	}
	return c.jitter(time.Duration(c.window.Load()))
}

// hold keeps call k back for d, for the sender goroutine (sendHeld).
func (c *Client) hold(k *call, d time.Duration) {
	c.backedOff.Add(1)
	k.due = time.Now().Add(d)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.fail(k, errClosed(k))
		return
	}
	c.held = append(c.held, k)
	c.mu.Unlock()
}

// sendHeld sends the held requests whose back-off ended by now, unless the
// repair of their range was heard meanwhile, and returns when the next
// one's ends (zero: none held). Only the sender goroutine calls it.
func (c *Client) sendHeld(now time.Time) time.Time {
	var due []*call
	var next time.Time
	c.mu.Lock()
	kept := c.held[:0]
	for _, k := range c.held {
		switch {
		case !k.due.After(now):
			due = append(due, k)
		default:
			kept = append(kept, k)
			if next.IsZero() || k.due.Before(next) {
				next = k.due
			}
		}
	}
	clear(c.held[len(kept):])
	c.held = kept
	c.mu.Unlock()
	for _, k := range due {
		if parts, archived, ok := c.heardRange(repairKey{ch: k.res.Channel, req: k.want}); ok {
			k.archive = archived
			c.completeHeard(k, parts)
			continue
		}
		c.start(k)
	}
	return next
}

func (c *Client) snapshotCall(ch int, session mold.Session, rng seqgap.Range, start time.Time) *call {
	return &call{subject: SnapshotSubject(c.cfg.Feed, ch), snap: true, start: start,
		res: &Result{Channel: ch, Session: session, Range: rng}}
}

// start sends c or queues it when MaxInflight requests are out.
func (c *Client) start(k *call) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.fail(k, errClosed(k))
		return
	}
	if len(c.inflight) >= c.cfg.MaxInflight {
		if len(c.queue) >= c.cfg.QueueLen {
			c.mu.Unlock()
			c.fail(k, &ReplyError{Reason: fmt.Sprintf("%s: %d requests already queued", k.subject, c.cfg.QueueLen)})
			return
		}
		c.queue = append(c.queue, k)
		c.mu.Unlock()
		return
	}
	c.send(k)
	c.mu.Unlock()
	c.failUnsent()
}

// send publishes k; c.mu is held and stays held. A request that cannot be
// sent is set aside in unsent and failed by failUnsent once the lock is
// released (failing reports a result, which takes the lock).
func (c *Client) send(k *call) {
	c.nextID++
	k.id = c.nextID
	k.sent = time.Now()
	k.deadline = k.sent.Add(c.cfg.Timeout)
	c.inflight[k.id] = k
	c.requests.Add(1)
	reply := c.inbox + "." + strconv.FormatUint(k.id, 10)
	var err error
	if k.askRepair() {
		err = c.nc.PublishMsg(&nats.Msg{Subject: k.subject, Reply: reply, Data: k.payload, Header: nats.Header{HeaderAnswer: []string{AnswerRepair}}})
	} else {
		err = c.nc.PublishRequest(k.subject, reply, k.payload)
	}
	if err != nil {
		delete(c.inflight, k.id)
		k.sendErr = &ReplyError{Reason: fmt.Sprintf("%s: send: %v", k.subject, err), Err: err}
		c.unsent = append(c.unsent, k)
	}
}

// askRepair reports whether k asks for its answer as a repair: an
// asynchronous retransmit whose pointer did not lead to a repair this client
// missed.
func (k *call) askRepair() bool {
	return k.wait == nil && !k.snap && !k.query && !k.direct && k.want.Count > 0
}

// failUnsent fails the requests send set aside; c.mu must not be held.
func (c *Client) failUnsent() {
	c.mu.Lock()
	ks := c.unsent
	c.unsent = nil
	c.mu.Unlock()
	for _, k := range ks {
		c.fail(k, k.sendErr)
	}
}

// done removes k from flight and sends queued requests; c.mu is held.
func (c *Client) retire(k *call) {
	delete(c.inflight, k.id)
	for len(c.queue) > 0 && len(c.inflight) < c.cfg.MaxInflight {
		next := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.send(next)
	}
}

// reply collects the parts of every request; it runs on the subscription's
// goroutine.
func (c *Client) reply(m *nats.Msg) {
	defer c.failUnsent() // retire may have sent queued requests
	id, err := strconv.ParseUint(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:], 10, 64)
	if err != nil {
		return
	}
	switch {
	case m.Header.Get(HeaderRepeat) == "true":
		// Someone asked for this range first: a shared loss, even when
		// the repair heard already answered the call.
		c.repeated()
	case m.Header.Get(HeaderRepair) != "":
		c.first()
	}
	c.mu.Lock()
	k := c.inflight[id]
	if k == nil {
		c.mu.Unlock()
		return // timed out already
	}
	final, again, fail := c.take(k, m)
	if final {
		c.sampleRTT(time.Since(k.sent))
	}
	if final && !again {
		c.retire(k)
	}
	c.mu.Unlock()
	if final && !again {
		c.complete(k, m, fail)
	}
}

// take reads one reply message m of call k; c.mu is held. It reports
// whether the reply is final and its error, if any. When an error reply
// means the call goes on as another request (the snapshot instead of a
// range the store no longer holds, or the part of a range that exists), it
// sends that request and reports again.
func (c *Client) take(k *call, m *nats.Msg) (final, again bool, fail error) {
	switch {
	case m.Header.Get("Status") == "503":
		// NATS itself answers when nobody subscribes to the subject.
		return true, false, &ReplyError{Reason: fmt.Sprintf("%s: no feed handler answers on this subject (is it running, with the same feed name?)", k.subject)}
	case m.Header.Get(HeaderError) != "":
		e := errorReply(m)
		return true, c.askAgain(k, e), e
	case m.Header.Get(HeaderRepair) != "":
		return c.pointed(k, m.Header.Get(HeaderRepair))
	case m.Header.Get(HeaderFinal) != "":
		if n, err := strconv.Atoi(m.Header.Get(HeaderFinal)); err != nil || n != len(k.parts) {
			fail = &ReplyError{Reason: fmt.Sprintf("%s: final marker says %q parts, %d received", k.subject, m.Header.Get(HeaderFinal), len(k.parts))}
		}
		return true, false, fail
	}
	ch, _ := channelOf(k.subject) // the client's own subject
	p, ok := c.open(ch, m.Data)
	if !ok {
		return false, false, nil // not the feed handler's: the genuine part may still come
	}
	if n, err := strconv.Atoi(m.Header.Get(HeaderPart)); err != nil || n != len(k.parts)+1 {
		return true, false, &ReplyError{Reason: fmt.Sprintf("%s: part %q out of order after %d parts", k.subject, m.Header.Get(HeaderPart), len(k.parts))}
	}
	k.parts = append(k.parts, p)
	return false, false, nil
}

// pointed takes the pointer that answers call k with repair id; c.mu is
// held. A repair already heard completes the call. One this client cannot
// have heard any more (the server published a later one that arrived, or it
// was forgotten) is asked for again, answered inline; otherwise it is on its
// way, and repaired completes the call when it arrives (or the call times
// out).
func (c *Client) pointed(k *call, id string) (final, again bool, fail error) {
	c.repMu.Lock()
	r := c.byID[id]
	token, n, ok := parseRepairID(id)
	missed := ok && r == nil && n <= c.highest[token]
	if r != nil && r.key == (repairKey{ch: k.res.Channel, req: k.want}) {
		k.parts = r.take()
		c.repMu.Unlock()
		return true, false, nil
	}
	c.repMu.Unlock()
	if r != nil || missed || !ok {
		c.askInline(k)
		return true, true, nil
	}
	k.pointed = time.Now()
	return false, false, nil
}

// askInline sends call k again, to be answered on its reply subject rather
// than by a repair; c.mu is held.
func (c *Client) askInline(k *call) {
	c.retire(k)
	k.direct, k.parts, k.pointed = true, nil, time.Time{}
	c.send(k)
}

// heardRange returns the parts of a repair of key heard recently, if any,
// and whether it was read from the archive.
func (c *Client) heardRange(key repairKey) (parts [][]byte, archived, ok bool) {
	c.repMu.Lock()
	defer c.repMu.Unlock()
	r := c.byRange[key]
	if r == nil || time.Since(r.at) > heardKeep {
		return nil, false, false
	}
	return r.take(), r.archive, true
}

// repaired collects the repairs published on the repair subjects, on the
// subscription's goroutine. A complete repair is kept for a while, and
// answers every request of this client in flight for its range.
func (c *Client) repaired(m *nats.Msg) {
	id := m.Header.Get(HeaderRepair)
	token, n, ok := parseRepairID(id)
	if !ok {
		return
	}
	c.repMu.Lock()
	if m.Header.Get(HeaderFinal) == "" {
		r := c.partial[id]
		if r == nil {
			if len(c.partial) >= maxPartial {
				clear(c.partial) // final markers lost: bounded memory
			}
			r = &heardRepair{id: id}
			c.partial[id] = r
		}
		ch, err := channelOf(m.Subject)
		p, ok := c.open(ch, m.Data)
		if err != nil || !ok {
			c.repMu.Unlock()
			return
		}
		r.parts = append(r.parts, p)
		r.bytes += len(p)
		c.repMu.Unlock()
		return
	}
	r := c.partial[id]
	delete(c.partial, id)
	if r == nil {
		r = &heardRepair{id: id}
	}
	c.highest[token] = max(c.highest[token], n)
	key, err := repairKeyOf(m)
	if err != nil || strconv.Itoa(len(r.parts)) != m.Header.Get(HeaderFinal) {
		c.repMu.Unlock()
		return // incomplete: a pointer to it asks again
	}
	r.key, r.at = key, time.Now()
	r.archive = m.Header.Get(HeaderSource) == SourceArchive
	c.keepHeard(r)
	c.repMu.Unlock()

	var ks, held []*call
	c.mu.Lock()
	for _, k := range c.inflight {
		if k.wait == nil && !k.snap && k.res.Channel == key.ch && k.want == key.req {
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		c.retire(k)
	}
	kept := c.held[:0]
	for _, k := range c.held {
		if k.res.Channel == key.ch && k.want == key.req {
			held = append(held, k)
		} else {
			kept = append(kept, k)
		}
	}
	clear(c.held[len(kept):])
	c.held = kept
	c.mu.Unlock()
	c.failUnsent()
	for _, k := range ks {
		c.sampleRTT(time.Since(k.sent)) // its repair heard: the round trip that matters
		c.repMu.Lock()
		k.parts = r.take()
		c.repMu.Unlock()
		k.archive = r.archive
		c.complete(k, nil, nil)
	}
	for _, k := range held {
		// Asked for by another client while this one waited.
		c.repMu.Lock()
		parts := r.take()
		c.repMu.Unlock()
		k.archive = r.archive
		c.completeHeard(k, parts)
	}
}

// repairKeyOf reads the range a repair's final marker names.
func repairKeyOf(m *nats.Msg) (repairKey, error) {
	ch, err := channelOf(m.Subject)
	session, err2 := mold.ParseSession(m.Header.Get(HeaderSession))
	first, err3 := strconv.ParseUint(m.Header.Get(HeaderFirst), 10, 64)
	count, err4 := strconv.ParseUint(m.Header.Get(HeaderCount), 10, 16)
	if err := errors.Join(err, err2, err3, err4); err != nil {
		return repairKey{}, err
	}
	return repairKey{ch: ch, req: mold.Request{Session: session, Seq: first, Count: uint16(count)}}, nil
}

// keepHeard keeps complete repair r, and forgets the oldest beyond the
// client's bounds; c.repMu is held.
func (c *Client) keepHeard(r *heardRepair) {
	if len(c.highest) > maxPartial {
		clear(c.highest)
	}
	c.heardQ = append(c.heardQ, r)
	c.heardLen += r.bytes
	c.byID[r.id] = r
	c.byRange[r.key] = r
	for len(c.heardQ) > 0 {
		old := c.heardQ[0]
		if len(c.heardQ) <= maxHeard && c.heardLen <= maxHeardBytes && r.at.Sub(old.at) <= heardKeep {
			break
		}
		c.heardQ[0] = nil
		c.heardQ = c.heardQ[1:]
		c.heardLen -= old.bytes
		delete(c.byID, old.id)
		if c.byRange[old.key] == old {
			delete(c.byRange, old.key)
		}
	}
}

// askAgain turns error reply e of call k into another request where one
// can still get the messages, sends it and reports true; c.mu is held.
func (c *Client) askAgain(k *call, e *ReplyError) bool {
	if k.query {
		return false
	}
	if e.Code == CodeTooOld && k.wait == nil && !k.snap && c.cfg.SnapshotAbove >= 0 {
		// The store no longer holds the range: the snapshot is the only
		// way to the current state.
		c.retire(k)
		c.send(c.snapshotCall(k.res.Channel, k.res.Session, k.res.Range, k.start))
		return true
	}
	if e.Code == CodeNotYet && k.wait == nil && e.Next > k.want.Seq {
		// Part of the range exists: ask again for that part. This is also
		// how a probe past the known end of a stale stream learns what it
		// missed.
		c.retire(k)
		if end := k.want.Seq + uint64(k.want.Count); e.Next < end {
			// The rest is past what this feed handler has published:
			// another one of the feed, ahead of it, may have it (see
			// outcomeOf). A gap there is asked for again; a probe's rest
			// touches no gap.
			c.finish(&Result{Channel: k.res.Channel, Session: k.res.Session, Outcome: seqgap.AnswerRetry, Err: e,
				Range: seqgap.Range{From: e.Next, To: end - 1}})
		}
		n := min(e.Next-k.want.Seq, uint64(k.want.Count))
		k.want.Count = uint16(n)
		k.payload = k.want.Append(k.payload[:0])
		k.res.Range.To = k.want.Seq + n - 1
		k.parts = nil
		c.send(k)
		return true
	}
	return false
}

// complete delivers the outcome of retired call k, whose final reply
// message is m and error fail: to a waiting caller, or as an answer.
func (c *Client) complete(k *call, m *nats.Msg, fail error) {
	if k.wait != nil {
		k.wait <- &answer{parts: k.parts, final: m, err: fail}
		return
	}
	if k.query {
		k.res.Outcome, k.res.Session, k.res.Err = seqgap.AnswerSession, mold.Session{}, fail
		if fail == nil {
			k.res.Session, k.res.Err = parseSessionAnswer(k.subject, m)
		}
		k.res.Latency = time.Since(k.start)
		c.finish(k.res)
		return
	}
	if k.snap {
		var snap *Snapshot
		if fail == nil {
			snap, fail = parseSnapshot(k.res.Channel, k.parts, m)
		}
		if fail != nil {
			c.fail(k, fail)
			return
		}
		k.res.Snapshot = snap
		k.res.Outcome, k.res.Next = seqgap.AnswerSnapshot, snap.Seq+1
		k.res.Latency = time.Since(k.start)
		c.finish(k.res)
		return
	}
	if fail == nil {
		fail = c.check(k)
	}
	if fail != nil {
		c.fail(k, fail)
		return
	}
	c.recovered.Add(uint64(k.want.Count))
	if k.archive || m != nil && m.Header.Get(HeaderSource) == SourceArchive {
		c.recoveredArchive.Add(uint64(k.want.Count))
		k.res.Archive = true
	}
	k.res.Outcome, k.res.Packets = seqgap.AnswerPackets, k.parts
	k.res.Latency = time.Since(k.start)
	c.finish(k.res)
}

// check verifies that a retransmit reply carries exactly the messages asked
// for, in order.
func (c *Client) check(k *call) error {
	next, got := k.want.Seq, 0
	for _, p := range k.parts {
		pk, err := mold.Parse(p)
		if err != nil {
			return &ReplyError{Reason: fmt.Sprintf("%s: reply part: %v", k.subject, err)}
		}
		if pk.Session != k.want.Session || pk.Seq != next {
			return &ReplyError{Reason: fmt.Sprintf("%s: reply part of session %s seq %d, want session %s seq %d", k.subject, pk.Session, pk.Seq, k.want.Session, next)}
		}
		next += uint64(pk.Messages())
		got += pk.Messages()
	}
	if got != int(k.want.Count) {
		return &ReplyError{Reason: fmt.Sprintf("%s: reply carried %d messages, %d asked", k.subject, got, k.want.Count)}
	}
	return nil
}

func (c *Client) fail(k *call, err error) {
	if k.wait != nil {
		k.wait <- &answer{err: err}
		return
	}
	var re *ReplyError
	if !k.query && (!errors.As(err, &re) || re.Code != CodeNotYet) {
		// "Nothing there yet" answers a probe; it is not a failure. Nor
		// is a session query left unanswered (no session yet, no server
		// yet): it recovers nothing and is asked again.
		c.failed.Add(1)
	}
	k.res.Err = err
	k.res.Outcome, k.res.Next = outcomeOf(err)
	if k.query {
		// A query that failed says nothing: the tracker keeps what it
		// follows and asks again later.
		k.res.Outcome, k.res.Session = seqgap.AnswerSession, mold.Session{}
	}
	k.res.Latency = time.Since(k.start)
	c.finish(k.res)
}

// expire fails requests whose deadline passed.
func (c *Client) expire() {
	defer c.wg.Done()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case now := <-t.C:
			var late, unheard []*call
			c.mu.Lock()
			for _, k := range c.inflight {
				switch {
				case now.After(k.deadline):
					late = append(late, k)
				case !k.pointed.IsZero() && now.Sub(k.pointed) > repairGrace:
					unheard = append(unheard, k)
				}
			}
			for _, k := range unheard {
				c.askInline(k)
			}
			for _, k := range late {
				c.retire(k)
			}
			c.mu.Unlock()
			c.failUnsent()
			for _, k := range late {
				c.fail(k, &ReplyError{Reason: fmt.Sprintf("%s: %v after %d parts (%v)", k.subject, ErrTimeout, len(k.parts), c.cfg.Timeout), Err: ErrTimeout})
			}
		}
	}
}

// Drain hands every answer received so far to fn, on the caller's
// goroutine. It costs one atomic load when there is none.
func (c *Client) Drain(fn func(*Result)) {
	if c.pending.Load() == 0 {
		return
	}
	c.resMu.Lock()
	rs := c.results
	c.results = nil
	c.pending.Store(0)
	c.resMu.Unlock()
	for _, r := range rs {
		fn(r)
	}
}

func (c *Client) finish(r *Result) {
	c.resMu.Lock()
	c.results = append(c.results, r)
	c.pending.Store(int64(len(c.results)))
	c.resMu.Unlock()
	if f := c.notify.Load(); f != nil {
		(*f)()
	}
}

// parseSessionAnswer reads the session a session query's final marker
// names.
func parseSessionAnswer(subject string, final *nats.Msg) (mold.Session, error) {
	s, err := mold.ParseSession(final.Header.Get(HeaderSession))
	if err != nil || s == (mold.Session{}) {
		return mold.Session{}, &ReplyError{Reason: fmt.Sprintf("%s: answer names no session (%q)", subject, final.Header.Get(HeaderSession))}
	}
	return s, nil
}

// Retransmit sends one re-request for channel ch and waits for the whole
// reply. It returns the reply's packets, or a *ReplyError.
func (c *Client) Retransmit(ch int, req mold.Request) ([][]byte, error) {
	wait := make(chan *answer, 1)
	k := &call{subject: RetransmitSubject(c.cfg.Feed, ch), payload: req.Append(nil), want: req, wait: wait, start: time.Now()}
	c.start(k)
	a := <-wait
	if a.err == nil {
		k.parts = a.parts
		a.err = c.check(k)
	}
	if a.err != nil {
		c.failed.Add(1)
		return nil, a.err
	}
	c.recovered.Add(uint64(req.Count))
	return a.parts, nil
}

// Snapshot is a channel's state as the feed handler served it.
type Snapshot struct {
	Session mold.Session
	// Seq is the channel sequence the snapshot reflects: every message up to
	// it is accounted for, none after.
	Seq uint64
	// Messages are the instruments' last definition, status, quote and
	// trade messages, and their price levels as new-level deltas.
	Messages [][]byte
}

// Snapshot asks for channel ch's snapshot and waits for it.
func (c *Client) Snapshot(ctx context.Context, ch int) (*Snapshot, error) {
	sc := make(chan *answer, 1)
	c.start(&call{subject: SnapshotSubject(c.cfg.Feed, ch), wait: sc, start: time.Now()})
	var a *answer
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case a = <-sc:
	}
	if a.err != nil {
		return nil, a.err
	}
	return parseSnapshot(ch, a.parts, a.final)
}

// parseSnapshot reads a snapshot reply's parts and final marker.
func parseSnapshot(ch int, parts [][]byte, final *nats.Msg) (*Snapshot, error) {
	snap := &Snapshot{}
	seq, err := strconv.ParseUint(final.Header.Get(HeaderSnapshotSeq), 10, 64)
	if err != nil {
		return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: snapshot final marker without a valid %s", ch, HeaderSnapshotSeq)}
	}
	snap.Seq = seq
	if s := final.Header.Get(HeaderSession); s != "" {
		if snap.Session, err = mold.ParseSession(s); err != nil {
			return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: snapshot session: %v", ch, err)}
		}
	}
	for _, p := range parts {
		pk, err := mold.Parse(p)
		if err != nil {
			return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: snapshot part: %v", ch, err)}
		}
		it := pk.Iter()
		for msg, _, ok := it.Next(); ok; msg, _, ok = it.Next() {
			snap.Messages = append(snap.Messages, msg)
		}
	}
	return snap, nil
}
