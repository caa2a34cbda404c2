// Package seal authenticates tickcast's data packets: the feed handler seals
// every MoldUDP64 data packet it sends with a tag under a key of the
// channel's session, and a subscriber opens each one before it touches
// sequence, session or window state. A packet that does not open (forged,
// altered, replayed under another sequence number, or under a key the
// subscriber does not hold) is dropped and counted, never delivered.
//
// The seal is a trailer of Overhead bytes at the end of the packet's last
// message block, inside it: the block's length covers it, so the MoldUDP64
// framing stays exact and any MoldUDP64 decoder reads the packet. The
// trailer is
//
//	epoch (4 bytes, big-endian) | nonce (12 bytes) | tag (16 bytes)
//
// and the tag is AES-128-GCM's over the whole packet before it (header,
// blocks, the last block's length as sent, epoch and nonce) as additional
// data, with no plaintext (GMAC): the packet is authenticated, not
// encrypted. The sequence number and the session are in the header, so a
// packet cannot be replayed under another one. Nonces are random (96 bits
// from crypto/rand) per packet, so that any number of sealers (the
// publisher, the recovery server, a second feed handler of the same
// sessions) may share a key; a key seals at most one epoch of one channel's
// session.
//
// Heartbeats and ends of session are not sealed: they stay the 20 bytes
// MoldUDP64 defines (a third-party decoder flags any byte more). A
// subscriber that authenticates takes what they claim as a hint to check
// with recovery (seqgap.Config.UnsealedControl).
//
// Keys: a channel's session has a random secret; the key of epoch e is
// HKDF-SHA-256 of it with the session, the channel and e
// (DeriveKey). Subscribers get epoch keys, never the secret, from the feed
// handler over NATS (docs/security.md).
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/tickcast/tickcast/mold"
)

// Sizes of the trailer's fields, and Overhead, the bytes a seal adds.
const (
	EpochLen = 4
	NonceLen = 12
	TagLen   = 16
	Overhead = EpochLen + NonceLen + TagLen
	// KeyLen is the size of an epoch key (AES-128).
	KeyLen = 16
	// SecretLen is the size of a session's secret.
	SecretLen = 32
)

// Errors of Open, wrapped in an *Error that says which packet.
var (
	// ErrNotSealable: the packet carries no message block to hold a seal
	// (a heartbeat or end of session, or not a MoldUDP64 packet).
	ErrNotSealable = errors.New("no message block to hold a seal")
	// ErrShort: the last block is shorter than a seal.
	ErrShort = errors.New("last message block shorter than a seal")
	// ErrUnknownEpoch: no key of the packet's epoch is held.
	ErrUnknownEpoch = errors.New("no key for the seal's epoch")
	// ErrBadTag: the tag does not match the packet under the epoch's key:
	// forged, altered, or sealed under another key.
	ErrBadTag = errors.New("tag does not verify")
)

