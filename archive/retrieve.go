package archive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seal"
)

// ErrNotArchived is matched by the error of Retriever.Read when the archive
// does not hold a message of the range: never recorded, a loss record, or
// gone by retention. A range past the last record stored matches
// recovery.ErrNotYetArchived instead: it may be stored in a moment.
var ErrNotArchived = errors.New("archive: not archived")

// retrieveTimeout bounds one Read: the requester's own timeout is longer.
const retrieveTimeout = 2 * time.Second

// Retriever reads ranges of messages back out of a feed's archive, for a
// retransmission the in-memory store can no longer answer. It finds the
// record holding a message by a binary search over the stream, a few
// dozen direct reads of one record each, and opens sealed packets with the
// archive's key records. It is safe for concurrent use.
type Retriever struct {
	js   jetstream.JetStream
	feed string

	mu    sync.Mutex
	chans map[int]*retrieveChannel
}

// retrieveChannel is a channel's keys, read when first needed and again
// when a session has none.
type retrieveChannel struct {
	keys map[mold.Session]*seal.Schedule
	open *seal.Keys
}

// NewRetriever returns a retriever of feed's archive over nc.
func NewRetriever(nc *nats.Conn, feed string) (*Retriever, error) {
	if !validFeed(feed) {
		return nil, fmt.Errorf("archive: feed %q: want letters, digits, '-' or '_'", feed)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("archive: jetstream: %w", err)
	}
	return &Retriever{js: js, feed: feed, chans: map[int]*retrieveChannel{}}, nil
}

// Read calls fn with each message of channel ch's session from seq, count
// of them, in order, from the archive. It returns an error wrapping
// ErrNotArchived, naming the first message it lacks, when the archive does
// not hold all of them; fn may have been called for those before it.
func (r *Retriever) Read(ch int, session mold.Session, seq uint64, count int, fn func(seq uint64, msg []byte) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), retrieveTimeout)
	defer cancel()
	stream := StreamName(r.feed)
	st, err := r.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("archive: stream %s: %w", stream, err)
	}
	subj := Subject(r.feed, ch)
	at, err := r.find(ctx, st, subj, session, seq)
	if err != nil {
		return err
	}
	next, end := seq, seq+uint64(count)
	tail := false // the records ran out: the rest is not stored yet
	for next < end {
		msg, err := st.GetMsg(ctx, at, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			tail = true
			break
		}
		if err != nil {
			return fmt.Errorf("archive: stream %s: %s from %d: %w", stream, subj, at, err)
		}
		at = msg.Sequence + 1
		rec, err := Decode(msg.Data)
		if err != nil {
			return &CorruptRecordError{Stream: stream, StreamSeq: msg.Sequence, Subject: subj, Err: err}
		}
		if rec.Session != session || rec.First > next {
			break // another session, or a hole
		}
		if rec.Kind == KindLoss || rec.Next <= next {
			if rec.Kind == KindLoss && rec.Next > next {
				return fmt.Errorf("%w: channel %d session %s: messages %d..%d are a loss record (stream %s message %d)",
					ErrNotArchived, ch, session, rec.First, rec.Next-1, stream, msg.Sequence)
			}
			continue
		}
		if next, err = r.messages(ch, &rec, next, end, fn); err != nil {
			return err
		}
	}
	switch {
	case next < end && tail:
		return fmt.Errorf("%w: channel %d session %s: message %d (of %d..%d asked) is past the last record stored", recovery.ErrNotYetArchived, ch, session, next, seq, end-1)
	case next < end:
		return fmt.Errorf("%w: channel %d session %s: message %d (of %d..%d asked)", ErrNotArchived, ch, session, next, seq, end-1)
	}
	return nil
}

// messages calls fn with the messages of rec from next up to end, and
// returns the sequence after the last.
func (r *Retriever) messages(ch int, rec *Record, next, end uint64, fn func(uint64, []byte) error) (uint64, error) {
	buf := make([]byte, MaxPacketLen)
	err := rec.EachPacket(func(p []byte) error {
		h, _ := mold.DecodeHeader(p) // Decode checked it
		if h.Messages() == 0 || h.Seq+uint64(h.Messages()) <= next {
			return nil
		}
		if h.Seq >= end {
			return errStop
		}
		open, err := r.open(ch, h.Session, buf[:copy(buf, p)])
		if err != nil {
			return fmt.Errorf("archive: channel %d session %s sequence %d: %w", ch, h.Session, h.Seq, err)
		}
		pk, err := mold.Parse(open)
		if err != nil {
			return fmt.Errorf("archive: channel %d session %s sequence %d: %w", ch, h.Session, h.Seq, err)
		}
		it := pk.Iter()
		for m, seq, ok := it.Next(); ok; m, seq, ok = it.Next() {
			if seq >= next && seq < end {
				if err := fn(seq, m); err != nil {
					return err
				}
				next = seq + 1
			}
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return next, err
}

// open returns packet p of channel ch without its seal, if its session has
// a key record; as it is otherwise (a feed published unsealed).
func (r *Retriever) open(ch int, s mold.Session, p []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.chans[ch]
	if c == nil || c.keys[s] == nil {
		ctx, cancel := context.WithTimeout(context.Background(), retrieveTimeout)
		keys, err := readKeys(ctx, r.js, r.feed, ch)
		cancel()
		if err != nil {
			return nil, err
		}
		c = &retrieveChannel{keys: keys, open: &seal.Keys{}}
		r.chans[ch] = c
	}
	sch := c.keys[s]
	if sch == nil {
		return p, nil
	}
	return openSealed(&c.open, sch, p)
}

// find returns the stream sequence of the record of subj holding message
// seq of session, or of the first record after it: a binary search over
// the stream, records of a channel being stored in the order of their
// sessions (which sort by their start time) and sequences.
func (r *Retriever) find(ctx context.Context, st jetstream.Stream, subj string, session mold.Session, seq uint64) (uint64, error) {
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("archive: stream %s: %w", StreamName(r.feed), err)
	}
	lo, hi := info.State.FirstSeq, info.State.LastSeq+1
	if info.State.Msgs == 0 {
		return 0, fmt.Errorf("%w: stream %s is empty", ErrNotArchived, StreamName(r.feed))
	}
	// Invariant: every record of subj before lo ends at or before seq (or
	// is of an earlier session); the record at or after hi does not.
	for lo < hi {
		mid := lo + (hi-lo)/2
		msg, err := st.GetMsg(ctx, mid, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			hi = mid
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("archive: stream %s: %s from %d: %w", StreamName(r.feed), subj, mid, err)
		}
		h, err := Decode(msg.Data)
		if err != nil {
			return 0, &CorruptRecordError{Stream: StreamName(r.feed), StreamSeq: msg.Sequence, Subject: subj, Err: err}
		}
		before := string(h.Session[2:]) < string(session[2:]) || h.Session == session && h.Next <= seq
		if before {
			lo = msg.Sequence + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}
