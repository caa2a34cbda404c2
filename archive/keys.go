package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// KeyRecord is what a reader of the archive needs to open a channel's
// sealed packets of one session: the session's secret (package seal), the
// key rotation and whether the channel is encrypted. The feed handler
// stores one per channel and session under KeysSubject, in the archive's
// stream, so that whoever may read a channel's archive may open it, long
// after the session's keys have left the key server.
type KeyRecord struct {
	Session  string        `json:"session"`
	Channel  int           `json:"channel"`
	Secret   []byte        `json:"secret"`
	Rotation time.Duration `json:"rotation_ns"`
	Encrypt  bool          `json:"encrypt"`
}

// KeysSubject is the subject channel ch's key records are stored under.
func KeysSubject(feed string, ch int) string {
	return natsconn.ArchiveKeysSubject(feed, strconv.Itoa(ch))
}

// schedule returns the record's seal schedule.
func (k KeyRecord) schedule() (*seal.Schedule, mold.Session, error) {
	s, err := mold.ParseSession(k.Session)
	if err != nil {
		return nil, s, err
	}
	sch, err := seal.NewSchedule(s, k.Channel, k.Secret, k.Rotation)
	if err != nil {
		return nil, s, err
	}
	if k.Encrypt {
		sch.Encrypt()
	}
	return sch, s, nil
}

// RecordKeys stores k, waiting for JetStream's acknowledgement. A record
// stored twice (the same session and channel) is kept once.
func (r *Recorder) RecordKeys(ctx context.Context, k KeyRecord) error {
	if _, _, err := k.schedule(); err != nil {
		return fmt.Errorf("archive: key record of channel %d session %s: %w", k.Channel, k.Session, err)
	}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: KeysSubject(r.cfg.Feed, k.Channel), Data: b,
		Header: nats.Header{jetstream.MsgIDHeader: []string{"keys." + k.Session + "." + strconv.Itoa(k.Channel)}}}
	if _, err := r.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("archive: key record of channel %d session %s: %w", k.Channel, k.Session, err)
	}
	return nil
}

// readKeys reads every key record of channel ch, by session.
func readKeys(ctx context.Context, js jetstream.JetStream, feed string, ch int) (map[mold.Session]*seal.Schedule, error) {
	out := map[mold.Session]*seal.Schedule{}
	err := eachKeyRecord(ctx, js, feed, ch, func(k KeyRecord, sch *seal.Schedule, s mold.Session, _ uint64) {
		out[s] = sch
	})
	return out, err
}

// StoredKeys are a channel's key records with their sequences in the
// stream.
type StoredKeys struct {
	Keys      KeyRecord
	StreamSeq uint64
}

// ReadKeyRecords reads every key record of channel ch of feed's archive,
// in the order stored: what an export writes beside the records.
func ReadKeyRecords(ctx context.Context, nc *nats.Conn, feed string, ch int) ([]StoredKeys, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("archive: jetstream: %w", err)
	}
	var out []StoredKeys
	err = eachKeyRecord(ctx, js, feed, ch, func(k KeyRecord, _ *seal.Schedule, _ mold.Session, seq uint64) {
		out = append(out, StoredKeys{Keys: k, StreamSeq: seq})
	})
	if err != nil {
		return nil, refused(nc, err)
	}
	return out, nil
}

// eachKeyRecord calls fn with every key record of channel ch, checked.
func eachKeyRecord(ctx context.Context, js jetstream.JetStream, feed string, ch int, fn func(KeyRecord, *seal.Schedule, mold.Session, uint64)) error {
	stream := StreamName(feed)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("archive: stream %s: %w", stream, err)
	}
	subj := KeysSubject(feed, ch)
	last, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // an unsealed feed
	}
	if err != nil {
		return fmt.Errorf("archive: stream %s: key records of channel %d: %w", stream, ch, err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return fmt.Errorf("archive: stream %s: key records of channel %d: %w", stream, ch, err)
	}
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return fmt.Errorf("archive: stream %s: key records of channel %d: %w", stream, ch, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		var k KeyRecord
		if err := json.Unmarshal(m.Data(), &k); err != nil {
			return fmt.Errorf("archive: stream %s message %d: key record of channel %d: %w", stream, md.Sequence.Stream, ch, err)
		}
		sch, s, err := k.schedule()
		if err != nil || k.Channel != ch {
			return fmt.Errorf("archive: stream %s message %d: key record of channel %d: channel %d, %v", stream, md.Sequence.Stream, ch, k.Channel, err)
		}
		fn(k, sch, s, md.Sequence.Stream)
		if md.Sequence.Stream >= last.Sequence {
			return nil
		}
	}
}
