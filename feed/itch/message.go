package itch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tickcast/tickcast/feed"
)

// Type is an ITCH 5.0 message type: the message's first byte, an ASCII
// letter.
type Type byte

// Message types of TotalView-ITCH 5.0.
const (
	TypeSystemEvent         Type = 'S'
	TypeStockDirectory      Type = 'R'
	TypeTradingAction       Type = 'H'
	TypeRegSHO              Type = 'Y'
	TypeParticipantPosition Type = 'L'
	TypeMWCBDeclineLevel    Type = 'V'
	TypeMWCBStatus          Type = 'W'
	TypeIPOQuotingPeriod    Type = 'K'
	TypeLULDAuctionCollar   Type = 'J'
	TypeOperationalHalt     Type = 'h'
	TypeAddOrder            Type = 'A'
	TypeAddOrderMPID        Type = 'F'
	TypeOrderExecuted       Type = 'E'
	TypeOrderExecutedPrice  Type = 'C'
	TypeOrderCancel         Type = 'X'
	TypeOrderDelete         Type = 'D'
	TypeOrderReplace        Type = 'U'
	TypeTrade               Type = 'P'
	TypeCrossTrade          Type = 'Q'
	TypeBrokenTrade         Type = 'B'
	TypeNOII                Type = 'I'
	TypeRPII                Type = 'N'
	TypeDLCR                Type = 'O'
)

// sizes holds the size in bytes of every message type, 0 for an unknown
// type. All sizes fit a byte.
var sizes = [256]uint8{
	TypeSystemEvent:         12,
	TypeStockDirectory:      39,
	TypeTradingAction:       25,
	TypeRegSHO:              20,
	TypeParticipantPosition: 26,
	TypeMWCBDeclineLevel:    35,
	TypeMWCBStatus:          12,
	TypeIPOQuotingPeriod:    28,
	TypeLULDAuctionCollar:   35,
	TypeOperationalHalt:     21,
	TypeAddOrder:            36,
	TypeAddOrderMPID:        40,
	TypeOrderExecuted:       31,
	TypeOrderExecutedPrice:  36,
	TypeOrderCancel:         23,
	TypeOrderDelete:         19,
	TypeOrderReplace:        35,
	TypeTrade:               44,
	TypeCrossTrade:          40,
	TypeBrokenTrade:         19,
	TypeNOII:                50,
	TypeRPII:                20,
	TypeDLCR:                48,
}

var names = [256]string{
	TypeSystemEvent:         "system event",
	TypeStockDirectory:      "stock directory",
	TypeTradingAction:       "stock trading action",
	TypeRegSHO:              "Reg SHO restriction",
	TypeParticipantPosition: "market participant position",
	TypeMWCBDeclineLevel:    "MWCB decline level",
	TypeMWCBStatus:          "MWCB status",
	TypeIPOQuotingPeriod:    "IPO quoting period update",
	TypeLULDAuctionCollar:   "LULD auction collar",
	TypeOperationalHalt:     "operational halt",
	TypeAddOrder:            "add order",
	TypeAddOrderMPID:        "add order with MPID",
	TypeOrderExecuted:       "order executed",
	TypeOrderExecutedPrice:  "order executed with price",
	TypeOrderCancel:         "order cancel",
	TypeOrderDelete:         "order delete",
	TypeOrderReplace:        "order replace",
	TypeTrade:               "trade (non-cross)",
	TypeCrossTrade:          "cross trade",
	TypeBrokenTrade:         "broken trade",
	TypeNOII:                "NOII",
	TypeRPII:                "RPII",
	TypeDLCR:                "DLCR price discovery",
}

// Size returns the size in bytes of a message of type t, or 0 if t is not
// an ITCH 5.0 type.
func Size(t Type) int { return int(sizes[t]) }

