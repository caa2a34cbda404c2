package archive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/mold"
)

// Defaults of RecorderConfig.
const (
	// DefaultRecordBytes is the default RecorderConfig.RecordBytes.
	DefaultRecordBytes = 256 << 10
	// DefaultRecordDelay is the default RecorderConfig.RecordDelay.
	DefaultRecordDelay = 50 * time.Millisecond
	// DefaultBuffers is the default RecorderConfig.Buffers.
	DefaultBuffers = 32
	// maxPending bounds the records published and not yet acknowledged.
	maxPending = 64
	// maxLossRuns bounds the runs of messages not recorded that a channel
	// keeps until a buffer is free for their loss records: a fixed array,
	// so that losing a packet allocates nothing on the send path.
	maxLossRuns = 8
)

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Feed names the feed (its subjects and stream).
	Feed string
	// Channels is the number of channels recorded.
	Channels int
	// Conn is the NATS connection to a server with JetStream.
	Conn *nats.Conn
	// Stream sets the stream's storage, replicas and retention; the
	// recorder creates the stream, or updates its limits.
	Stream StreamConfig
	// RecordBytes bounds one stored record; 0 means DefaultRecordBytes.
	// At most 1 MiB less a header's room, under NATS's default payload
	// limit.
	RecordBytes int
	// RecordDelay is the longest a packet waits in a record before the
	// record is stored; 0 means DefaultRecordDelay.
	RecordDelay time.Duration
	// Buffers is the number of record buffers per channel, each of
	// RecordBytes; 0 means DefaultBuffers. When every one waits for
	// JetStream, packets are not recorded: they are counted and written as
	// a loss record once a buffer is free.
	Buffers int
	// OnError, if set, is called (from the recorder's goroutine) with each
	// failure to store a record, a *StoreError. It must not block.
	OnError func(error)
}

var recCheck = config.Checker{Pkg: "archive", Struct: "RecorderConfig"}

func (c *RecorderConfig) withDefaults() {
	config.Default(&c.RecordBytes, DefaultRecordBytes)
	config.Default(&c.RecordDelay, DefaultRecordDelay)
	config.Default(&c.Buffers, DefaultBuffers)
}

func (c *RecorderConfig) validate() error {
	switch {
	case c.Conn == nil:
		return recCheck.Invalid("Conn", "nil", "a NATS connection to a server with JetStream is required")
	case c.Channels < 1 || c.Channels > 1024:
		return recCheck.Invalid("Channels", c.Channels, "want 1..1024")
	case c.RecordBytes < HeaderLen+2+MaxPacketLen || c.RecordBytes > 1<<20-4096:
		return recCheck.Invalid("RecordBytes", c.RecordBytes, "want %d..%d: room for the largest packet, under NATS's 1 MiB payload", HeaderLen+2+MaxPacketLen, 1<<20-4096)
	case c.RecordDelay < time.Millisecond || c.RecordDelay > time.Minute:
		return recCheck.Invalid("RecordDelay", c.RecordDelay, "want 1ms..1m")
	case c.Buffers < 2 || c.Buffers > 4096:
		return recCheck.Invalid("Buffers", c.Buffers, "want 2..4096")
	}
	return c.Stream.validate(c.Feed)
}

// RecorderStats are a Recorder's cumulative counters.
type RecorderStats struct {
	Records      uint64 // packet records stored (acknowledged)
	LossRecords  uint64 // loss records stored
	Packets      uint64 // packets stored
	Messages     uint64 // messages in them
	Bytes        uint64 // record bytes stored
	LostPackets  uint64 // packets not recorded: no free buffer, or their record refused
	LostMessages uint64 // messages in them
	// UnwrittenLoss counts runs of lost messages that no loss record will
	// cover: a channel's queue of runs was full of other sessions' runs, or
	// JetStream still refused their loss record at Close. A reader sees
	// their messages as a gap all the same.
	UnwrittenLoss  uint64
	Errors         uint64  // records (and loss records) JetStream refused or did not acknowledge
	Retries        uint64  // publications of records repeated after no acknowledgement (each stored once)
	LagSeconds     float64 // the latest stored record's first packet to its acknowledgement
	PendingRecords int     // records handed over and not yet acknowledged
}

