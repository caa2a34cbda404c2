package fh

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seal"
)

// Session record modes (Config.SessionRecord).
const (
	RecordAuto = "auto" // use the record when the NATS server has JetStream
	RecordOn   = "on"   // use it; fail without JetStream
	RecordOff  = "off"  // one feed handler per feed: each start is a new session
)

// sessionRecord is the feed's session record: the value of key FeedName in
// the JetStream key-value bucket natsconn.SessionBucket
// (docs/operations.md, "Hot-hot feed handlers").
type sessionRecord struct {
	// Sessions are the channels' sessions, in channel order.
	Sessions []string `json:"sessions"`
	// Identity names the input every feed handler of the sessions
	// publishes (Config.Identity): a peer with another input refuses to
	// join.
	Identity string `json:"identity"`
	// Created is when the sessions were started; By is the host and
	// process that started them.
	Created time.Time `json:"created"`
	By      string    `json:"by"`
	// Secrets are the channels' session secrets (package seal), base64,
	// in channel order: every feed handler of the sessions seals with the
	// same keys, so that either may send and either may answer for keys.
	// Whoever may read the record may forge the feed: restrict the
	// bucket as the keys subjects are (docs/security.md).
	Secrets []string `json:"secrets,omitempty"`
}

// recordTimeout bounds the JetStream calls of the session record.
const recordTimeout = 20 * time.Second

// freshRecord is how long after a record is written a feed handler that
// finds no peer answering still waits for its writer to come up, rather
// than starting new sessions.
const freshRecord = 3 * time.Second

// errNoJetStream says the NATS server offers no JetStream.
var errNoJetStream = errors.New("fh: the NATS server has no JetStream, which the session record needs")

// recordAttempts bounds how often joinRecord reads the record again: after
// losing a race to write it, or while its writer is starting.
const recordAttempts = 20

// joinRecord reads the feed's session record, or writes it, and sets the
// sessions the feed handler publishes: a peer's, when a feed handler of the
// same feed answers on NATS (h.rejoin: Run catches up with it first), or
// new ones that sort after the record's, written with compare-and-set, when
// none does. It returns errNoJetStream when the server has none.
func (h *FeedHandler) joinRecord() error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	kv, err := h.recordBucket(ctx)
	if err != nil {
		return err
	}
	identity, err := h.identity()
	if err != nil {
		return err
	}
	key := h.cfg.FeedName
	for attempt := 1; attempt <= recordAttempts; attempt++ {
		entry, err := settled(ctx, func() (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key) })
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			rec := h.newRecord(identity, nil)
			if _, err := settled(ctx, func() (uint64, error) { return kv.Create(ctx, key, rec.value()) }); err == nil {
				return h.startedSessions(rec, "no record: first feed handler of the feed")
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return fmt.Errorf("fh: create the session record %s/%s: %w", natsconn.SessionBucket, key, err)
			}
			continue // a peer wrote it first
		}
		if err != nil {
			return fmt.Errorf("fh: read the session record %s/%s: %w", natsconn.SessionBucket, key, err)
		}
		rec, sessions, err := h.parseRecord(entry.Value())
		if err != nil {
			return err
		}
		peer, err := recovery.QuerySession(h.nc, h.cfg.FeedName, 0, h.cfg.PeerTimeout)
		var re *recovery.ReplyError
		switch {
		case err == nil && peer.Session == sessions[0] && !peer.Ended,
			errors.As(err, &re) && re.Code == recovery.CodeUnknownSession:
			// A peer publishes the record's sessions, or is about to.
			if err := h.sameInput(rec, identity); err != nil {
				return err
			}
			h.sessions, h.rejoin = sessions, true
			h.secrets = secretsOf(rec)
			h.log.Info().Str("session", rec.Sessions[0]).Str("by", rec.By).Time("created", rec.Created).
				Msg("joining the sessions of a running peer feed handler")
			return nil
		case err == nil && peer.Session != sessions[0]:
			return fmt.Errorf("fh: the feed's peer publishes session %s on channel 0, but the session record %s/%s names %s",
				peer.Session, natsconn.SessionBucket, key, sessions[0])
		case err != nil && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout):
			return fmt.Errorf("fh: ask the feed's peers for their session: %w", err)
		case err != nil && time.Since(rec.Created) < freshRecord && attempt < recordAttempts:
			// Its writer is starting: give it time to answer.
			time.Sleep(freshRecord / 20)
			continue
		}
		// Nobody publishes the record's sessions any more (or they
		// ended): start new ones after them, unless a peer does so first.
		why := "no peer answers for the record's sessions"
		if err == nil {
			why = "the record's sessions ended"
		}
		next := h.newRecord(identity, sessions)
		if _, err := settled(ctx, func() (uint64, error) { return kv.Update(ctx, key, next.value(), entry.Revision()) }); err == nil {
			return h.startedSessions(next, why)
		}
		// A peer updated it first: read it again and join.
	}
	return fmt.Errorf("fh: the session record %s/%s changed under every one of %d attempts to take it", natsconn.SessionBucket, key, recordAttempts)
}