// Types returns every ITCH 5.0 message type, in the order of the
// specification.
func Types() []Type {
	return []Type{'S', 'R', 'H', 'Y', 'L', 'V', 'W', 'K', 'J', 'h', 'A', 'F', 'E', 'C', 'X', 'D', 'U', 'P', 'Q', 'B', 'I', 'N', 'O'}
}

// String returns the letter and name of t, e.g. `'A' add order`.
func (t Type) String() string {
	if n := names[t]; n != "" {
		return fmt.Sprintf("'%c' %s", byte(t), n)
	}
	if t > ' ' && t <= '~' {
		return fmt.Sprintf("'%c' unknown type", byte(t))
	}
	return fmt.Sprintf("0x%02x unknown type", byte(t))
}

// ErrUnknownType is returned by Parse for a message whose type is not an
// ITCH 5.0 type. A Reader's user skips such messages and counts them.
var ErrUnknownType = errors.New("itch: unknown message type")

// FormatError reports input that is not valid ITCH in NASDAQ's file format:
// a message whose length does not match its type, or a message cut short by
// the end of the input.
type FormatError struct {
	Type   Type   // the message's type; 0 when the input ended before it
	Offset int64  // byte offset of the message's length prefix in the input, -1 if unknown
	Field  string // the field that is wrong: "length" or "type"
	Len    int    // bytes present (or announced by the length prefix)
	Want   int    // bytes the type needs, or the length prefix announced
	Reason string
	Err    error // underlying error, such as io.ErrUnexpectedEOF or ErrUnknownType
}

func (e *FormatError) Error() string {
	where := "at unknown offset"
	if e.Offset >= 0 {
		where = fmt.Sprintf("at offset %d", e.Offset)
	}
	if e.Type == 0 && e.Len == 0 {
		return fmt.Sprintf("itch: message %s: %s: %s", where, e.Field, e.Reason)
	}
	return fmt.Sprintf("itch: %s message %s: %s %d, want %d: %s", e.Type, where, e.Field, e.Len, e.Want, e.Reason)
}

// Unwrap returns the underlying error.
func (e *FormatError) Unwrap() error { return e.Err }

// Parse checks that b is one whole message of a known ITCH 5.0 type and
// returns a view of it. The view shares b's memory: it is valid as long as
// b is. Parse returns ErrUnknownType for a type it does not know (the length
// of such a message cannot be checked), and a *FormatError with Offset -1
// when the length does not match the type. It does not allocate unless the
// length is wrong.
func Parse(b []byte) (Message, error) {
	if len(b) == 0 {
		return nil, &FormatError{Offset: -1, Field: "length", Reason: "empty message"}
	}
	n := int(sizes[b[0]])
	if n == 0 {
		return nil, ErrUnknownType
	}
	if len(b) != n {
		return nil, &FormatError{Type: Type(b[0]), Offset: -1, Field: "length", Len: len(b), Want: n,
			Reason: "length does not match the type"}
	}
	return Message(b), nil
}

var be = binary.BigEndian

// Message is a zero-copy view of one ITCH 5.0 message, as returned by Parse:
// its first byte is the type and its length matches the type. The accessors
// of the typed views (m.AddOrder(), ...) read fields straight from the
// bytes; call the one that matches Type.
//
// Every message starts with the common header: type (1 byte), stock locate
// (2), tracking number (2), timestamp (6). Integers are big-endian.
type Message []byte

// Type returns the message type.
func (m Message) Type() Type { return Type(m[0]) }

// StockLocate returns the stock locate code: the day's index of the stock
// the message is about, 0 for market-wide messages.
func (m Message) StockLocate() uint16 { return be.Uint16(m[1:]) }

// TrackingNumber returns NASDAQ's internal tracking number.
func (m Message) TrackingNumber() uint16 { return be.Uint16(m[3:]) }

// Timestamp returns nanoseconds since midnight (of the trading day, US
// Eastern time).
// The 6 bytes at offset 5 are read as the low bytes of the 8 at offset 3:
// one load.
func (m Message) Timestamp() int64 { return int64(be.Uint64(m[3:11]) & (1<<48 - 1)) }