// Recorder records every packet of a feed to its archive stream, off the
// sending path. Record copies a packet into its channel's current record
// and returns; the recorder's goroutine stores full records, and records
// older than RecordDelay, as JetStream messages, each with the message id
// "SESSION.CHANNEL.FIRST-NEXT", so that a record published twice is stored once.
type Recorder struct {
	cfg      RecorderConfig
	js       jetstream.JetStream
	stream   string
	subjects []string
	chans    []*chanRecorder
	out      chan *outRecord
	done     chan struct{}
	stop     chan struct{}
	closed   atomic.Bool

	records, lossRecords, packets, messages, bytes, lostPackets, lostMessages, unwritten, errs atomic.Uint64
	retries                                                                                    atomic.Uint64
	lagNs                                                                                      atomic.Int64
	pending                                                                                    atomic.Int64
	faultSeen                                                                                  [faultKinds]bool // owned by run
}

// chanRecorder is one channel's record in progress.
type chanRecorder struct {
	ch   int
	mu   sync.Mutex
	cur  *outRecord // being filled; nil when none is free
	free chan *outRecord
	// Runs of messages not recorded, oldest first, each to be written as
	// a loss record once a buffer is free.
	losses  [maxLossRuns]lossRun
	nLosses int
	// ended is the last session whose end of session was recorded: a
	// feed handler repeats it while it lingers, and once is enough.
	ended mold.Session
}

// lossRun is a run of one session's messages, [first, next), that the
// archive does not hold.
type lossRun struct {
	session     mold.Session
	first, next uint64
	atNs        int64 // when the run began or its loss record was last refused
}

// outRecord is a record buffer, filled by Record and stored by the
// recorder's goroutine.
type outRecord struct {
	b       builder
	c       *chanRecorder
	data    []byte // the finished record
	packets uint64
	tries   int // publications that went unacknowledged (retried)
}

// NewRecorder creates or updates the feed's archive stream and starts
// recording.
func NewRecorder(ctx context.Context, cfg RecorderConfig) (*Recorder, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("archive: jetstream: %w", err)
	}
	if err := ensureStream(ctx, js, cfg.Feed, cfg.Stream); err != nil {
		return nil, err
	}
	r := &Recorder{cfg: cfg, js: js, stream: StreamName(cfg.Feed), chans: make([]*chanRecorder, cfg.Channels),
		subjects: make([]string, cfg.Channels), out: make(chan *outRecord, cfg.Channels*cfg.Buffers+cfg.Channels),
		done: make(chan struct{}), stop: make(chan struct{})}
	for ch := range r.chans {
		c := &chanRecorder{ch: ch, free: make(chan *outRecord, cfg.Buffers)}
		for range cfg.Buffers {
			c.free <- &outRecord{c: c, b: builder{buf: make([]byte, HeaderLen, cfg.RecordBytes), capBytes: cfg.RecordBytes}}
		}
		r.chans[ch] = c
		r.subjects[ch] = Subject(cfg.Feed, ch)
	}
	go r.run()
	return r, nil
}

