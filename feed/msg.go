package feed

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Type identifies a normalized message. Its values are ASCII letters so that a
// hex dump can be read by eye.
type Type uint8

// Message types.
const (
	TypeDefinition Type = 'I' // instrument definition
	TypeQuote      Type = 'Q' // best bid and offer
	TypeTrade      Type = 'T' // trade print
	TypeTradeBust  Type = 'B' // a previous trade was broken
	TypeStatus     Type = 'S' // trading status change
	TypeLevelDelta Type = 'L' // one price level of the book changed
)

// String returns the type's name.
func (t Type) String() string {
	switch t {
	case TypeDefinition:
		return "definition"
	case TypeQuote:
		return "quote"
	case TypeTrade:
		return "trade"
	case TypeTradeBust:
		return "trade-bust"
	case TypeStatus:
		return "status"
	case TypeLevelDelta:
		return "level-delta"
	}
	return fmt.Sprintf("type(0x%02x)", uint8(t))
}

// Version is the codec version this package writes. Decoders accept any
// version >= 1 and read the fields they know.
const Version = 1

// HeaderLen is the size of the header every message starts with.
const HeaderLen = 36

// Sizes of version-1 messages, header included.
const (
	DefinitionLen = HeaderLen + 16
	QuoteLen      = HeaderLen + 32
	TradeLen      = HeaderLen + 28
	TradeBustLen  = HeaderLen + 8
	StatusLen     = HeaderLen + 8
	LevelDeltaLen = HeaderLen + 24
)

// MaxLen is the size of the largest version-1 message.
const MaxLen = QuoteLen

// Trim returns msg without the padding a publisher may add to a packet's
// last message (docs/wire-format.md, "Padding"): a version-1 message longer
// than its type's size is cut to that size. Any other message (a newer
// version, whose longer body is its own, an unknown type, one too short to
// tell) is returned whole. It does not allocate.
func Trim(msg []byte) []byte {
	if len(msg) < 2 || msg[1] != Version {
		return msg
	}
	if n := Size(Type(msg[0])); n != 0 && len(msg) > n {
		return msg[:n]
	}
	return msg
}

// Size returns the version-1 size of a message of type t, or 0 for an unknown
// type.
func Size(t Type) int {
	switch t {
	case TypeDefinition:
		return DefinitionLen
	case TypeQuote:
		return QuoteLen
	case TypeTrade:
		return TradeLen
	case TypeTradeBust:
		return TradeBustLen
	case TypeStatus:
		return StatusLen
	case TypeLevelDelta:
		return LevelDeltaLen
	}
	return 0
}

// Flags are per-message flag bits carried in the header. Each bit has one
// meaning whatever the type; a bit that does not apply to a type is zero.
type Flags uint16

// Flag bits.
const (
	// FlagProvisional marks a definition made up from the first message that
	// named an instrument, because its reference data was never seen.
	FlagProvisional Flags = 1 << 0
	// FlagBookIncomplete marks a quote or level delta computed from a book
	// that may lack orders (the upstream feed was joined mid-day).
	FlagBookIncomplete Flags = 1 << 1
	// FlagCross marks a trade that is an auction cross.
	FlagCross Flags = 1 << 2
	// FlagBidPresent says the quote's bid side holds a price.
	FlagBidPresent Flags = 1 << 3
	// FlagAskPresent says the quote's ask side holds a price.
	FlagAskPresent Flags = 1 << 4
	// FlagConflated marks a quote that a conflating subscriber delivered in
	// place of earlier quotes of its instrument, which it dropped as
	// superseded (tickcast.ConflateConfig). It is never sent: a subscriber
	// sets it on its own copy, and the InstSeq of such a quote may skip.
	FlagConflated Flags = 1 << 5
)

// Side is an order side, or the aggressor side of a trade.
type Side uint8

// Sides.
const (
	SideUnknown Side = 0
	SideBuy     Side = 'B'
	SideSell    Side = 'S'
)

// Header is the part every message starts with.
type Header struct {
	Type    Type
	Version uint8
	Flags   Flags
	// Instrument is the feed handler's numeric instrument id.
	Instrument uint32
	// InstSeq counts this instrument's messages on its channel, starting at 1
	// with its definition. A gap in it tells which instruments a loss touched.
	InstSeq uint32
	// ExchangeNs is the exchange's timestamp of the event.
	ExchangeNs int64
	// RecvNs is when the feed handler received the upstream event.
	RecvNs int64
	// SendNs is when the feed handler flushed the packet holding the message.
	SendNs int64
}

// Symbol is an instrument's ticker, ASCII, right-padded with spaces to 8 bytes
// (the width NASDAQ uses).
type Symbol [8]byte

