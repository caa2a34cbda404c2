// Package verify checks received messages of a synthetic feed against the
// messages the feed's configuration says each (channel, sequence) must carry.
//
// It reads message bytes with its own decoder, written from the byte tables
// of docs/wire-format.md and sharing no code with package feed's codec: a bug
// in the codec then shows up as a mismatch instead of hiding itself on both
// sides. Only the expected values come from package feed (Synthetic.Expect).
// Receive and send timestamps are set by the feed handler at run time and are
// not checked.
package verify

import (
	"fmt"

	"github.com/tickcast/tickcast/feed"
)

// Verifier checks messages of one synthetic configuration.
type Verifier struct {
	gen       *feed.Synthetic
	exp       feed.Msg // scratch, to keep Check allocation-free
	conflated bool     // quotes may carry the conflated flag
}

// flagConflated is the flag a conflating subscriber sets on a quote it
// delivers in place of earlier ones (docs/wire-format.md, bit 5).
const flagConflated = 0x0020

// AcceptConflated makes Check accept a quote that carries the conflated
// flag, as a conflating subscriber delivers: such a quote must otherwise
// be exactly the message of its sequence. Without it the flag is a
// mismatch, as it never appears on the wire.
func (v *Verifier) AcceptConflated() { v.conflated = true }

// LastQuotes returns, for each instrument of channel c that had a quote
// among sequences 1..last, the sequence of its last one: what a
// subscriber that conflates must have delivered last for the instrument
// once it released sequence last. It reads backwards from last, a round
// of the channel's instruments at a time, until every instrument has a
// quote or the definitions are reached.
func (v *Verifier) LastQuotes(c int, last uint64) map[uint32]uint64 {
	out := map[uint32]uint64{}
	n := uint64(len(v.gen.ChannelInstruments(c)))
	for seq := last; seq > n && uint64(len(out)) < n; seq-- {
		v.gen.Expect(c, seq, &v.exp)
		if _, ok := out[v.exp.Instrument]; !ok && v.exp.Type == feed.TypeQuote {
			out[v.exp.Instrument] = seq
		}
	}
	return out
}

// New returns a verifier for the synthetic feed made with cfg.
func New(cfg feed.SyntheticConfig) (*Verifier, error) {
	g, err := feed.NewSynthetic(cfg)
	if err != nil {
		return nil, err
	}
	return &Verifier{gen: g}, nil
}

// Source returns the generator the verifier computes expectations with.
func (v *Verifier) Source() *feed.Synthetic { return v.gen }

// MismatchError says which field of which message differs.
type MismatchError struct {
	Channel int
	Seq     uint64
	Field   string
	Got     int64
	Want    int64
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("verify: channel %d seq %d: %s = %d, want %d", e.Channel, e.Seq, e.Field, e.Got, e.Want)
}

// Offsets and sizes from docs/wire-format.md, version 1.
const (
	offType, offVersion, offFlags, offInstrument, offInstSeq, offExchange = 0, 1, 2, 4, 8, 12
	hdr                                                                   = 36
)

func u16(b []byte, o int) uint64 { return uint64(b[o]) | uint64(b[o+1])<<8 }
func u32(b []byte, o int) uint64 { return u16(b, o) | u16(b, o+2)<<16 }
func u64(b []byte, o int) uint64 { return u32(b, o) | u32(b, o+4)<<32 }

// bodyLen is the version-1 body size per type letter.
func bodyLen(t byte) int {
	switch t {
	case 'I':
		return 16
	case 'B', 'S':
		return 8
	case 'Q':
		return 32
	case 'T':
		return 28
	case 'L':
		return 24
	}
	return -1
}

