package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReaderConfig says which records a Reader reads.
type ReaderConfig struct {
	// Feed and Channel name the records' subject.
	Feed    string
	Channel int
	// Conn is a NATS connection to the archive's server or cluster.
	Conn *nats.Conn
	// From, if not zero, starts at the first record stored at or after
	// this time; zero starts at the oldest record held.
	From time.Time
	// Follow keeps reading the records stored after the reader was opened,
	// as they are stored: Next never returns io.EOF, and AtTail tells
	// when the reader has caught up with the stream.
	Follow bool
}

// CorruptRecordError reports a stored record that failed Decode, by its
// place in the stream. It is never delivered.
type CorruptRecordError struct {
	Stream    string
	StreamSeq uint64 // the record's sequence in the stream
	Subject   string
	Err       error // the *DecodeError
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("archive: stream %s message %d (%s): %v", e.Stream, e.StreamSeq, e.Subject, e.Err)
}

// Unwrap returns the decode error, which matches ErrCorrupt.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

// readAhead is how many records a reader asks for at a time.
const readAhead = 16

// ErrEmpty is returned by OpenReader when the archive holds no record of
// the channel.
var ErrEmpty = errors.New("archive: no record of the channel")

// ErrOutOfRange is matched by the error of a replay or reader asked for a
// place the archive does not hold.
var ErrOutOfRange = errors.New("archive: not in the archive")

// Reader reads one channel's records in the order they were stored, up to
// the last one stored when it was opened, or on as they are stored
// (ReaderConfig.Follow).
type Reader struct {
	cfg     ReaderConfig
	stream  string
	subject string
	last    uint64 // the stream sequence of the last record to read
	it      jetstream.MessagesContext
	done    bool
	atTail  bool // the last record read was the last stored then (Follow)
	// total is how many records the reader reads without Follow: those
	// pending at the first; read counts them.
	total, read uint64
	st          jetstream.Stream
	lastSeq     uint64      // the stream sequence of the last record read
	resumes     int         // consumers started again (resume)
	stopped     atomic.Bool // stopWait or Close: no resuming
	// mu guards it against stopWait, from another goroutine, while
	// resume replaces it.
	mu sync.Mutex
}

// OpenReader opens a reader of one channel's archive. It returns an error
// wrapping ErrEmpty when the channel has no record.
func OpenReader(ctx context.Context, cfg ReaderConfig) (*Reader, error) {
	if !validFeed(cfg.Feed) {
		return nil, fmt.Errorf("archive: feed %q: want letters, digits, '-' or '_'", cfg.Feed)
	}
	if cfg.Conn == nil {
		return nil, errors.New("archive: ReaderConfig.Conn: a NATS connection is required")
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("archive: jetstream: %w", err)
	}
	r := &Reader{cfg: cfg, stream: StreamName(cfg.Feed), subject: Subject(cfg.Feed, cfg.Channel)}
	st, err := js.Stream(ctx, r.stream)
	if err != nil {
		return nil, fmt.Errorf("archive: stream %s: %w", r.stream, err)
	}
	lastMsg, err := st.GetLastMsgForSubject(ctx, r.subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: stream %s holds nothing on %s", ErrEmpty, r.stream, r.subject)
	}
	if err != nil {
		return nil, fmt.Errorf("archive: stream %s: last record on %s: %w", r.stream, r.subject, err)
	}
	r.last = lastMsg.Sequence
	if !cfg.From.IsZero() && cfg.From.After(lastMsg.Time) {
		return nil, fmt.Errorf("%w: from %s: stream %s holds records of %s up to %s", ErrOutOfRange, cfg.From.UTC().Format(time.RFC3339Nano),
			r.stream, r.subject, lastMsg.Time.UTC().Format(time.RFC3339Nano))
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{r.subject}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if !cfg.From.IsZero() {
		from := cfg.From
		occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &from
	}
	r.st = st
	if err := r.consume(ctx, occ); err != nil {
		return nil, err
	}
	return r, nil
}

// consume starts the reader's ordered consumer.
func (r *Reader) consume(ctx context.Context, occ jetstream.OrderedConsumerConfig) error {
	cons, err := r.st.OrderedConsumer(ctx, occ)
	if err != nil {
		return fmt.Errorf("archive: stream %s: reader of %s: %w", r.stream, r.subject, err)
	}
	// A few records in flight at a time (each up to RecordBytes): enough
	// to keep the stream flowing, and far below what the server lets a
	// client owe it before it drops it as a slow consumer.
	if r.it, err = cons.Messages(jetstream.PullMaxMessages(readAhead)); err != nil {
		return fmt.Errorf("archive: stream %s: reader of %s: %w", r.stream, r.subject, err)
	}
	return nil
}

// maxResumes is how many times a reader starts its consumer again, after
// the last record it read, when the consumer fails (a server restarted,
// a cluster electing leaders, a client too slow for its heartbeats).
const maxResumes = 5

// resume starts the consumer again after the last record read; false if
// it may not or cannot.
func (r *Reader) resume() bool {
	if r.stopped.Load() || r.resumes >= maxResumes || r.lastSeq == 0 {
		return false
	}
	r.resumes++
	r.mu.Lock()
	defer r.mu.Unlock()
	r.it.Stop()
	if r.stopped.Load() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{r.subject}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: r.lastSeq + 1}
	return whileElecting(ctx, func() error { return r.consume(ctx, occ) }) == nil
}