// Record records one packet of channel ch as sent: a data packet or an end
// of session (heartbeats are not recorded). It copies the packet and never
// blocks on JetStream; it allocates nothing. It is safe to call from one
// goroutine per channel, concurrently with the recorder's goroutine.
func (r *Recorder) Record(ch int, pkt []byte) {
	h, err := mold.DecodeHeader(pkt)
	if err != nil || h.IsHeartbeat() || ch < 0 || ch >= len(r.chans) || len(pkt) > MaxPacketLen || r.closed.Load() {
		return
	}
	now := time.Now().UnixNano()
	c := r.chans[ch]
	c.mu.Lock()
	defer c.mu.Unlock()
	n := h.Messages()
	if h.IsEndOfSession() && c.ended == h.Session {
		return
	}
	if o := c.cur; o != nil && (o.b.session != h.Session || o.b.next != h.Seq || !o.b.fits(len(pkt))) {
		r.handOver(c)
	}
	if c.cur == nil && !r.take(c, h.Session, h.Seq, now) {
		r.lose(c, h.Session, h.Seq, h.Seq+uint64(n), now)
		r.lostPackets.Add(1)
		r.lostMessages.Add(uint64(n))
		return
	}
	c.cur.b.add(pkt, n, now)
	c.cur.packets++
	if h.IsEndOfSession() {
		c.ended = h.Session
		r.handOver(c)
	}
}

// lose adds messages [first, next) of session s to c's runs not
// recorded: to a run it continues or overlaps (the usual case, a packet
// after the last lost), else as a new run. When the queue is full the
// latest run of the session grows to cover them, and the messages
// between, some of which may be stored: the loss record then says more
// is missing than is. With no run of the session in a full queue the run
// is counted in UnwrittenLoss. c.mu is held; allocates nothing.
func (r *Recorder) lose(c *chanRecorder, s mold.Session, first, next uint64, now int64) {
	if first >= next {
		return
	}
	for i := c.nLosses - 1; i >= 0; i-- {
		l := &c.losses[i]
		if l.session == s && first <= l.next && next >= l.first {
			l.first, l.next = min(l.first, first), max(l.next, next)
			return
		}
	}
	if c.nLosses < len(c.losses) {
		c.losses[c.nLosses] = lossRun{session: s, first: first, next: next, atNs: now}
		c.nLosses++
		return
	}
	for i := c.nLosses - 1; i >= 0; i-- {
		if l := &c.losses[i]; l.session == s {
			l.first, l.next = min(l.first, first), max(l.next, next)
			return
		}
	}
	r.unwritten.Add(1)
}

// writeLosses hands over a loss record for each of c's runs not recorded
// that began before beforeNs, oldest first, while buffers are free. It
// reports whether none is left. c.mu is held.
func (r *Recorder) writeLosses(c *chanRecorder, now, beforeNs int64) bool {
	for c.nLosses > 0 {
		l := c.losses[0]
		if l.atNs >= beforeNs {
			return false
		}
		var o *outRecord
		select {
		case o = <-c.free:
		default:
			return false
		}
		o.b.loss(c.ch, l.session, l.first, l.next, now)
		o.packets = 0
		o.data = o.b.finish()
		r.pending.Add(1)
		r.out <- o // never blocks: room for every buffer
		copy(c.losses[:], c.losses[1:c.nLosses])
		c.nLosses--
	}
	return true
}

// take gives c a fresh record starting at seq in session s, first writing
// every pending loss record. It reports false when no buffer is free.
func (r *Recorder) take(c *chanRecorder, s mold.Session, seq uint64, now int64) bool {
	if !r.writeLosses(c, now, math.MaxInt64) {
		return false
	}
	select {
	case c.cur = <-c.free:
	default:
		return false
	}
	c.cur.b.reset(c.ch, s, seq, now)
	c.cur.packets = 0
	return true
}

// handOver finishes c's current record, if it holds packets, and hands it
// to the recorder's goroutine. c.mu is held.
func (r *Recorder) handOver(c *chanRecorder) {
	o := c.cur
	if o == nil || o.b.count == 0 {
		return
	}
	c.cur = nil
	o.data = o.b.finish()
	r.pending.Add(1)
	r.out <- o // never blocks: room for every buffer
}