// MakeSymbol pads s with spaces. It fails if s is longer than 8 bytes or holds
// a byte outside printable ASCII.
func MakeSymbol(s string) (Symbol, error) {
	var sym Symbol
	if len(s) == 0 || len(s) > len(sym) {
		return sym, fmt.Errorf("feed: symbol %q: length %d, want 1..8", s, len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return sym, fmt.Errorf("feed: symbol %q: byte %d (0x%02x) is not printable ASCII", s, i, s[i])
		}
	}
	copy(sym[:], s)
	for i := len(s); i < len(sym); i++ {
		sym[i] = ' '
	}
	return sym, nil
}

// String returns the symbol without its padding.
func (s Symbol) String() string { return strings.TrimRight(string(s[:]), " ") }

// Definition is an instrument's reference data.
type Definition struct {
	Symbol Symbol
	// PriceScale is the number of implied decimals of every price of this
	// instrument: a price p means p / 10^PriceScale.
	PriceScale uint8
	// MarketCategory is the listing market as the upstream feed names it
	// (ITCH: 'Q', 'G', 'S', 'N', 'A', 'P', 'Z', 'V'), or 0.
	MarketCategory byte
	// RoundLot is the number of shares in a round lot.
	RoundLot uint32
}

// Quote is an instrument's best bid and offer after an event. A side that
// holds no orders has its Present flag clear and zero price and size.
type Quote struct {
	BidPx   int64
	BidSize uint64
	AskPx   int64
	AskSize uint64
}

// Trade is one print.
type Trade struct {
	Px   int64
	Size uint64
	// MatchID is the upstream match number; a TradeBust names it.
	MatchID uint64
	// Aggressor is the side that took liquidity, or SideUnknown.
	Aggressor Side
}

// TradeBust cancels the trade with MatchID.
type TradeBust struct {
	MatchID uint64
}

// Trading states of a Status message.
const (
	StateHalted       byte = 'H'
	StatePaused       byte = 'P'
	StateQuotation    byte = 'Q' // quotation only
	StateTrading      byte = 'T'
	StateUnknownState byte = '?'
)

// Status is an instrument's trading state.
type Status struct {
	State byte
	// Reason is the upstream's 4-character reason code, space padded.
	Reason [4]byte
}

// Level delta actions.
const (
	ActionNew    byte = 'N'
	ActionChange byte = 'C'
	ActionDelete byte = 'D'
)

// LevelDelta is a change of one aggregated price level.
type LevelDelta struct {
	Side   Side
	Action byte
	Orders uint32
	Px     int64
	Size   uint64
}

// Msg is any normalized message: the header plus the body for Header.Type.
// Bodies of other types are ignored by Encode and left untouched by Decode.
type Msg struct {
	Header
	Def    Definition
	Quote  Quote
	Trade  Trade
	Bust   TradeBust
	Status Status
	Delta  LevelDelta
}

// DecodeError reports a message that cannot be decoded.
type DecodeError struct {
	Type   Type
	Len    int    // length of the input
	Need   int    // bytes the type needs, when the input was short
	Reason string // what was wrong
}

func (e *DecodeError) Error() string {
	if e.Need > 0 {
		return fmt.Sprintf("feed: %s message of %d bytes, need %d: %s", e.Type, e.Len, e.Need, e.Reason)
	}
	return fmt.Sprintf("feed: %s message of %d bytes: %s", e.Type, e.Len, e.Reason)
}

// EncodeError reports a message that cannot be encoded.
type EncodeError struct {
	Type   Type
	Need   int
	Have   int
	Reason string
}

func (e *EncodeError) Error() string {
	return fmt.Sprintf("feed: encode %s: %s (need %d bytes, buffer has %d)", e.Type, e.Reason, e.Need, e.Have)
}

var le = binary.LittleEndian