// settled returns what call returns once it is not the error a JetStream
// call gives while a newly created, replicated bucket still elects its
// leader or its replicas still subscribe (no responders, a timeout): it
// calls again every 50 ms until then, or until ctx ends.
func settled[T any](ctx context.Context, call func() (T, error)) (T, error) {
	for {
		v, err := call()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout)) {
			return v, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordBucket returns the session record's bucket, creating it (replicated
// on up to three servers of the cluster) if it does not exist.
func (h *FeedHandler) recordBucket(ctx context.Context) (jetstream.KeyValue, error) {
	if js, _ := h.nc.ConnectedServerJetStream(); !js {
		return nil, fmt.Errorf("%w (server %s)", errNoJetStream, h.nc.ConnectedUrlRedacted())
	}
	replicas := min(natsconn.MaxSessionReplicas, max(1, len(h.nc.Servers())))
	// A cluster that has just started may still elect its JetStream
	// leader: no responders then means "not yet", not "no JetStream".
	kv, err := settled(ctx, func() (jetstream.KeyValue, error) { return natsconn.OpenSessionBucket(ctx, h.nc, replicas) })
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, fmt.Errorf("%w (%v)", errNoJetStream, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fh: the session record's bucket: %w", err)
	}
	return kv, nil
}

// identity returns the input's identity (Config.Identity).
func (h *FeedHandler) identity() (string, error) {
	if h.cfg.Identity == nil {
		return h.cfg.SourceName, nil
	}
	id, err := h.cfg.Identity()
	if err != nil {
		return "", fmt.Errorf("fh: identify the input %s: %w", h.cfg.SourceName, err)
	}
	return id, nil
}

// newRecord returns a record of new sessions, each sorting after the one of
// its channel in after, if given.
func (h *FeedHandler) newRecord(identity string, after []mold.Session) sessionRecord {
	host, _ := os.Hostname()
	rec := sessionRecord{Identity: identity, Created: time.Now().UTC(), By: host + "/" + strconv.Itoa(os.Getpid())}
	for ch := 0; ch < h.cfg.Channels; ch++ {
		s := tickcast.NewSession(ch, time.Now())
		for ch < len(after) && s.String() <= after[ch].String() {
			// This host's clock is behind the one that wrote the record.
			s = tickcast.NewSession(ch, time.Now())
		}
		rec.Sessions = append(rec.Sessions, s.String())
		rec.Secrets = append(rec.Secrets, base64.StdEncoding.EncodeToString(seal.NewSecret()))
	}
	return rec
}

func (r sessionRecord) value() []byte {
	b, _ := json.Marshal(r)
	return b
}

// parseRecord decodes a session record and its sessions.
func (h *FeedHandler) parseRecord(value []byte) (sessionRecord, []mold.Session, error) {
	where := natsconn.SessionBucket + "/" + h.cfg.FeedName
	var rec sessionRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return rec, nil, fmt.Errorf("fh: the session record %s is not JSON: %w", where, err)
	}
	sessions := make([]mold.Session, len(rec.Sessions))
	for ch, s := range rec.Sessions {
		var err error
		if sessions[ch], err = mold.ParseSession(s); err != nil || tickcast.SessionChannel(sessions[ch]) != ch {
			return rec, nil, fmt.Errorf("fh: the session record %s: channel %d's session %q is not one of channel %d", where, ch, s, ch)
		}
	}
	if len(sessions) == 0 {
		return rec, nil, fmt.Errorf("fh: the session record %s has no sessions", where)
	}
	if len(rec.Secrets) != 0 && len(rec.Secrets) != len(sessions) {
		return rec, nil, fmt.Errorf("fh: the session record %s has %d secrets for %d sessions", where, len(rec.Secrets), len(sessions))
	}
	for ch, s := range rec.Secrets {
		if b, err := base64.StdEncoding.DecodeString(s); err != nil || len(b) != seal.SecretLen {
			return rec, nil, fmt.Errorf("fh: the session record %s: channel %d's secret is not %d bytes of base64", where, ch, seal.SecretLen)
		}
	}
	return rec, sessions, nil
}