// run stores records until Close, then what is left.
func (r *Recorder) run() {
	defer close(r.done)
	// The goroutine wakes on its own clock and takes what was handed over
	// meanwhile: a hand-over never wakes it. A wake-up from the sending
	// goroutine would queue it, and the JetStream work it starts, on the
	// sender's processor, ahead of the sender's next packet.
	tick := time.NewTicker(pollEvery(r.cfg.RecordDelay))
	defer tick.Stop()
	var fl []inflight
	for {
		select {
		case <-tick.C:
			r.flushOld(time.Now().UnixNano() - r.cfg.RecordDelay.Nanoseconds())
			fl = r.drain(fl)
			fl = r.reap(fl, 0)
		case <-r.stop:
			r.flushOld(math.MaxInt64)
			fl = r.drain(fl)
			fl = r.reap(fl, len(fl))
			// Loss records refused just now are tried once more.
			r.flushOld(math.MaxInt64)
			fl = r.drain(fl)
			for len(fl) > 0 { // retries end after maxTries
				fl = r.reap(fl, len(fl))
			}
			for _, c := range r.chans {
				c.mu.Lock()
				r.unwritten.Add(uint64(c.nLosses))
				c.nLosses = 0
				c.mu.Unlock()
			}
			return
		}
	}
}

// pollEvery is how often the recorder's goroutine takes the records
// handed over: a tenth of the record delay, at least every 5 ms.
func pollEvery(delay time.Duration) time.Duration {
	return max(time.Millisecond/2, min(delay/10, 5*time.Millisecond))
}

// drain publishes every record handed over.
func (r *Recorder) drain(fl []inflight) []inflight {
	for {
		select {
		case o := <-r.out:
			fl = r.publish(o, fl)
		default:
			return fl
		}
	}
}

// inflight is a record published and not yet acknowledged.
type inflight struct {
	o   *outRecord
	ack jetstream.PubAckFuture
	msg *nats.Msg // as published, for a retry
}

// publish stores o asynchronously and collects acknowledgements, waiting
// for the oldest while maxPending are outstanding.
func (r *Recorder) publish(o *outRecord, fl []inflight) []inflight {
	b := &o.b
	// The id names the messages the record covers, first and next: a
	// record published twice is stored once, and so is the same record
	// of a hot-hot peer, but a peer's record of other extent from the
	// same first message is not taken for it.
	id := b.session.String() + "." + strconv.Itoa(b.channel) + "." + strconv.FormatUint(b.first, 10) + "-" + strconv.FormatUint(b.next, 10)
	if b.kind == KindLoss {
		id += ".loss"
	}
	msg := &nats.Msg{Subject: r.subjects[b.channel], Data: o.data, Header: nats.Header{jetstream.MsgIDHeader: []string{id}}}
	ack, err := r.js.PublishMsgAsync(msg)
	if err != nil {
		r.failed(o, err)
		return fl
	}
	fl = append(fl, inflight{o: o, ack: ack, msg: msg})
	return r.reap(fl, len(fl)-maxPending+1)
}

// maxTries is how many times a record is published while JetStream does
// not acknowledge it (a stream leader elected anew, a server overloaded)
// before it is counted lost. The message id makes a retry of a record
// already stored a duplicate, dropped.
const maxTries = 4

// retry publishes f's record again if its failure may be passing, and
// reports whether it did. The retry is stored after records published
// since: a replay puts them back in order (reorder).
func (r *Recorder) retry(f inflight, err error, fl []inflight) ([]inflight, bool) {
	if f.o.tries+1 >= maxTries || !(classify(err) == FaultNoAck || errors.Is(err, nats.ErrNoResponders)) {
		return fl, false
	}
	f.o.tries++
	r.retries.Add(1)
	ack, perr := r.js.PublishMsgAsync(f.msg)
	if perr != nil {
		return fl, false
	}
	return append(fl, inflight{o: f.o, ack: ack, msg: f.msg}), true
}

