package seal

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tickcast/tickcast/mold"
)

// Rotation bounds: keys rotate at least every second and at most every day.
const (
	MinRotation     = time.Second
	MaxRotation     = 24 * time.Hour
	DefaultRotation = time.Hour
)

// Epoch returns the key epoch at Unix time nowNs for a rotation period:
// epochs are periods of the Unix clock, so that every feed handler of a
// feed and every subscriber agree on them without talking.
func Epoch(nowNs int64, rotation time.Duration) uint32 {
	return uint32(nowNs / int64(rotation))
}

// Schedule seals one channel's packets of one session with the key of the
// epoch each is sent in. It is used by one goroutine (the publisher's).
type Schedule struct {
	session  mold.Session
	channel  int
	secret   []byte
	rotation time.Duration
	encrypt  bool
	cur      *Key
	shared   atomic.Pointer[Key] // SealShared's current key
}

// NewSchedule returns the schedule of channel's session with its secret
// and rotation period.
func NewSchedule(session mold.Session, channel int, secret []byte, rotation time.Duration) (*Schedule, error) {
	if rotation < MinRotation || rotation > MaxRotation {
		return nil, fmt.Errorf("seal: key rotation %v: want %v..%v", rotation, MinRotation, MaxRotation)
	}
	if len(secret) != SecretLen {
		return nil, fmt.Errorf("seal: secret of %d bytes, want %d", len(secret), SecretLen)
	}
	return &Schedule{session: session, channel: channel, secret: secret, rotation: rotation}, nil
}

// Encrypt makes the schedule encrypt the messages of every packet it seals
// as well as authenticate them (see the package doc), with keys of their
// own (DeriveEncryptingKey). Call it before the first Seal.
func (s *Schedule) Encrypt() { s.encrypt = true }

// Encrypts reports whether the schedule encrypts.
func (s *Schedule) Encrypts() bool { return s.encrypt }

// newKey returns the schedule's key of epoch e.
func (s *Schedule) newKey(e uint32) (*Key, error) {
	kb, err := s.KeyBytes(e)
	if err != nil {
		return nil, err
	}
	if s.encrypt {
		return NewEncryptingKey(e, kb)
	}
	return NewKey(e, kb)
}

// Session returns the schedule's session.
func (s *Schedule) Session() mold.Session { return s.session }

// Seal seals data packet p (see Key.Seal) under the key of the epoch of
// nowNs (Unix ns). It allocates only when the epoch changes.
func (s *Schedule) Seal(p []byte, nowNs int64) ([]byte, error) {
	e := Epoch(nowNs, s.rotation)
	if s.cur == nil || s.cur.Epoch != e {
		k, err := s.newKey(e)
		if err != nil {
			return nil, err
		}
		s.cur = k
	}
	return s.cur.Seal(p)
}

// SealShared is Seal for any goroutine (the recovery server's replies, the
// publisher's packets use Seal): safe for concurrent use.
func (s *Schedule) SealShared(p []byte, nowNs int64) ([]byte, error) {
	e := Epoch(nowNs, s.rotation)
	k := s.shared.Load()
	if k == nil || k.Epoch != e {
		var err error
		if k, err = s.newKey(e); err != nil {
			return nil, err
		}
		s.shared.Store(k)
	}
	return k.Seal(p)
}

// KeyBytes returns the key of epoch e. It is safe for concurrent use.
func (s *Schedule) KeyBytes(e uint32) ([]byte, error) {
	if s.encrypt {
		return DeriveEncryptingKey(s.secret, s.session, s.channel, e)
	}
	return DeriveKey(s.secret, s.session, s.channel, e)
}

