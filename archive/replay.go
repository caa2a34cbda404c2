package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
	"github.com/tickcast/tickcast/ud"
)

// Position is a place in the archive: a time, or a session and a message
// sequence in it.
type Position struct {
	Time    time.Time
	Session mold.Session
	Seq     uint64 // with Session; 0 with a time
}

// IsZero reports whether p names no place (the start of the archive, or
// no end).
func (p Position) IsZero() bool { return p.Time.IsZero() && p.Seq == 0 }

// String formats p as ParsePosition reads it.
func (p Position) String() string {
	if p.Seq > 0 {
		return p.Session.String() + ":" + strconv.FormatUint(p.Seq, 10)
	}
	if p.Time.IsZero() {
		return "start"
	}
	return p.Time.UTC().Format(time.RFC3339Nano)
}

// ParsePosition reads a position: an RFC 3339 time (2026-12-04T10:31:07Z),
// SESSION:SEQ (a session of up to 10 characters and a message sequence
// from 1), or "start".
func ParsePosition(s string) (Position, error) {
	s = strings.TrimSpace(s)
	if s == "start" {
		return Position{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Position{Time: t}, nil
	}
	sess, seq, ok := strings.Cut(s, ":")
	if ok {
		n, err := strconv.ParseUint(seq, 10, 64)
		ses, serr := mold.ParseSession(sess)
		if err == nil && serr == nil && n > 0 {
			return Position{Session: ses, Seq: n}, nil
		}
	}
	return Position{}, fmt.Errorf("%q: want an RFC 3339 time (2026-12-04T10:31:07Z), SESSION:SEQ (a session and a message sequence from 1) or start", s)
}

// ReplayConfig configures replay receivers.
type ReplayConfig struct {
	Feed string
	Conn *nats.Conn
	// File, if set, is an archive file (FileWriter) to replay instead of
	// the stream; Conn is then not used.
	File string
	// From is where the replay starts: the first record stored at or after
	// a time, or the packet holding a session's message; zero: the oldest
	// record held.
	From Position
	// To is where it ends: the last record stored before a time, or the
	// packet holding a session's message; zero: the last record stored
	// when the replay started.
	To Position
	// Speed paces the replay: 0 as fast as the subscriber takes the
	// packets, 1 at the pace they were recorded, N N times faster.
	Speed float64
	// Follow replays on past the records stored when the replay started,
	// as they are stored, for a replay that joins the live stream
	// (MergeReceiver); To must be zero.
	Follow bool
	// RingSlots and MaxDatagram size each channel's ring, as for udp.
	RingSlots   int
	MaxDatagram int
	// OnError, if set, is called with each record that is corrupt (it is
	// skipped: its messages are a gap) and with the error that ends a
	// channel's replay early. It must not block.
	OnError func(error)
}

// ReplayStats are a replay receiver's counters beyond ud.RecvStats.
type ReplayStats struct {
	Records     uint64 // records read
	LossRecords uint64 // loss records met (their messages are a gap)
	// LostMessages are the messages of the loss records met that no
	// packet delivered carries: a hot-hot peer's records may hold what
	// one recorder lost. Final once Done.
	LostMessages uint64
	// Duplicates are packets not delivered because every message in them
	// was delivered already: the archive of two hot-hot feed handlers
	// holds most messages twice.
	Duplicates uint64
	Corrupt    uint64 // records that failed to decode, skipped
	Unverified uint64 // packets whose seal did not open, dropped
	Done       bool   // the replay has delivered everything up to To
}

// ReplayReceiver delivers one channel's archived packets into a ring, as a
// multicast receiver delivers the live ones: it implements ud.Receiver, so
// a subscriber replays through its usual path, with its gap accounting and
// filters. Sealed packets are opened here with the archive's key records
// and delivered without their seal.
type ReplayReceiver struct {
	ud.Lender
	cfg  ReplayConfig
	ch   int
	ring *ud.Ring
	rd   recordSource // nil without play
	stop chan struct{}
	done chan struct{}

	// Owned by the replay's goroutine.
	keys map[mold.Session]*seal.Schedule
	open *seal.Keys

	datagrams, bytes, records, lossRecords, lostMessages, corrupt, unverified, ringFull, duplicates atomic.Uint64
	finished                                                                                        atomic.Bool
	closed                                                                                          atomic.Bool
	atTail                                                                                          atomic.Bool // Follow: every record stored has been delivered
}

var _ ud.Receiver = (*ReplayReceiver)(nil)

// Receivers returns the hook that opens a replay receiver for each of a
// subscriber's lines: line A's replays the channel's archive; line B's
// (the archive holds one copy) delivers nothing.
func Receivers(cfg ReplayConfig) ud.NewReceiverFunc {
	return ud.OpenReceivers("archive", func(id ud.LineID, n *ud.Notifier) (*ReplayReceiver, error) {
		return NewReplayReceiver(cfg, id.Channel, id.Line == ud.LineA, n)
	})
}

// NewReplayReceiver opens channel ch's replay; without play it delivers
// nothing (a B line).
func NewReplayReceiver(cfg ReplayConfig, ch int, play bool, n *ud.Notifier) (*ReplayReceiver, error) {
	if cfg.RingSlots == 0 {
		cfg.RingSlots = 4096
	}
	if cfg.MaxDatagram == 0 {
		cfg.MaxDatagram = MaxPacketLen
	}
	if cfg.Follow && !cfg.To.IsZero() {
		return nil, fmt.Errorf("archive: a replay that follows the archive has no end: To %s", cfg.To)
	}
	if cfg.Speed < 0 {
		return nil, fmt.Errorf("archive: replay speed %v: want 0 (as fast as taken), 1 (as recorded) or more", cfg.Speed)
	}
	ring, err := ud.NewRing(cfg.RingSlots, cfg.MaxDatagram)
	if err != nil {
		return nil, fmt.Errorf("archive: replay ring: %w", err)
	}
	if n != nil {
		ring.SetNotifier(n)
	}
	r := &ReplayReceiver{Lender: ud.NewLender(ring), cfg: cfg, ch: ch, ring: ring, stop: make(chan struct{}), done: make(chan struct{}), open: &seal.Keys{}}
	if !play {
		r.finished.Store(true)
		close(r.done)
		return r, nil
	}
	if cfg.File != "" {
		src, keys, err := openFileSource(cfg.File, ch, cfg.From.Time)
		if err != nil {
			return nil, err
		}
		r.keys, r.rd = keys, src
		go r.run(src)
		return r, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("archive: jetstream: %w", err)
	}
	err = whileElecting(ctx, func() (err error) {
		r.keys, err = readKeys(ctx, js, cfg.Feed, ch)
		return err
	})
	if err != nil {
		return nil, refused(cfg.Conn, err)
	}
	var rd *Reader
	err = whileElecting(ctx, func() (err error) {
		rd, err = OpenReader(ctx, ReaderConfig{Feed: cfg.Feed, Channel: ch, Conn: cfg.Conn, From: cfg.From.Time, Follow: cfg.Follow})
		return err
	})
	if err != nil {
		return nil, refused(cfg.Conn, err)
	}
	r.rd = rd
	go r.run(rd)
	return r, nil
}

// run reads the records and delivers their packets until To, the end of
// what was stored at the start, or Close.
func (r *ReplayReceiver) run(src recordSource) {
	defer close(r.done)
	defer src.Close()
	rd := newReorder(src) // records stored out of order, back in order
	defer r.finished.Store(true)
	started := r.cfg.From.Seq == 0 // from a time or the start: every packet
	var pace pacer
	pace.speed = r.cfg.Speed
	var seen sessionSpans
	var cover coverage // each message once, of hot-hot recorders' copies
	defer func() { r.lostMessages.Store(cover.lost()) }()
	for {
		rec, _, err := rd.Next()
		switch {
		case err == nil:
		case errors.Is(err, ErrCorrupt):
			r.corrupt.Add(1)
			r.fail(err)
			continue
		case errors.Is(err, io.EOF):
			if !started {
				r.fail(fmt.Errorf("%w: channel %d: from %s: the archive holds sessions %s", ErrOutOfRange, r.ch, r.cfg.From, seen))
			}
			return
		default:
			if !r.closed.Load() {
				r.fail(fmt.Errorf("archive: replay of channel %d ended early: %w", r.ch, err))
			}
			return
		}
		if !rd.AtTail() {
			r.atTail.Store(false)
		}
		if !seen.has(rec.Session) {
			seen.add(rec.Session, rec.First)
		}
		seen.extend(rec.Session, rec.Next)
		r.records.Add(1)
		if !r.cfg.To.Time.IsZero() && time.Unix(0, rec.FirstNs).After(r.cfg.To.Time) {
			return
		}
		if rec.Kind == KindLoss {
			if started {
				r.lossRecords.Add(1)
				cover.lose(rec.Session, rec.First, rec.Next)
				r.lostMessages.Store(cover.lost())
			}
			r.atTail.Store(rd.AtTail())
			continue
		}
		if !started {
			if rec.Session != r.cfg.From.Session || rec.Next <= r.cfg.From.Seq {
				r.atTail.Store(rd.AtTail())
				continue
			}
		}
		i, n := 0, rec.Packets()
		stop := false
		err = rec.EachPacket(func(p []byte) error {
			h, _ := mold.DecodeHeader(p) // Decode checked it
			i++
			if !started {
				if h.Seq+uint64(h.Messages()) <= r.cfg.From.Seq {
					return nil
				}
				started = true
			}
			if r.cfg.To.Seq > 0 && h.Session == r.cfg.To.Session && h.Seq > r.cfg.To.Seq {
				stop = true
				return errStop
			}
			if !cover.fresh(h) {
				r.duplicates.Add(1)
				return nil
			}
			// Packets of a record are spread evenly over the span it was
			// recorded in: the record keeps no time per packet.
			at := rec.FirstNs
			if n > 1 {
				at += (rec.LastNs - rec.FirstNs) * int64(i-1) / int64(n-1)
			}
			if !pace.wait(at, r.stop) {
				return errStop
			}
			return r.deliver(h, p)
		})
		if err != nil || stop {
			return
		}
		r.atTail.Store(rd.AtTail())
	}
}

// whileElecting calls fn until it succeeds, fails otherwise than for want
// of a JetStream responder, or ctx ends: a cluster that has just lost a
// node answers no JetStream request until it has elected its leaders
// anew.
func whileElecting(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil || !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errStop ends a record's packets early.
var errStop = errors.New("stop")

// fail reports err to OnError.
func (r *ReplayReceiver) fail(err error) {
	if r.cfg.OnError != nil {
		r.cfg.OnError(err)
	}
}

// deliver copies packet p into the next free slot, waiting for one,
// opening its seal if its session has a key record.
func (r *ReplayReceiver) deliver(h mold.Header, p []byte) error {
	if len(p) > r.cfg.MaxDatagram {
		r.unverified.Add(1)
		return nil
	}
	s := r.ring.FreeSlot(0)
	full := false
	for s == nil {
		if !full {
			full = true
			r.ringFull.Add(1)
		}
		if err := r.ring.WaitFree(100 * time.Millisecond); err != nil || r.closed.Load() {
			return errStop
		}
		s = r.ring.FreeSlot(0)
	}
	s.N = copy(s.Buf, p)
	s.Opened = false
	if sch := r.keys[h.Session]; sch != nil && h.Messages() > 0 {
		out, err := r.unseal(sch, s.Buf[:s.N])
		if err != nil {
			r.unverified.Add(1)
			r.fail(fmt.Errorf("archive: channel %d session %s sequence %d: %w", r.ch, h.Session, h.Seq, err))
			return nil
		}
		s.N, s.Opened = len(out), true
	}
	s.RecvNs = time.Now().UnixNano()
	r.datagrams.Add(1)
	r.bytes.Add(uint64(s.N))
	r.ring.Publish(1)
	return nil
}

// unseal opens p in place with the key of its epoch, derived from the
// session's key record when first needed.
func (r *ReplayReceiver) unseal(sch *seal.Schedule, p []byte) ([]byte, error) {
	return openSealed(&r.open, sch, p)
}

// openSealed opens sealed packet p in place with *keys, adding to them the
// key of p's epoch, derived from the session's key record (sch), when it
// is not held yet.
func openSealed(keys **seal.Keys, sch *seal.Schedule, p []byte) ([]byte, error) {
	out, err := (*keys).Open(p)
	var se *seal.Error
	if err == nil || !errors.As(err, &se) || !errors.Is(err, seal.ErrUnknownEpoch) {
		return out, err
	}
	kb, err := sch.KeyBytes(se.Epoch)
	if err != nil {
		return nil, err
	}
	var k *seal.Key
	if sch.Encrypts() {
		k, err = seal.NewEncryptingKey(se.Epoch, kb)
	} else {
		k, err = seal.NewKey(se.Epoch, kb)
	}
	if err != nil {
		return nil, err
	}
	*keys = (*keys).With(sch.Session(), []*seal.Key{k})
	return (*keys).Open(p)
}

// pacer spaces packets at their recorded times divided by speed.
type pacer struct {
	speed        float64
	firstAt      int64 // recorded time of the first packet
	startedAt    time.Time
	startedPaced bool
}

// wait sleeps until the packet recorded at at is due; false if stop closed.
func (p *pacer) wait(at int64, stop <-chan struct{}) bool {
	if p.speed <= 0 {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}
	if !p.startedPaced {
		p.startedPaced, p.firstAt, p.startedAt = true, at, time.Now()
		return true
	}
	due := p.startedAt.Add(time.Duration(float64(at-p.firstAt) / p.speed))
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-stop:
			return false
		case <-t.C:
		}
	}
	return true
}