// Last returns the stream sequence of the last record the channel had when
// the reader was opened: the last it reads unless it follows.
func (r *Reader) Last() uint64 { return r.last }

// Next returns the next record and its sequence in the stream; io.EOF
// after the last. A record that fails to decode is returned as a
// *CorruptRecordError with its place, and reading can go on past it.
func (r *Reader) Next() (Record, uint64, error) {
	if r.done {
		return Record{}, 0, io.EOF
	}
	msg, err := r.it.Next()
	for err != nil && r.resume() {
		msg, err = r.it.Next()
	}
	if err != nil {
		// Never io.EOF: that is the end of what was asked for.
		return Record{}, 0, fmt.Errorf("archive: stream %s: reading %s after stream message %d: %v", r.stream, r.subject, r.lastSeq, err)
	}
	md, err := msg.Metadata()
	if err != nil {
		return Record{}, 0, fmt.Errorf("archive: stream %s: reading %s: %w", r.stream, r.subject, err)
	}
	seq := md.Sequence.Stream
	r.lastSeq = seq
	r.atTail = md.NumPending == 0
	if r.total == 0 {
		// What the stream holds for the subject is counted by its leader
		// as the consumer delivers: the end is the first record's count,
		// whatever a replica that lags says of the last one.
		r.total = md.NumPending + 1
	}
	r.read++
	if r.read >= r.total && !r.cfg.Follow {
		r.done = true
		r.it.Stop()
	}
	rec, err := Decode(msg.Data())
	if err != nil {
		return Record{}, seq, &CorruptRecordError{Stream: r.stream, StreamSeq: seq, Subject: r.subject, Err: err}
	}
	if rec.Channel != r.cfg.Channel {
		return Record{}, seq, &CorruptRecordError{Stream: r.stream, StreamSeq: seq, Subject: r.subject,
			Err: &DecodeError{Offset: 6, Detail: fmt.Sprintf("channel %d stored under channel %d's subject", rec.Channel, r.cfg.Channel)}}
	}
	return rec, seq, nil
}

// AtTail reports whether the last record Next returned was the last one
// the stream held for the channel when it was read: a following reader
// has caught up, and its next record is one not yet stored.
func (r *Reader) AtTail() bool { return r.atTail }

// stopWait ends a Next waiting for a record, from another goroutine.
func (r *Reader) stopWait() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped.Store(true)
	r.it.Stop()
}

// Close stops the reader.
func (r *Reader) Close() {
	if !r.done {
		r.done = true
		r.stopped.Store(true)
		r.it.Stop()
	}
}