func stock(b []byte) feed.Symbol {
	var s feed.Symbol
	copy(s[:], b[:8])
	return s
}

// Stock returns the stock symbol of a message type that carries one, and
// whether it does. Types with a stock: R, H, Y, L, K, J, h, A, F, P, Q, I,
// N, O.
func (m Message) Stock() (feed.Symbol, bool) {
	switch m.Type() {
	case TypeStockDirectory, TypeTradingAction, TypeRegSHO, TypeIPOQuotingPeriod,
		TypeLULDAuctionCollar, TypeOperationalHalt, TypeRPII, TypeDLCR:
		return stock(m[11:]), true
	case TypeParticipantPosition:
		return stock(m[15:]), true
	case TypeAddOrder, TypeAddOrderMPID, TypeTrade:
		return stock(m[24:]), true
	case TypeCrossTrade:
		return stock(m[19:]), true
	case TypeNOII:
		return stock(m[28:]), true
	}
	return feed.Symbol{}, false
}

// Views of each message type. They embed Message, so the header accessors
// apply. Prices are Price(4) (4 implied decimals) unless named Price8.

// SystemEvent is an 'S' message.
type SystemEvent struct{ Message }

// SystemEvent returns m as a system event view.
func (m Message) SystemEvent() SystemEvent { return SystemEvent{m} }

// EventCode is 'O' start of messages, 'S' start of system hours, 'Q' start
// of market hours, 'M' end of market hours, 'E' end of system hours, 'C'
// end of messages.
func (m SystemEvent) EventCode() byte { return m.Message[11] }

// StockDirectory is an 'R' message.
type StockDirectory struct{ Message }

// StockDirectory returns m as a stock directory view.
func (m Message) StockDirectory() StockDirectory { return StockDirectory{m} }

// Stock returns the symbol.
func (m StockDirectory) Stock() feed.Symbol { return stock(m.Message[11:]) }

// MarketCategory returns the listing market: Q, G, S, N, A, P, Z, V or space.
func (m StockDirectory) MarketCategory() byte { return m.Message[19] }

// FinancialStatus returns the financial status indicator.
func (m StockDirectory) FinancialStatus() byte { return m.Message[20] }

// RoundLotSize returns the number of shares in a round lot.
func (m StockDirectory) RoundLotSize() uint32 { return be.Uint32(m.Message[21:]) }

// RoundLotsOnly returns 'Y' if only round lots are accepted.
func (m StockDirectory) RoundLotsOnly() byte { return m.Message[25] }

// IssueClassification returns the issue classification.
func (m StockDirectory) IssueClassification() byte { return m.Message[26] }

// IssueSubType returns the 2-character issue sub-type.
func (m StockDirectory) IssueSubType() [2]byte { return [2]byte(m.Message[27:29]) }

// Authenticity returns 'P' (production) or 'T' (test).
func (m StockDirectory) Authenticity() byte { return m.Message[29] }

// ShortSaleThreshold returns 'Y', 'N' or space.
func (m StockDirectory) ShortSaleThreshold() byte { return m.Message[30] }

// IPOFlag returns 'Y', 'N' or space.
func (m StockDirectory) IPOFlag() byte { return m.Message[31] }

// LULDReferencePriceTier returns '1', '2' or space.
func (m StockDirectory) LULDReferencePriceTier() byte { return m.Message[32] }

// ETPFlag returns 'Y', 'N' or space.
func (m StockDirectory) ETPFlag() byte { return m.Message[33] }

// ETPLeverageFactor returns the ETP leverage factor.
func (m StockDirectory) ETPLeverageFactor() uint32 { return be.Uint32(m.Message[34:]) }

// InverseIndicator returns 'Y' for an inverse ETP.
func (m StockDirectory) InverseIndicator() byte { return m.Message[38] }