// Reply is what a feed handler answers a subscriber's request for a
// channel's keys (docs/security.md): the session, the rotation period, and
// the keys of the epochs before and at the current one, and of the next
// one once it is near (Lead), so that a subscriber holds the next key
// before it is used and packets sealed just before a rotation still open
// after it.
type Reply struct {
	Session    string     `json:"session"`
	Channel    int        `json:"channel"`
	RotationNs int64      `json:"rotation_ns"`
	Keys       []ReplyKey `json:"keys"`
	// Encrypted says the keys encrypt the channel's messages as well.
	Encrypted bool `json:"encrypted,omitempty"`
	// Error, if set, is why no key is given (and the other fields are
	// empty): the channel does not exist or the user is not entitled.
	Error string `json:"error,omitempty"`
}

// ReplyKey is one epoch's key, base64.
type ReplyKey struct {
	Epoch uint32 `json:"epoch"`
	Key   string `json:"key"`
}

// Lead is how long before its epoch starts a key is handed out: half the
// rotation period. A user whose entitlement is revoked more than Lead
// before a rotation holds no key past it.
func Lead(rotation time.Duration) time.Duration { return rotation / 2 }

// FetchAhead is how long before its epoch starts a subscriber asks for a
// key: half of Lead, which leaves the other half for clocks that disagree
// and for the request.
func FetchAhead(rotation time.Duration) time.Duration { return Lead(rotation) / 2 }

// ReplyFor returns the reply of schedule s at Unix time nowNs: the keys of
// the epochs before and at nowNs, and of the next one within Lead of it.
func ReplyFor(s *Schedule, nowNs int64) (Reply, error) {
	e := Epoch(nowNs, s.rotation)
	r := Reply{Session: s.session.String(), Channel: s.channel, RotationNs: int64(s.rotation), Encrypted: s.encrypt}
	epochs := []uint32{e - 1, e}
	if Epoch(nowNs+int64(Lead(s.rotation)), s.rotation) > e {
		epochs = append(epochs, e+1)
	}
	for _, ep := range epochs {
		k, err := s.KeyBytes(ep)
		if err != nil {
			return Reply{}, err
		}
		r.Keys = append(r.Keys, ReplyKey{Epoch: ep, Key: base64.StdEncoding.EncodeToString(k)})
	}
	return r, nil
}

// ErrRefused is ParseReply's error for a reply that gives no keys, with the
// feed handler's reason.
var ErrRefused = errors.New("keys refused")

// ParseReply decodes a key reply for channel and returns its session and
// keys. It rejects malformed input with an error that names what was wrong.
func ParseReply(b []byte, channel int) (mold.Session, []*Key, time.Duration, error) {
	var r Reply
	if err := json.Unmarshal(b, &r); err != nil {
		return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: %w", err)
	}
	if r.Error != "" {
		return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: %w: %s", ErrRefused, r.Error)
	}
	session, err := mold.ParseSession(r.Session)
	if err != nil {
		return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: session %q: %w", r.Session, err)
	}
	if r.Channel != channel {
		return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: channel %d, asked for %d", r.Channel, channel)
	}
	rot := time.Duration(r.RotationNs)
	if rot < MinRotation || rot > MaxRotation {
		return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: rotation_ns %d: want %d..%d", r.RotationNs, MinRotation, MaxRotation)
	}
	if len(r.Keys) == 0 || len(r.Keys) > 8 {
		return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: %d keys, want 1..8", len(r.Keys))
	}
	keys := make([]*Key, 0, len(r.Keys))
	for i, rk := range r.Keys {
		kb, err := base64.StdEncoding.DecodeString(rk.Key)
		if err != nil {
			return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: key %d (epoch %d): %w", i, rk.Epoch, err)
		}
		newKey := NewKey
		if r.Encrypted {
			newKey = NewEncryptingKey
		}
		k, err := newKey(rk.Epoch, kb)
		if err != nil {
			return mold.Session{}, nil, 0, fmt.Errorf("seal: key reply: key %d (epoch %d): %w", i, rk.Epoch, err)
		}
		keys = append(keys, k)
	}
	return session, keys, rot, nil
}