// Check verifies that msg is message seq of channel c. It allocates only when
// it reports a mismatch. It is long for a reason: one switch case per
// message type, each comparing that type's fields.
func (v *Verifier) Check(c int, seq uint64, msg []byte) error {
	if c < 0 || c >= v.gen.Config().Channels || len(v.gen.ChannelInstruments(c)) == 0 {
		return fmt.Errorf("verify: channel %d carries no synthetic messages", c)
	}
	if seq == 0 {
		return fmt.Errorf("verify: channel %d: sequence 0 does not exist", c)
	}
	e := &v.exp
	v.gen.Expect(c, seq, e)
	if len(msg) < hdr {
		return fmt.Errorf("verify: channel %d seq %d: %d bytes, shorter than the %d-byte header", c, seq, len(msg), hdr)
	}
	t := msg[offType]
	if bl := bodyLen(t); bl < 0 || len(msg) < hdr+bl {
		return fmt.Errorf("verify: channel %d seq %d: type 0x%02x with %d bytes", c, seq, t, len(msg))
	}
	bad := func(field string, got, want int64) error {
		return &MismatchError{Channel: c, Seq: seq, Field: field, Got: got, Want: want}
	}
	if t != byte(e.Type) {
		return bad("type", int64(t), int64(e.Type))
	}
	if msg[offVersion] < 1 {
		return bad("version", int64(msg[offVersion]), 1)
	}
	g := u16(msg, offFlags)
	if v.conflated && t == 'Q' {
		g &^= flagConflated
	}
	if g != uint64(e.Flags) {
		return bad("flags", int64(g), int64(e.Flags))
	}
	if g := u32(msg, offInstrument); g != uint64(e.Instrument) {
		return bad("instrument", int64(g), int64(e.Instrument))
	}
	if g := u32(msg, offInstSeq); g != uint64(e.InstSeq) {
		return bad("inst_seq", int64(g), int64(e.InstSeq))
	}
	if g := int64(u64(msg, offExchange)); g != e.ExchangeNs {
		return bad("exchange_ns", g, e.ExchangeNs)
	}
	b := msg[hdr:]
	switch t {
	case 'I':
		for i := 0; i < 8; i++ {
			if b[i] != e.Def.Symbol[i] {
				return bad(fmt.Sprintf("symbol[%d]", i), int64(b[i]), int64(e.Def.Symbol[i]))
			}
		}
		if b[8] != e.Def.PriceScale {
			return bad("price_scale", int64(b[8]), int64(e.Def.PriceScale))
		}
		if b[9] != e.Def.MarketCategory {
			return bad("market_category", int64(b[9]), int64(e.Def.MarketCategory))
		}
		if g := u32(b, 12); g != uint64(e.Def.RoundLot) {
			return bad("round_lot", int64(g), int64(e.Def.RoundLot))
		}
	case 'Q':
		if g := int64(u64(b, 0)); g != e.Quote.BidPx {
			return bad("bid_px", g, e.Quote.BidPx)
		}
		if g := u64(b, 8); g != e.Quote.BidSize {
			return bad("bid_size", int64(g), int64(e.Quote.BidSize))
		}
		if g := int64(u64(b, 16)); g != e.Quote.AskPx {
			return bad("ask_px", g, e.Quote.AskPx)
		}
		if g := u64(b, 24); g != e.Quote.AskSize {
			return bad("ask_size", int64(g), int64(e.Quote.AskSize))
		}
	case 'T':
		if g := int64(u64(b, 0)); g != e.Trade.Px {
			return bad("px", g, e.Trade.Px)
		}
		if g := u64(b, 8); g != e.Trade.Size {
			return bad("size", int64(g), int64(e.Trade.Size))
		}
		if g := u64(b, 16); g != e.Trade.MatchID {
			return bad("match_id", int64(g), int64(e.Trade.MatchID))
		}
		if b[24] != byte(e.Trade.Aggressor) {
			return bad("aggressor", int64(b[24]), int64(e.Trade.Aggressor))
		}
	default:
		return fmt.Errorf("verify: channel %d seq %d: type %q never appears in a synthetic feed", c, seq, t)
	}
	return nil
}