// MaxDatagram returns the slots' size.
func (r *ReplayReceiver) MaxDatagram() int { return r.cfg.MaxDatagram }

// Stats returns the receiver's counters as a transport's.
func (r *ReplayReceiver) Stats() ud.RecvStats {
	return ud.RecvStats{Datagrams: r.datagrams.Load(), Bytes: r.bytes.Load(), RingFull: r.ringFull.Load()}
}

// ReplayStats returns the replay's own counters.
func (r *ReplayReceiver) ReplayStats() ReplayStats {
	return ReplayStats{Records: r.records.Load(), LossRecords: r.lossRecords.Load(), LostMessages: r.lostMessages.Load(),
		Corrupt: r.corrupt.Load(), Unverified: r.unverified.Load(), Duplicates: r.duplicates.Load(), Done: r.finished.Load()}
}

// AtTail reports whether a replay that follows the archive has delivered
// every record stored so far: what comes next has not been stored yet.
func (r *ReplayReceiver) AtTail() bool { return r.atTail.Load() }

// Done reports whether the replay has delivered everything it will.
func (r *ReplayReceiver) Done() bool { return r.finished.Load() }

// Close stops the replay. The consumer may drain what was delivered.
func (r *ReplayReceiver) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	close(r.stop)
	if r.rd != nil {
		r.rd.stopWait() // a Next waiting for a record returns
	}
	<-r.done
	r.ring.Close()
	return nil
}

