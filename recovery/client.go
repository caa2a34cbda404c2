package recovery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Feed names the feed in the subjects; default DefaultFeed.
	Feed string
	// Timeout bounds one request, from sending it to the final marker;
	// default 2s.
	Timeout time.Duration
	// Workers is how many requests may be in flight at once; default 4.
	Workers int
	// QueueLen bounds the requests waiting for a worker; a request that
	// finds the queue full fails at once (and its range is given up).
	// Default 4096.
	QueueLen int
	// MaxPerRequest splits larger ranges into several requests; default
	// 10,000 (the server's default limit).
	MaxPerRequest int
}

// Result is the answer to one request, handed to the polling goroutine by
// Drain.
type Result struct {
	Channel int
	Session mold.Session
	Range   seqgap.Range
	// Packets are the recovered MoldUDP64 packets, owned by the receiver.
	Packets [][]byte
	// Err is set when the range (or what Packets do not cover) could not be
	// recovered; the caller gives it up.
	Err error
	// Latency is from the request being queued to the answer.
	Latency time.Duration
}

// ClientStats are a client's cumulative counters.
type ClientStats struct {
	Requests  uint64 // requests sent
	Failed    uint64 // requests that failed (error reply, timeout, queue full)
	Recovered uint64 // messages received in replies
}

// Client is the subscriber side of recovery: it sends the trackers'
// requests over NATS from worker goroutines and hands the answers back to
// the goroutine that polls, which applies them (Drain).
type Client struct {
	nc     *nats.Conn
	cfg    ClientConfig
	reqs   chan request
	notify atomic.Pointer[func()]
	wg     sync.WaitGroup
	done   chan struct{}
	close  sync.Once

	mu      sync.Mutex
	results []*Result
	pending atomic.Int64

	requests, failed, recovered atomic.Uint64
}

type request struct {
	ch      int
	session mold.Session
	r       seqgap.Range
	queued  time.Time
}

// NewClient starts the workers.
func NewClient(nc *nats.Conn, cfg ClientConfig) (*Client, error) {
	if cfg.Feed == "" {
		cfg.Feed = DefaultFeed
	}
	if err := ValidateFeed(cfg.Feed); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = 4096
	}
	if cfg.MaxPerRequest == 0 {
		cfg.MaxPerRequest = 10000
	}
	if cfg.Timeout < 0 || cfg.Workers < 1 || cfg.QueueLen < 1 || cfg.MaxPerRequest < 1 || cfg.MaxPerRequest > mold.MaxCount {
		return nil, fmt.Errorf("recovery: client config: timeout %v, workers %d, queue %d, max per request %d", cfg.Timeout, cfg.Workers, cfg.QueueLen, cfg.MaxPerRequest)
	}
	c := &Client{nc: nc, cfg: cfg, reqs: make(chan request, cfg.QueueLen), done: make(chan struct{})}
	for i := 0; i < cfg.Workers; i++ {
		c.wg.Add(1)
		go c.work()
	}
	return c, nil
}

// SetNotify sets the function called when an answer is ready to Drain.
func (c *Client) SetNotify(f func()) { c.notify.Store(&f) }

// Close stops the workers; requests still queued fail.
func (c *Client) Close() {
	c.close.Do(func() {
		close(c.done)
		c.wg.Wait()
	})
}

// Stats returns the counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Requests: c.requests.Load(), Failed: c.failed.Load(), Recovered: c.recovered.Load()}
}

// For returns the seqgap.Recovery of channel ch.
func (c *Client) For(ch int) seqgap.Recovery { return channelRecovery{c, ch} }

type channelRecovery struct {
	c  *Client
	ch int
}

// Request queues the request; it never blocks.
func (r channelRecovery) Request(session mold.Session, rng seqgap.Range) {
	c := r.c
	req := request{ch: r.ch, session: session, r: rng, queued: time.Now()}
	select {
	case c.reqs <- req:
	default:
		c.finish(&Result{Channel: r.ch, Session: session, Range: rng,
			Err: &ReplyError{Reason: fmt.Sprintf("channel %d: %d requests already queued", r.ch, c.cfg.QueueLen)}})
	}
}

// Drain hands every answer received so far to fn, on the caller's
// goroutine. It costs one atomic load when there is none.
func (c *Client) Drain(fn func(*Result)) {
	if c.pending.Load() == 0 {
		return
	}
	c.mu.Lock()
	rs := c.results
	c.results = nil
	c.pending.Store(0)
	c.mu.Unlock()
	for _, r := range rs {
		fn(r)
	}
}

func (c *Client) finish(r *Result) {
	if r.Err != nil {
		c.failed.Add(1)
	}
	c.mu.Lock()
	c.results = append(c.results, r)
	c.pending.Store(int64(len(c.results)))
	c.mu.Unlock()
	if f := c.notify.Load(); f != nil {
		(*f)()
	}
}

func (c *Client) work() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case req := <-c.reqs:
			c.serve(req)
		}
	}
}