// reap releases the acknowledged records at the front of fl, waiting
// (each at most 5 s) for the first wait of them.
func (r *Recorder) reap(fl []inflight, wait int) []inflight {
	for len(fl) > 0 {
		f := fl[0]
		var err error
		if wait > 0 {
			wait--
			t := time.NewTimer(5 * time.Second)
			select {
			case <-f.ack.Ok():
			case err = <-f.ack.Err():
			case <-t.C:
				err = errNoAck
			}
			t.Stop()
		} else {
			select {
			case <-f.ack.Ok():
			case err = <-f.ack.Err():
			default:
				return fl
			}
		}
		fl = fl[1:]
		if err != nil {
			var again bool
			if fl, again = r.retry(f, err, fl); !again {
				r.failed(f.o, err)
			}
		} else {
			r.stored(f.o)
		}
	}
	return fl
}

// stored counts an acknowledged record and frees its buffer.
func (r *Recorder) stored(o *outRecord) {
	b := &o.b
	if b.kind == KindLoss {
		r.lossRecords.Add(1)
	} else {
		r.records.Add(1)
		r.packets.Add(o.packets)
		r.messages.Add(b.next - b.first)
		r.lagNs.Store(time.Now().UnixNano() - b.firstNs)
	}
	r.bytes.Add(uint64(len(o.data)))
	r.release(o)
}

// failed counts a record that was not stored. Its packets are lost to
// the archive: its range joins the channel's runs not recorded, to be
// written as a loss record when a buffer is free. A loss record refused
// goes back to the runs and is tried again a RecordDelay later (or
// before the channel's next record), so that a hole is written once
// JetStream takes records again.
func (r *Recorder) failed(o *outRecord, err error) {
	r.errs.Add(1)
	b := &o.b
	if r.cfg.OnError != nil {
		r.cfg.OnError(r.storeError(o, err))
	}
	if b.kind == KindPackets {
		r.lostPackets.Add(o.packets)
		r.lostMessages.Add(b.next - b.first)
	}
	c := o.c
	c.mu.Lock()
	r.lose(c, b.session, b.first, b.next, time.Now().UnixNano())
	c.mu.Unlock()
	r.release(o)
}

// release returns o's buffer to its channel.
func (r *Recorder) release(o *outRecord) {
	r.pending.Add(-1)
	o.c.free <- o // never blocks: the channel has room for all its buffers
}

// flushOld hands over every record whose first packet was taken before
// beforeNs, and the loss records of runs that began before it.
func (r *Recorder) flushOld(beforeNs int64) {
	now := time.Now().UnixNano()
	for _, c := range r.chans {
		c.mu.Lock()
		r.writeLosses(c, now, beforeNs)
		if c.cur != nil && c.cur.b.count > 0 && c.cur.b.firstNs < beforeNs {
			r.handOver(c)
		}
		c.mu.Unlock()
	}
}

// describe names a record for errors.
func (o *outRecord) describe() string {
	b := &o.b
	kind := "record"
	if b.kind == KindLoss {
		kind = "loss record"
	}
	return fmt.Sprintf("%s of channel %d session %s messages %d..%d", kind, b.channel, b.session, b.first, b.next-1)
}

// Stats returns the recorder's counters. Any goroutine.
func (r *Recorder) Stats() RecorderStats {
	return RecorderStats{
		Records: r.records.Load(), LossRecords: r.lossRecords.Load(), Packets: r.packets.Load(), Messages: r.messages.Load(),
		Bytes: r.bytes.Load(), LostPackets: r.lostPackets.Load(), LostMessages: r.lostMessages.Load(), UnwrittenLoss: r.unwritten.Load(), Errors: r.errs.Load(), Retries: r.retries.Load(),
		LagSeconds: time.Duration(r.lagNs.Load()).Seconds(), PendingRecords: int(r.pending.Load()),
	}
}

// Close stores what is recorded and waits for JetStream's
// acknowledgements (at most 5 s for each record outstanding), then stops.
// Packets recorded after Close are ignored. Idempotent.
func (r *Recorder) Close() error {
	if r.closed.Swap(true) {
		<-r.done
		return nil
	}
	close(r.stop)
	<-r.done
	return nil
}
