package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
)

// RangeConfig says which of a channel's records a RangeReader reads: those
// a replay from From to To delivers (ReplayConfig).
type RangeConfig struct {
	Feed    string
	Channel int
	Conn    *nats.Conn
	From    Position
	To      Position
}

// RangeRecord is a record in range, with the packets of it a replay of the
// range delivers: Lo..Hi-1, counted from 0 (none for a loss record).
type RangeRecord struct {
	Record    Record
	StreamSeq uint64
	Lo, Hi    int
}

// RangeReader reads one channel's records from a position to another, as
// a replay does: from the first record stored at or after a time, or from
// the packet holding a session's message, to the last record stored before
// a time or the packet holding a session's message, or to the last record
// stored when it was opened. A range the archive does not hold is refused
// as a replay refuses it (ErrOutOfRange), saying what the archive holds.
type RangeReader struct {
	cfg     RangeConfig
	rd      *Reader
	started bool
	done    bool
	seen    sessionSpans
}

// OpenRange opens a reader of a range of channel cfg.Channel's records.
func OpenRange(ctx context.Context, cfg RangeConfig) (*RangeReader, error) {
	rd, err := OpenReader(ctx, ReaderConfig{Feed: cfg.Feed, Channel: cfg.Channel, Conn: cfg.Conn, From: cfg.From.Time})
	if err != nil {
		return nil, refused(cfg.Conn, err)
	}
	return &RangeReader{cfg: cfg, rd: rd, started: cfg.From.Seq == 0}, nil
}

// Next returns the next record in range; io.EOF after the last. A record
// that fails to decode is returned as a *CorruptRecordError (ErrCorrupt):
// it is not in what Next returns, and reading can go on past it.
func (rr *RangeReader) Next() (RangeRecord, error) {
	for !rr.done {
		rec, seq, err := rr.rd.Next()
		switch {
		case err == nil:
		case errors.Is(err, ErrCorrupt):
			return RangeRecord{StreamSeq: seq}, err
		case errors.Is(err, io.EOF):
			rr.done = true
			if !rr.started {
				return RangeRecord{}, fmt.Errorf("%w: channel %d: from %s: the archive holds sessions %s", ErrOutOfRange, rr.cfg.Channel, rr.cfg.From, rr.seen)
			}
			return RangeRecord{}, io.EOF
		default:
			return RangeRecord{}, err
		}
		if !rr.seen.has(rec.Session) {
			rr.seen.add(rec.Session, rec.First)
		}
		rr.seen.extend(rec.Session, rec.Next)
		if !rr.cfg.To.Time.IsZero() && time.Unix(0, rec.FirstNs).After(rr.cfg.To.Time) {
			rr.done = true
			break
		}
		if rec.Kind == KindLoss {
			if rr.started {
				return RangeRecord{Record: rec, StreamSeq: seq}, nil
			}
			continue
		}
		if !rr.started && (rec.Session != rr.cfg.From.Session || rec.Next <= rr.cfg.From.Seq) {
			continue
		}
		out := RangeRecord{Record: rec, StreamSeq: seq, Hi: rec.Packets()}
		i := 0
		_ = rec.EachPacket(func(p []byte) error {
			h, _ := mold.DecodeHeader(p) // Decode checked it
			if !rr.started {
				if h.Seq+uint64(h.Messages()) <= rr.cfg.From.Seq {
					out.Lo = i + 1
					i++
					return nil
				}
				rr.started = true
			}
			if rr.cfg.To.Seq > 0 && h.Session == rr.cfg.To.Session && h.Seq > rr.cfg.To.Seq {
				out.Hi, rr.done = i, true
				return errStop
			}
			i++
			return nil
		})
		if out.Hi > out.Lo {
			return out, nil
		}
	}
	return RangeRecord{}, io.EOF
}

// Close stops the reader.
func (rr *RangeReader) Close() { rr.rd.Close() }

// Channels returns the channels feed's archive holds records of, in order.
func Channels(ctx context.Context, nc *nats.Conn, feed string) ([]int, error) {
	if !validFeed(feed) {
		return nil, fmt.Errorf("archive: feed %q: want letters, digits, '-' or '_'", feed)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("archive: jetstream: %w", err)
	}
	stream := StreamName(feed)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, refused(nc, fmt.Errorf("archive: stream %s: %w", stream, err))
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(natsconn.ArchiveSubject(feed, "*")))
	if err != nil {
		return nil, refused(nc, fmt.Errorf("archive: stream %s: %w", stream, err))
	}
	prefix := natsconn.ArchiveSubject(feed, "")
	var chs []int
	for subj := range info.State.Subjects {
		if ch, err := strconv.Atoi(strings.TrimPrefix(subj, prefix)); err == nil && strings.HasPrefix(subj, prefix) {
			chs = append(chs, ch)
		}
	}
	slices.Sort(chs)
	return chs, nil
}
