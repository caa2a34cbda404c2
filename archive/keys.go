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
	stream := StreamName(feed)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("archive: stream %s: %w", stream, err)
	}
	subj := KeysSubject(feed, ch)
	out := map[mold.Session]*seal.Schedule{}
	last, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return out, nil // an unsealed feed
	}
	if err != nil {
		return nil, fmt.Errorf("archive: stream %s: key records of channel %d: %w", stream, ch, err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return nil, fmt.Errorf("archive: stream %s: key records of channel %d: %w", stream, ch, err)
	}
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return nil, fmt.Errorf("archive: stream %s: key records of channel %d: %w", stream, ch, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		var k KeyRecord
		if err := json.Unmarshal(m.Data(), &k); err != nil {
			return nil, fmt.Errorf("archive: stream %s message %d: key record of channel %d: %w", stream, md.Sequence.Stream, ch, err)
		}
		sch, s, err := k.schedule()
		if err != nil || k.Channel != ch {
			return nil, fmt.Errorf("archive: stream %s message %d: key record of channel %d: channel %d, %v", stream, md.Sequence.Stream, ch, k.Channel, err)
		}
		out[s] = sch
		if md.Sequence.Stream >= last.Sequence {
			return out, nil
		}
	}
}