// TradingAction is an 'H' message.
type TradingAction struct{ Message }

// TradingAction returns m as a stock trading action view.
func (m Message) TradingAction() TradingAction { return TradingAction{m} }

// Stock returns the symbol.
func (m TradingAction) Stock() feed.Symbol { return stock(m.Message[11:]) }

// TradingState returns 'H' halted, 'P' paused, 'Q' quotation only or 'T'
// trading.
func (m TradingAction) TradingState() byte { return m.Message[19] }

// Reserved returns the reserved byte.
func (m TradingAction) Reserved() byte { return m.Message[20] }

// Reason returns the 4-character reason code.
func (m TradingAction) Reason() [4]byte { return [4]byte(m.Message[21:25]) }

// RegSHO is a 'Y' message.
type RegSHO struct{ Message }

// RegSHO returns m as a Reg SHO restriction view.
func (m Message) RegSHO() RegSHO { return RegSHO{m} }

// Stock returns the symbol.
func (m RegSHO) Stock() feed.Symbol { return stock(m.Message[11:]) }

// Action returns '0' no price test, '1' restriction in effect (intraday
// drop), '2' restriction remains in effect.
func (m RegSHO) Action() byte { return m.Message[19] }

// ParticipantPosition is an 'L' message.
type ParticipantPosition struct{ Message }

// ParticipantPosition returns m as a market participant position view.
func (m Message) ParticipantPosition() ParticipantPosition { return ParticipantPosition{m} }

// MPID returns the market participant's 4-character id.
func (m ParticipantPosition) MPID() [4]byte { return [4]byte(m.Message[11:15]) }

// Stock returns the symbol.
func (m ParticipantPosition) Stock() feed.Symbol { return stock(m.Message[15:]) }

// PrimaryMarketMaker returns 'Y' or 'N'.
func (m ParticipantPosition) PrimaryMarketMaker() byte { return m.Message[23] }

// MarketMakerMode returns N, P, S, R or L.
func (m ParticipantPosition) MarketMakerMode() byte { return m.Message[24] }

// ParticipantState returns A, E, W, S or D.
func (m ParticipantPosition) ParticipantState() byte { return m.Message[25] }

// MWCBDeclineLevel is a 'V' message. Its levels are Price(8) index values,
// not prices of an instrument.
type MWCBDeclineLevel struct{ Message }

// MWCBDeclineLevel returns m as an MWCB decline level view.
func (m Message) MWCBDeclineLevel() MWCBDeclineLevel { return MWCBDeclineLevel{m} }

// Level1Price8 returns level 1, 8 implied decimals.
func (m MWCBDeclineLevel) Level1Price8() uint64 { return be.Uint64(m.Message[11:]) }

// Level2Price8 returns level 2, 8 implied decimals.
func (m MWCBDeclineLevel) Level2Price8() uint64 { return be.Uint64(m.Message[19:]) }

// Level3Price8 returns level 3, 8 implied decimals.
func (m MWCBDeclineLevel) Level3Price8() uint64 { return be.Uint64(m.Message[27:]) }

// MWCBStatus is a 'W' message.
type MWCBStatus struct{ Message }

// MWCBStatus returns m as an MWCB status view.
func (m Message) MWCBStatus() MWCBStatus { return MWCBStatus{m} }

// BreachedLevel returns '1', '2' or '3'.
func (m MWCBStatus) BreachedLevel() byte { return m.Message[11] }

// IPOQuotingPeriod is a 'K' message.
type IPOQuotingPeriod struct{ Message }

// IPOQuotingPeriod returns m as an IPO quoting period update view.
func (m Message) IPOQuotingPeriod() IPOQuotingPeriod { return IPOQuotingPeriod{m} }

// Stock returns the symbol.
func (m IPOQuotingPeriod) Stock() feed.Symbol { return stock(m.Message[11:]) }

// ReleaseTime returns the IPO quotation release time, seconds since midnight.
func (m IPOQuotingPeriod) ReleaseTime() uint32 { return be.Uint32(m.Message[19:]) }