// Error is Open's error: what was wrong, and the packet's session, sequence
// and seal epoch as far as they could be read.
type Error struct {
	Err     error
	Session mold.Session
	Seq     uint64
	Epoch   uint32
	Detail  string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("seal: session %s seq %d: %v", e.Session, e.Seq, e.Err)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the cause, one of the Err values above.
func (e *Error) Unwrap() error { return e.Err }

// DeriveEncryptingKey is DeriveKey for a channel whose messages are
// encrypted: the HKDF info starts "tickcast seal v1 enc " instead, so that
// no key both authenticates one channel and encrypts another.
func DeriveEncryptingKey(secret []byte, session mold.Session, channel int, epoch uint32) ([]byte, error) {
	return deriveKey("tickcast seal v1 enc ", secret, session, channel, epoch)
}

// DeriveKey returns the key of epoch of channel's session, from the
// session's secret.
func DeriveKey(secret []byte, session mold.Session, channel int, epoch uint32) ([]byte, error) {
	return deriveKey("tickcast seal v1 ", secret, session, channel, epoch)
}

func deriveKey(label string, secret []byte, session mold.Session, channel int, epoch uint32) ([]byte, error) {
	if len(secret) != SecretLen {
		return nil, fmt.Errorf("seal: secret of %d bytes, want %d", len(secret), SecretLen)
	}
	info := make([]byte, 0, 32)
	info = append(info, label...)
	info = append(info, session[:]...)
	info = binary.BigEndian.AppendUint16(info, uint16(channel))
	info = binary.BigEndian.AppendUint32(info, epoch)
	return hkdf.Key(sha256.New, secret, nil, string(info), KeyLen)
}

// NewSecret returns a random session secret.
func NewSecret() []byte {
	b := make([]byte, SecretLen)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return b
}

// Key is one epoch's key, ready to seal and open. It is safe for
// concurrent use.
type Key struct {
	Epoch uint32
	aead  cipher.AEAD
	// enc: the key encrypts the messages as well (NewEncryptingKey).
	enc bool
	// mu guards scratch, which holds the gathered framing and messages
	// of the packet an encrypting key seals or opens.
	mu      sync.Mutex
	scratch []byte
}

// Encrypts reports whether k encrypts the messages it seals.
func (k *Key) Encrypts() bool { return k.enc }

// NewEncryptingKey is NewKey for a channel whose messages are encrypted as
// well as authenticated (see the package doc).
func NewEncryptingKey(epoch uint32, k []byte) (*Key, error) {
	key, err := NewKey(epoch, k)
	if err != nil {
		return nil, err
	}
	key.enc = true
	return key, nil
}

// NewKey returns the key of epoch with the KeyLen bytes k.
func NewKey(epoch uint32, k []byte) (*Key, error) {
	if len(k) != KeyLen {
		return nil, fmt.Errorf("seal: key of %d bytes, want %d", len(k), KeyLen)
	}
	blk, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	return &Key{Epoch: epoch, aead: g}, nil
}

// lastBlock returns the offset of the last message block's length field of
// packet p, after checking that its blocks fill it exactly.
func lastBlock(p []byte) (off int, h mold.Header, err error) {
	h, err = mold.DecodeHeader(p)
	if err != nil {
		return 0, h, err
	}
	n := h.Messages()
	if n == 0 {
		return 0, h, ErrNotSealable
	}
	off = mold.HeaderLen
	for i := 0; i < n-1; i++ {
		if off+mold.BlockHdrLen > len(p) {
			return 0, h, fmt.Errorf("block %d of %d missing at byte %d", i+1, n, off)
		}
		off += mold.BlockHdrLen + int(binary.BigEndian.Uint16(p[off:]))
	}
	if off+mold.BlockHdrLen > len(p) {
		return 0, h, fmt.Errorf("block %d of %d missing at byte %d", n, n, off)
	}
	if end := off + mold.BlockHdrLen + int(binary.BigEndian.Uint16(p[off:])); end != len(p) {
		return 0, h, fmt.Errorf("blocks end at byte %d of %d", end, len(p))
	}
	return off, h, nil
}

// Seal appends the seal to data packet p, a well-formed MoldUDP64 packet
// with at least one message, lengthening its last block by Overhead, and
// returns the sealed packet. It writes in p's spare capacity, which must
// hold Overhead bytes more, and does not allocate.
func (k *Key) Seal(p []byte) ([]byte, error) {
	off, _, err := lastBlock(p)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	if cap(p)-len(p) < Overhead {
		return nil, fmt.Errorf("seal: %d bytes of room after the packet, want %d", cap(p)-len(p), Overhead)
	}
	if l := int(binary.BigEndian.Uint16(p[off:])) + Overhead; l > mold.MaxMessageLen {
		return nil, fmt.Errorf("seal: last block of %d bytes with the seal, at most %d", l, mold.MaxMessageLen)
	}
	return k.seal(p, off, nil), nil
}

// seal lengthens the last block (at off) of p by Overhead and writes the
// epoch, nonce (random when nonce is nil) and tag in p's spare capacity;
// an encrypting key also encrypts the messages in place.
func (k *Key) seal(p []byte, off int, nonce []byte) []byte {
	binary.BigEndian.PutUint16(p[off:], binary.BigEndian.Uint16(p[off:])+Overhead)
	n := len(p)
	p = p[:n+EpochLen+NonceLen]
	binary.BigEndian.PutUint32(p[n:], k.Epoch)
	if nonce == nil {
		rand.Read(p[n+EpochLen:])
	} else {
		copy(p[n+EpochLen:], nonce)
	}
	if !k.enc {
		return k.aead.Seal(p, p[n+EpochLen:], nil, p)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	aad, pt := gather(p, n, k.buffer(len(p)))
	ct := k.aead.Seal(pt[:0], p[n+EpochLen:], pt, aad)
	scatter(p, n, ct[:len(pt)])
	return append(p, ct[len(pt):]...)
}

// buffer returns k's scratch, with room for the framing, messages and tag
// of a packet of n bytes; k.mu is held.
func (k *Key) buffer(n int) []byte {
	if cap(k.scratch) < 2*n+TagLen {
		k.scratch = make([]byte, 0, max(2*n+TagLen, 4096))
	}
	return k.scratch
}

// gather copies, from packet p whose blocks end at byte end (the seal's
// epoch and nonce follow), the framing (the header, each block's length,
// the epoch and nonce: the additional data) and the messages (the
// plaintext or ciphertext) to buf, and returns both. The blocks were
// checked by lastBlock.
func gather(p []byte, end int, buf []byte) (aad, msgs []byte) {
	aad = append(buf[:0], p[:mold.HeaderLen]...)
	off := mold.HeaderLen
	for off < end {
		l := int(binary.BigEndian.Uint16(p[off:]))
		aad = append(aad, p[off:off+mold.BlockHdrLen]...)
		off += mold.BlockHdrLen + l
	}
	aad = append(aad, p[end:end+EpochLen+NonceLen]...)
	msgs = buf[len(aad):len(aad)]
	off = mold.HeaderLen
	for off < end {
		l := int(binary.BigEndian.Uint16(p[off:]))
		body := p[off+mold.BlockHdrLen : min(off+mold.BlockHdrLen+l, end)]
		msgs = append(msgs, body...)
		off += mold.BlockHdrLen + l
	}
	return aad, msgs
}

// scatter writes msgs back over the messages of packet p, whose blocks end
// at end, as gather took them.
func scatter(p []byte, end int, msgs []byte) {
	off := mold.HeaderLen
	for off < end {
		l := int(binary.BigEndian.Uint16(p[off:]))
		body := p[off+mold.BlockHdrLen : min(off+mold.BlockHdrLen+l, end)]
		msgs = msgs[copy(body, msgs):]
		off += mold.BlockHdrLen + l
	}
}

// sealNonce is Seal with a given nonce, for the documented vectors.
func (k *Key) sealNonce(p, nonce []byte) []byte {
	off, _, _ := lastBlock(p)
	return k.seal(append(make([]byte, 0, len(p)+Overhead), p...), off, nonce)
}

// Keys are the keys a subscriber holds for one channel: the epoch keys of
// up to MaxSessions sessions (the one followed, and a competing or newer
// one that a feed handler of the feed also answers for), looked up by the
// session and epoch in each seal. The zero value holds none. A Keys is not
// changed once in use: a new one replaces it (With).
type Keys struct {
	sets []keySet // most recent last
}

type keySet struct {
	session mold.Session
	keys    []*Key
}

// MaxSessions bounds the sessions one Keys holds.
const MaxSessions = 4

// With returns a copy of ks holding keys for session in place of any it
// held for it, dropping the oldest session beyond MaxSessions.
func (ks *Keys) With(session mold.Session, keys []*Key) *Keys {
	out := &Keys{}
	for _, s := range ks.sets {
		if s.session != session {
			out.sets = append(out.sets, s)
		}
	}
	out.sets = append(out.sets, keySet{session, keys})
	if len(out.sets) > MaxSessions {
		out.sets = out.sets[len(out.sets)-MaxSessions:]
	}
	return out
}

// Set replaces every held key by session's keys.
func (ks *Keys) Set(session mold.Session, keys []*Key) {
	ks.sets = []keySet{{session, keys}}
}

// Latest returns the session set last, and false if none.
func (ks *Keys) Latest() (mold.Session, bool) {
	if len(ks.sets) == 0 {
		return mold.Session{}, false
	}
	return ks.sets[len(ks.sets)-1].session, true
}

// HasSession reports whether keys of session are held.
func (ks *Keys) HasSession(session mold.Session) bool {
	for _, s := range ks.sets {
		if s.session == session {
			return true
		}
	}
	return false
}

// Has reports whether the key of epoch of session is held.
func (ks *Keys) Has(session mold.Session, epoch uint32) bool {
	return ks.key(session, epoch) != nil
}

// MaxEpoch returns the latest epoch held for session, and false if none.
func (ks *Keys) MaxEpoch(session mold.Session) (uint32, bool) {
	for _, s := range ks.sets {
		if s.session == session && len(s.keys) > 0 {
			m := s.keys[0].Epoch
			for _, k := range s.keys[1:] {
				m = max(m, k.Epoch)
			}
			return m, true
		}
	}
	return 0, false
}

func (ks *Keys) key(session mold.Session, epoch uint32) *Key {
	for i := range ks.sets {
		if s := &ks.sets[i]; s.session == session {
			for _, k := range s.keys {
				if k.Epoch == epoch {
					return k
				}
			}
			return nil
		}
	}
	return nil
}

// Open verifies sealed data packet p and returns it without its seal: the
// last block's length is shortened in place and the result is p less
// Overhead bytes. p is not otherwise changed; on error it is unchanged. It
// does not allocate, except for the error.
func (ks *Keys) Open(p []byte) ([]byte, error) {
	off, h, err := lastBlock(p)
	if err != nil {
		if errors.Is(err, ErrNotSealable) {
			return nil, &Error{Err: ErrNotSealable, Session: h.Session, Seq: h.Seq}
		}
		return nil, &Error{Err: ErrNotSealable, Session: h.Session, Seq: h.Seq, Detail: err.Error()}
	}
	l := int(binary.BigEndian.Uint16(p[off:]))
	if l < Overhead {
		return nil, &Error{Err: ErrShort, Session: h.Session, Seq: h.Seq, Detail: fmt.Sprintf("%d bytes", l)}
	}
	t := len(p) - Overhead
	epoch := binary.BigEndian.Uint32(p[t:])
	k := ks.key(h.Session, epoch)
	if k == nil {
		return nil, &Error{Err: ErrUnknownEpoch, Session: h.Session, Seq: h.Seq, Epoch: epoch}
	}
	nonce := p[t+EpochLen : t+EpochLen+NonceLen]
	tag := p[len(p)-TagLen:]
	if k.enc {
		if err := k.decrypt(p, t, nonce, tag); err != nil {
			return nil, &Error{Err: ErrBadTag, Session: h.Session, Seq: h.Seq, Epoch: epoch}
		}
	} else if _, err := k.aead.Open(nil, nonce, tag, p[:len(p)-TagLen]); err != nil {
		return nil, &Error{Err: ErrBadTag, Session: h.Session, Seq: h.Seq, Epoch: epoch}
	}
	binary.BigEndian.PutUint16(p[off:], uint16(l-Overhead))
	return p[:t], nil
}

// decrypt verifies packet p, sealed by an encrypting key with its blocks
// ending at t, and decrypts its messages in place; on error p is unchanged.
func (k *Key) decrypt(p []byte, t int, nonce, tag []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	aad, ct := gather(p, t, k.buffer(len(p)))
	ct = append(ct, tag...)
	pt, err := k.aead.Open(ct[:0], nonce, ct, aad)
	if err != nil {
		return err
	}
	scatter(p, t, pt)
	return nil
}