// serve sends one queued request, split into chunks the server accepts.
func (c *Client) serve(req request) {
	for from := req.r.From; from <= req.r.To; {
		n := min(req.r.To-from+1, uint64(c.cfg.MaxPerRequest))
		chunk := seqgap.Range{From: from, To: from + n - 1}
		res := &Result{Channel: req.ch, Session: req.session, Range: chunk}
		res.Packets, res.Err = c.Retransmit(req.ch, mold.Request{Session: req.session, Seq: from, Count: uint16(n)})
		res.Latency = time.Since(req.queued)
		c.finish(res)
		from += n
	}
}

// Retransmit sends one re-request for channel ch and waits for the whole
// reply. It returns the reply's packets, or a *ReplyError.
func (c *Client) Retransmit(ch int, req mold.Request) ([][]byte, error) {
	c.requests.Add(1)
	parts, _, err := c.exchange(RetransmitSubject(c.cfg.Feed, ch), req.Append(nil))
	if err != nil {
		return nil, err
	}
	// The reply must carry exactly the messages asked for, in order.
	next, got := req.Seq, 0
	for _, p := range parts {
		pk, err := mold.Parse(p)
		if err != nil {
			return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: reply part: %v", ch, err)}
		}
		if pk.Session != req.Session || pk.Seq != next {
			return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: reply part of session %s seq %d, want session %s seq %d", ch, pk.Session, pk.Seq, req.Session, next)}
		}
		next += uint64(pk.Messages())
		got += pk.Messages()
	}
	if got != int(req.Count) {
		return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: reply carried %d messages, %d asked", ch, got, req.Count)}
	}
	c.recovered.Add(uint64(got))
	return parts, nil
}

// Snapshot is a channel's state as the feed handler served it.
type Snapshot struct {
	Session mold.Session
	// Seq is the channel sequence the snapshot reflects: every message up to
	// it is accounted for, none after.
	Seq uint64
	// Messages are the instruments' last definition, status, quote and
	// trade messages.
	Messages [][]byte
}

// Snapshot asks for channel ch's snapshot and waits for it.
func (c *Client) Snapshot(ctx context.Context, ch int) (*Snapshot, error) {
	type answer struct {
		parts [][]byte
		final *nats.Msg
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		parts, final, err := c.exchange(SnapshotSubject(c.cfg.Feed, ch), nil)
		done <- answer{parts, final, err}
	}()
	var a answer
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case a = <-done:
	}
	if a.err != nil {
		return nil, a.err
	}
	snap := &Snapshot{}
	seq, err := strconv.ParseUint(a.final.Header.Get(HeaderSnapshotSeq), 10, 64)
	if err != nil {
		return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: snapshot final marker without a valid %s", ch, HeaderSnapshotSeq)}
	}
	snap.Seq = seq
	if s := a.final.Header.Get(HeaderSession); s != "" {
		if snap.Session, err = mold.ParseSession(s); err != nil {
			return nil, &ReplyError{Reason: fmt.Sprintf("channel %d: snapshot session: %v", ch, err)}
		}
	}
	for _, p := range a.parts {
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

// exchange sends a request and collects its parts up to the final marker.
func (c *Client) exchange(subject string, payload []byte) ([][]byte, *nats.Msg, error) {
	inbox := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, nil, &ReplyError{Reason: fmt.Sprintf("%s: subscribe to the reply inbox: %v", subject, err)}
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(subject, inbox, payload); err != nil {
		return nil, nil, &ReplyError{Reason: fmt.Sprintf("%s: send: %v", subject, err)}
	}
	deadline := time.Now().Add(c.cfg.Timeout)
	var parts [][]byte
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if errors.Is(err, nats.ErrTimeout) {
			return nil, nil, &ReplyError{Reason: fmt.Sprintf("%s: %v after %d parts (%v)", subject, ErrTimeout, len(parts), c.cfg.Timeout)}
		}
		if err != nil {
			return nil, nil, &ReplyError{Reason: fmt.Sprintf("%s: %v", subject, err)}
		}
		if code := m.Header.Get(HeaderError); code != "" {
			e := &ReplyError{Code: ErrorCode(code), Reason: m.Header.Get(HeaderReason)}
			e.Oldest, _ = strconv.ParseUint(m.Header.Get(HeaderOldest), 10, 64)
			e.Next, _ = strconv.ParseUint(m.Header.Get(HeaderNext), 10, 64)
			return nil, nil, e
		}
		if f := m.Header.Get(HeaderFinal); f != "" {
			if n, err := strconv.Atoi(f); err != nil || n != len(parts) {
				return nil, nil, &ReplyError{Reason: fmt.Sprintf("%s: final marker says %q parts, %d received", subject, f, len(parts))}
			}
			return parts, m, nil
		}
		if n, err := strconv.Atoi(m.Header.Get(HeaderPart)); err != nil || n != len(parts)+1 {
			return nil, nil, &ReplyError{Reason: fmt.Sprintf("%s: part %q out of order after %d parts", subject, m.Header.Get(HeaderPart), len(parts))}
		}
		parts = append(parts, m.Data)
	}
}