// Encode writes m as a version-1 message of type m.Type into b and returns
// the number of bytes written. The Version field is ignored: Encode always
// writes Version. It does not allocate unless it fails.
func (m *Msg) Encode(b []byte) (int, error) {
	n := Size(m.Type)
	if n == 0 {
		return 0, &EncodeError{Type: m.Type, Have: len(b), Reason: "unknown type"}
	}
	if len(b) < n {
		return 0, &EncodeError{Type: m.Type, Need: n, Have: len(b), Reason: "buffer too short"}
	}
	b = b[:n]
	b[0] = byte(m.Type)
	b[1] = Version
	le.PutUint16(b[2:], uint16(m.Flags))
	le.PutUint32(b[4:], m.Instrument)
	le.PutUint32(b[8:], m.InstSeq)
	le.PutUint64(b[12:], uint64(m.ExchangeNs))
	le.PutUint64(b[20:], uint64(m.RecvNs))
	le.PutUint64(b[28:], uint64(m.SendNs))
	body := b[HeaderLen:]
	switch m.Type {
	case TypeDefinition:
		copy(body[0:8], m.Def.Symbol[:])
		body[8] = m.Def.PriceScale
		body[9] = m.Def.MarketCategory
		body[10], body[11] = 0, 0
		le.PutUint32(body[12:], m.Def.RoundLot)
	case TypeQuote:
		le.PutUint64(body[0:], uint64(m.Quote.BidPx))
		le.PutUint64(body[8:], m.Quote.BidSize)
		le.PutUint64(body[16:], uint64(m.Quote.AskPx))
		le.PutUint64(body[24:], m.Quote.AskSize)
	case TypeTrade:
		le.PutUint64(body[0:], uint64(m.Trade.Px))
		le.PutUint64(body[8:], m.Trade.Size)
		le.PutUint64(body[16:], m.Trade.MatchID)
		body[24] = byte(m.Trade.Aggressor)
		body[25], body[26], body[27] = 0, 0, 0
	case TypeTradeBust:
		le.PutUint64(body[0:], m.Bust.MatchID)
	case TypeStatus:
		body[0] = m.Status.State
		copy(body[1:5], m.Status.Reason[:])
		body[5], body[6], body[7] = 0, 0, 0
	case TypeLevelDelta:
		body[0] = byte(m.Delta.Side)
		body[1] = m.Delta.Action
		body[2], body[3] = 0, 0
		le.PutUint32(body[4:], m.Delta.Orders)
		le.PutUint64(body[8:], uint64(m.Delta.Px))
		le.PutUint64(body[16:], m.Delta.Size)
	}
	return n, nil
}

// DecodeHeader reads the common header of message b. It checks only that b
// holds a header and a known version, not the body.
func DecodeHeader(b []byte, h *Header) error {
	if len(b) < HeaderLen {
		t := Type(0)
		if len(b) > 0 {
			t = Type(b[0])
		}
		return &DecodeError{Type: t, Len: len(b), Need: HeaderLen, Reason: "shorter than the common header"}
	}
	if b[1] == 0 {
		return &DecodeError{Type: Type(b[0]), Len: len(b), Reason: "version 0 is not a valid version"}
	}
	h.Type = Type(b[0])
	h.Version = b[1]
	h.Flags = Flags(le.Uint16(b[2:]))
	h.Instrument = le.Uint32(b[4:])
	h.InstSeq = le.Uint32(b[8:])
	h.ExchangeNs = int64(le.Uint64(b[12:]))
	h.RecvNs = int64(le.Uint64(b[20:]))
	h.SendNs = int64(le.Uint64(b[28:]))
	return nil
}

// Decode reads message b into m: the header, and the body of its type. Bytes
// past the version-1 size are ignored (they belong to a newer version). It
// does not allocate unless it fails.
func (m *Msg) Decode(b []byte) error {
	if err := DecodeHeader(b, &m.Header); err != nil {
		return err
	}
	n := Size(m.Type)
	if n == 0 {
		return &DecodeError{Type: m.Type, Len: len(b), Reason: "unknown message type"}
	}
	if len(b) < n {
		return &DecodeError{Type: m.Type, Len: len(b), Need: n, Reason: "short message"}
	}
	body := b[HeaderLen:n]
	switch m.Type {
	case TypeDefinition:
		copy(m.Def.Symbol[:], body[0:8])
		m.Def.PriceScale = body[8]
		m.Def.MarketCategory = body[9]
		m.Def.RoundLot = le.Uint32(body[12:])
	case TypeQuote:
		m.Quote.BidPx = int64(le.Uint64(body[0:]))
		m.Quote.BidSize = le.Uint64(body[8:])
		m.Quote.AskPx = int64(le.Uint64(body[16:]))
		m.Quote.AskSize = le.Uint64(body[24:])
	case TypeTrade:
		m.Trade.Px = int64(le.Uint64(body[0:]))
		m.Trade.Size = le.Uint64(body[8:])
		m.Trade.MatchID = le.Uint64(body[16:])
		m.Trade.Aggressor = Side(body[24])
	case TypeTradeBust:
		m.Bust.MatchID = le.Uint64(body[0:])
	case TypeStatus:
		m.Status.State = body[0]
		copy(m.Status.Reason[:], body[1:5])
	case TypeLevelDelta:
		m.Delta.Side = Side(body[0])
		m.Delta.Action = body[1]
		m.Delta.Orders = le.Uint32(body[4:])
		m.Delta.Px = int64(le.Uint64(body[8:]))
		m.Delta.Size = le.Uint64(body[16:])
	}
	return nil
}

// RecvNsOffset is the offset of the receive timestamp in every message: when
// the feed handler received the upstream event (Header.RecvNs).
const RecvNsOffset = 20

// SendNsOffset is the offset of the send timestamp in every message. The
// publisher stamps it in place when it flushes a packet.
const SendNsOffset = 28

// PutSendNs stamps the send timestamp of the encoded message b in place.
func PutSendNs(b []byte, ns int64) { le.PutUint64(b[SendNsOffset:], uint64(ns)) }