// ReleaseQualifier returns 'A' anticipated or 'C' cancelled/postponed.
func (m IPOQuotingPeriod) ReleaseQualifier() byte { return m.Message[23] }

// Price returns the IPO price.
func (m IPOQuotingPeriod) Price() uint32 { return be.Uint32(m.Message[24:]) }

// LULDAuctionCollar is a 'J' message.
type LULDAuctionCollar struct{ Message }

// LULDAuctionCollar returns m as an LULD auction collar view.
func (m Message) LULDAuctionCollar() LULDAuctionCollar { return LULDAuctionCollar{m} }

// Stock returns the symbol.
func (m LULDAuctionCollar) Stock() feed.Symbol { return stock(m.Message[11:]) }

// ReferencePrice returns the auction collar reference price.
func (m LULDAuctionCollar) ReferencePrice() uint32 { return be.Uint32(m.Message[19:]) }

// UpperPrice returns the upper auction collar price.
func (m LULDAuctionCollar) UpperPrice() uint32 { return be.Uint32(m.Message[23:]) }

// LowerPrice returns the lower auction collar price.
func (m LULDAuctionCollar) LowerPrice() uint32 { return be.Uint32(m.Message[27:]) }

// Extension returns the auction collar extension count.
func (m LULDAuctionCollar) Extension() uint32 { return be.Uint32(m.Message[31:]) }

// OperationalHalt is an 'h' message.
type OperationalHalt struct{ Message }

// OperationalHalt returns m as an operational halt view.
func (m Message) OperationalHalt() OperationalHalt { return OperationalHalt{m} }

// Stock returns the symbol.
func (m OperationalHalt) Stock() feed.Symbol { return stock(m.Message[11:]) }

// MarketCode returns 'Q' Nasdaq, 'B' BX or 'X' PSX.
func (m OperationalHalt) MarketCode() byte { return m.Message[19] }

// Action returns 'H' halted or 'T' resumed.
func (m OperationalHalt) Action() byte { return m.Message[20] }

// AddOrder is an 'A' or 'F' message (F adds the attribution).
type AddOrder struct{ Message }

// AddOrder returns m, an 'A' or 'F' message, as an add order view.
func (m Message) AddOrder() AddOrder { return AddOrder{m} }

// OrderRef returns the order reference number, unique for the day.
func (m AddOrder) OrderRef() uint64 { return be.Uint64(m.Message[11:]) }

// Side returns 'B' buy or 'S' sell.
func (m AddOrder) Side() byte { return m.Message[19] }

// Shares returns the displayed quantity.
func (m AddOrder) Shares() uint32 { return be.Uint32(m.Message[20:]) }

// Stock returns the symbol.
func (m AddOrder) Stock() feed.Symbol { return stock(m.Message[24:]) }

// Price returns the limit price.
func (m AddOrder) Price() uint32 { return be.Uint32(m.Message[32:]) }

// Attribution returns the MPID of an 'F' message, and false for an 'A'.
func (m AddOrder) Attribution() ([4]byte, bool) {
	if m.Type() != TypeAddOrderMPID {
		return [4]byte{}, false
	}
	return [4]byte(m.Message[36:40]), true
}

// OrderExecuted is an 'E' or 'C' message (C adds printable and price).
type OrderExecuted struct{ Message }

// OrderExecuted returns m, an 'E' or 'C' message, as an order executed view.
func (m Message) OrderExecuted() OrderExecuted { return OrderExecuted{m} }

// OrderRef returns the executed order's reference number.
func (m OrderExecuted) OrderRef() uint64 { return be.Uint64(m.Message[11:]) }

// Shares returns the executed shares.
func (m OrderExecuted) Shares() uint32 { return be.Uint32(m.Message[19:]) }

// MatchNumber returns the day-unique match number.
func (m OrderExecuted) MatchNumber() uint64 { return be.Uint64(m.Message[23:]) }