// sessionSpans are the sessions a replay met, with the messages of each,
// for an error that says what the archive holds.
type sessionSpans []sessionSpan

type sessionSpan struct {
	session     mold.Session
	first, next uint64
}

func (s sessionSpans) has(x mold.Session) bool {
	for _, sp := range s {
		if sp.session == x {
			return true
		}
	}
	return false
}

func (s *sessionSpans) add(x mold.Session, first uint64) {
	*s = append(*s, sessionSpan{session: x, first: first, next: first})
}

func (s sessionSpans) extend(x mold.Session, next uint64) {
	for i := range s {
		if s[i].session == x {
			s[i].next = max(s[i].next, next)
		}
	}
}

// String lists the sessions as SESSION:FIRST-LAST.
func (s sessionSpans) String() string {
	if len(s) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, sp := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s:%d-%d", sp.session, sp.first, sp.next-1)
	}
	return b.String()
}

// refused adds to err, a JetStream call that timed out, the permissions
// violation the server reported meanwhile, if any: a user not entitled to
// the channel's archive is refused without an answer to the call.
func refused(nc *nats.Conn, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if last := nc.LastError(); last != nil && strings.Contains(strings.ToLower(last.Error()), "permissions violation") {
		return fmt.Errorf("%w (the NATS server refused this user: %v; is it entitled to the channel?)", err, last)
	}
	return err
}