// sameInput checks that a running peer's record is for this feed
// handler's input and channels: a peer with other input would publish
// other messages under the same sequence numbers.
func (h *FeedHandler) sameInput(rec sessionRecord, identity string) error {
	where := natsconn.SessionBucket + "/" + h.cfg.FeedName
	if rec.Identity != identity {
		return fmt.Errorf("fh: a feed handler of feed %s publishes input %q (session record %s), this one's input is %q: peers must publish the same input (the same seed and instruments, or the same file)",
			h.cfg.FeedName, rec.Identity, where, identity)
	}
	if len(rec.Sessions) != h.cfg.Channels {
		return fmt.Errorf("fh: a feed handler of feed %s publishes %d channels (session record %s), this one %d", h.cfg.FeedName, len(rec.Sessions), where, h.cfg.Channels)
	}
	return nil
}

// startedSessions takes the sessions of a record this feed handler wrote.
func (h *FeedHandler) startedSessions(rec sessionRecord, why string) error {
	h.secrets = secretsOf(rec)
	h.sessions = make([]mold.Session, len(rec.Sessions))
	for ch, s := range rec.Sessions {
		h.sessions[ch], _ = mold.ParseSession(s)
	}
	h.log.Info().Str("session", rec.Sessions[0]).Str("why", why).Msg("new sessions written to the session record")
	return nil
}

// secretsOf returns the record's session secrets (checked by parseRecord),
// or nil for a record without them.
func secretsOf(rec sessionRecord) [][]byte {
	var out [][]byte
	for _, s := range rec.Secrets {
		b, _ := base64.StdEncoding.DecodeString(s)
		out = append(out, b)
	}
	return out
}

// catchUpRounds bounds how often a rejoining feed handler asks its peer
// for its position.
const catchUpRounds = 20

// closeEnough is how many messages behind its peer a rejoining feed
// handler may be when it starts publishing: it publishes them, late.
const closeEnough = 64

// catchUp replays the input silently (tickcast.Publisher.CatchUp: into the
// stores, not on the wire) up to the peer's position, asking again until it
// is within closeEnough messages, then answers recovery. It returns io.EOF
// when the input ended meanwhile.
func (h *FeedHandler) catchUp(ctx context.Context) error {
	start := time.Now()
	h.sink.live = false
	defer func() { h.sink.live = h.cfg.NATSLive }()
	var replayed uint64
	var err error
	for round := 0; round < catchUpRounds && ctx.Err() == nil; round++ {
		target, ok := h.peerPosition()
		if !ok {
			h.log.Warn().Msg("the peer stopped answering while catching up: publishing from here")
			break
		}
		behind := uint64(0)
		for ch, seq := range target {
			if n := h.pub.NextSeq(ch); seq > n {
				behind += seq - n
			}
		}
		if behind <= closeEnough && round > 0 {
			break
		}
		var n uint64
		n, err = h.pub.CatchUp(h.cfg.Source, target)
		replayed += n
		if err != nil {
			break
		}
	}
	next := make([]uint64, h.cfg.Channels)
	for ch := range next {
		next[ch] = h.pub.NextSeq(ch)
	}
	h.log.Info().Uint64("replayed", replayed).Dur("took", time.Since(start)).Uints64("next_seq", next).
		Msg("caught up with the peer: serving recovery and publishing")
	if serr := h.rsrv.Serve(); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// peerPosition asks the peer for each channel's next sequence; ok is false
// when it does not answer.
func (h *FeedHandler) peerPosition() ([]uint64, bool) {
	target := make([]uint64, h.cfg.Channels)
	for ch := range target {
		st, err := recovery.QuerySession(h.nc, h.cfg.FeedName, ch, h.cfg.PeerTimeout)
		var re *recovery.ReplyError
		switch {
		case err == nil && st.Session == h.sessions[ch]:
			target[ch] = st.Next
		case errors.As(err, &re) && re.Code == recovery.CodeUnknownSession:
			target[ch] = 1 // the peer has not started yet
		default:
			if err == nil {
				err = fmt.Errorf("the peer publishes session %s, not %s", st.Session, h.sessions[ch])
			}
			h.log.Warn().Err(err).Int("channel", ch).Msg("peer position")
			return nil, false
		}
	}
	return target, true
}

// peerCarriesOn reports whether another feed handler publishes this one's
// sessions, so that stopping need not end them. It stops answering recovery
// first, so that its question reaches a peer and not itself, and answers
// again if no peer does (it then lingers as a single feed handler would).
func (h *FeedHandler) peerCarriesOn() bool {
	h.rsrv.Pause()
	st, err := recovery.QuerySession(h.nc, h.cfg.FeedName, 0, h.cfg.PeerTimeout)
	if err == nil && st.Session == h.sessions[0] && !st.Ended {
		h.log.Info().Str("session", st.Session.String()).Uint64("peer_next_seq", st.Next).
			Msg("stopping: a peer feed handler publishes the sessions, which go on; no end of session")
		return true
	}
	if serr := h.rsrv.Serve(); serr != nil {
		h.log.Error().Err(serr).Msg("cannot serve recovery again")
	}
	return false
}