// WithPrice returns the printable flag ('Y' or 'N') and execution price of a
// 'C' message, and ok false for an 'E' (executed at the order's price).
func (m OrderExecuted) WithPrice() (printable byte, price uint32, ok bool) {
	if m.Type() != TypeOrderExecutedPrice {
		return 0, 0, false
	}
	return m.Message[31], be.Uint32(m.Message[32:]), true
}

// OrderCancel is an 'X' message.
type OrderCancel struct{ Message }

// OrderCancel returns m as an order cancel view.
func (m Message) OrderCancel() OrderCancel { return OrderCancel{m} }

// OrderRef returns the order's reference number.
func (m OrderCancel) OrderRef() uint64 { return be.Uint64(m.Message[11:]) }

// Shares returns the canceled shares.
func (m OrderCancel) Shares() uint32 { return be.Uint32(m.Message[19:]) }

// OrderDelete is a 'D' message.
type OrderDelete struct{ Message }

// OrderDelete returns m as an order delete view.
func (m Message) OrderDelete() OrderDelete { return OrderDelete{m} }

// OrderRef returns the order's reference number.
func (m OrderDelete) OrderRef() uint64 { return be.Uint64(m.Message[11:]) }

// OrderReplace is a 'U' message.
type OrderReplace struct{ Message }

// OrderReplace returns m as an order replace view.
func (m Message) OrderReplace() OrderReplace { return OrderReplace{m} }

// OriginalRef returns the replaced order's reference number.
func (m OrderReplace) OriginalRef() uint64 { return be.Uint64(m.Message[11:]) }

// NewRef returns the new order's reference number.
func (m OrderReplace) NewRef() uint64 { return be.Uint64(m.Message[19:]) }

// Shares returns the new displayed quantity.
func (m OrderReplace) Shares() uint32 { return be.Uint32(m.Message[27:]) }

// Price returns the new limit price.
func (m OrderReplace) Price() uint32 { return be.Uint32(m.Message[31:]) }

// Trade is a 'P' message: an execution against a non-displayed order.
type Trade struct{ Message }

// Trade returns m as a non-cross trade view.
func (m Message) Trade() Trade { return Trade{m} }

// OrderRef returns the order reference (0 since NASDAQ stopped sending it).
func (m Trade) OrderRef() uint64 { return be.Uint64(m.Message[11:]) }

// Side returns the side of the non-displayed resting order: 'B' or 'S'.
func (m Trade) Side() byte { return m.Message[19] }

// Shares returns the executed shares.
func (m Trade) Shares() uint32 { return be.Uint32(m.Message[20:]) }

// Stock returns the symbol.
func (m Trade) Stock() feed.Symbol { return stock(m.Message[24:]) }

// Price returns the execution price.
func (m Trade) Price() uint32 { return be.Uint32(m.Message[32:]) }

// MatchNumber returns the day-unique match number.
func (m Trade) MatchNumber() uint64 { return be.Uint64(m.Message[36:]) }

// CrossTrade is a 'Q' message.
type CrossTrade struct{ Message }

// CrossTrade returns m as a cross trade view.
func (m Message) CrossTrade() CrossTrade { return CrossTrade{m} }

// Shares returns the shares matched in the cross.
func (m CrossTrade) Shares() uint64 { return be.Uint64(m.Message[11:]) }

// Stock returns the symbol.
func (m CrossTrade) Stock() feed.Symbol { return stock(m.Message[19:]) }

// Price returns the cross price.
func (m CrossTrade) Price() uint32 { return be.Uint32(m.Message[27:]) }

// MatchNumber returns the day-unique match number.
func (m CrossTrade) MatchNumber() uint64 { return be.Uint64(m.Message[31:]) }

// CrossType returns 'O' opening, 'C' closing, 'H' halt/IPO or 'I' intraday
// (extended) cross.
func (m CrossTrade) CrossType() byte { return m.Message[39] }

// BrokenTrade is a 'B' message.
type BrokenTrade struct{ Message }

// BrokenTrade returns m as a broken trade view.
func (m Message) BrokenTrade() BrokenTrade { return BrokenTrade{m} }

// MatchNumber returns the match number of the broken trade.
func (m BrokenTrade) MatchNumber() uint64 { return be.Uint64(m.Message[11:]) }

// NOII is an 'I' message: net order imbalance indicator.
type NOII struct{ Message }

// NOII returns m as a net order imbalance indicator view.
func (m Message) NOII() NOII { return NOII{m} }

// PairedShares returns the shares paired at the current reference price.
func (m NOII) PairedShares() uint64 { return be.Uint64(m.Message[11:]) }

// ImbalanceShares returns the shares not paired.
func (m NOII) ImbalanceShares() uint64 { return be.Uint64(m.Message[19:]) }

// ImbalanceDirection returns 'B', 'S', 'N' (none) or 'O' (insufficient
// orders).
func (m NOII) ImbalanceDirection() byte { return m.Message[27] }

// Stock returns the symbol.
func (m NOII) Stock() feed.Symbol { return stock(m.Message[28:]) }

// FarPrice returns the far price.
func (m NOII) FarPrice() uint32 { return be.Uint32(m.Message[36:]) }

// NearPrice returns the near price.
func (m NOII) NearPrice() uint32 { return be.Uint32(m.Message[40:]) }

// CurrentReferencePrice returns the current reference price.
func (m NOII) CurrentReferencePrice() uint32 { return be.Uint32(m.Message[44:]) }

// CrossType returns 'O', 'C', 'H' or 'A' (extended trading close).
func (m NOII) CrossType() byte { return m.Message[48] }

// PriceVariationIndicator returns the price variation indicator.
func (m NOII) PriceVariationIndicator() byte { return m.Message[49] }

// RPII is an 'N' message: retail price improvement indicator.
type RPII struct{ Message }

// RPII returns m as a retail price improvement indicator view.
func (m Message) RPII() RPII { return RPII{m} }

// Stock returns the symbol.
func (m RPII) Stock() feed.Symbol { return stock(m.Message[11:]) }

// InterestFlag returns 'B', 'S', 'A' (both) or 'N' (none).
func (m RPII) InterestFlag() byte { return m.Message[19] }

// DLCR is an 'O' message: direct listing with capital raise price
// discovery, added to ITCH 5.0 in 2020.
type DLCR struct{ Message }

// DLCR returns m as a DLCR price discovery view.
func (m Message) DLCR() DLCR { return DLCR{m} }

// Stock returns the symbol.
func (m DLCR) Stock() feed.Symbol { return stock(m.Message[11:]) }

// OpenEligibility returns 'Y' or 'N'.
func (m DLCR) OpenEligibility() byte { return m.Message[19] }

// MinimumAllowablePrice returns the minimum allowable price.
func (m DLCR) MinimumAllowablePrice() uint32 { return be.Uint32(m.Message[20:]) }

// MaximumAllowablePrice returns the maximum allowable price.
func (m DLCR) MaximumAllowablePrice() uint32 { return be.Uint32(m.Message[24:]) }

// NearExecutionPrice returns the near execution price.
func (m DLCR) NearExecutionPrice() uint32 { return be.Uint32(m.Message[28:]) }

// NearExecutionTime returns the near execution time, ns since midnight.
func (m DLCR) NearExecutionTime() uint64 { return be.Uint64(m.Message[32:]) }

// LowerPriceRangeCollar returns the lower price range collar.
func (m DLCR) LowerPriceRangeCollar() uint32 { return be.Uint32(m.Message[40:]) }

// UpperPriceRangeCollar returns the upper price range collar.
func (m DLCR) UpperPriceRangeCollar() uint32 { return be.Uint32(m.Message[44:]) }
