// Package itch reads NASDAQ TotalView-ITCH 5.0, keeps its order books and
// normalizes it into feed messages.
//
// # Layers
//
// The package has four layers, each usable on its own:
//
//   - Reader splits NASDAQ's file format (repeated big-endian uint16 length +
//     message; Decompress first if the file may be gzipped) into messages
//     without copying them.
//   - Parse checks a message's length against its type and returns a Message,
//     a zero-copy view; typed views (m.AddOrder(), m.StockDirectory(), ...)
//     read each field from the bytes when asked. Every ITCH 5.0 type is known,
//     including the later additions (LULD auction collar 'J', operational
//     halt 'h', RPII 'N', DLCR 'O'). A message of any other type is skipped
//     and counted; a message whose length does not match its type is an
//     error (*FormatError) that names the type, the byte offset of its
//     length prefix and the field ("length").
//   - Books holds every live order by reference and the aggregated price
//     levels of each stock's book.
//   - Source drives the three and implements feed.Source.
//
// # Order books
//
// ITCH order references are unique across all stocks for the day, so one
// order table, keyed by reference, serves every stock; each order keeps its
// stock locate, side, price and remaining shares, and the locate selects the
// stock's book of aggregated levels (price, shares, orders). The events:
//
//	A, F  add order                new order; its side is given
//	E     executed                 shares off; the order leaves at zero
//	C     executed with price      same, but the print has its own price
//	X     cancel                   shares off (a partial cancel; all = gone)
//	D     delete                   the order leaves
//	U     replace                  the original leaves; the new reference
//	                               rests on the original's side at the new
//	                               price and size
//
// The table has a fixed capacity (Config.OrderCapacity), allocated up front:
// the hot path never allocates. Books.Orders and Books.HighWater report its
// occupancy; an add that does not fit is refused and counted (TableFull), and
// its order stays unknown.
//
// # Starting mid-day
//
// A feed joined after the start of the day references orders it never saw
// added. Such an event is counted per ITCH type (Stats.UnknownOrder) and
// changes nothing: an execution of an unknown order cannot be priced, so no
// trade is published; a replace of an unknown order cannot be placed (its
// side is unknown), so the new reference is unknown too, and so is every
// later event on it. Impossible events (a duplicate reference, more shares
// executed than the order holds, an order of another stock) are counted and
// kept from corrupting the books; nothing panics.
//
// Whether quotes carry feed.FlagBookIncomplete is decided by one rule
// (Config.Start): with StartAuto, the input holds the whole day exactly when
// its first message is system event 'O' (start of messages); otherwise every
// quote is flagged. Whatever the start mode, the first unknown order
// reference proves the books incomplete, and every later quote is flagged.
// StartOfDay and StartMidDay override the first-message test.
//
// A MessageReader fed by the network reports input lost for good (an
// upstream gap nobody could fill) by returning ErrLost from Next: the
// Source then publishes, for every instrument defined so far, a status
// flagged feed.FlagBookIncomplete with reason LOST (LossReason), and flags
// every later quote, as the books may now be wrong. A reader that has
// nothing yet returns feed.ErrIdle, which Next passes on.
//
// # Normalization
//
// Instrument ids are ITCH stock locates. ExchangeNs is ITCH's timestamp as
// it is: nanoseconds since midnight (US Eastern) of the trading day, not a
// Unix time. Prices are Price(4) as they are, with PriceScale 4 in every
// definition. RecvNs is Config.Clock when the ITCH message was read, or,
// from a live feed, when the message arrived (NewMessageSource).
//
//	R  stock directory      definition: symbol, price scale 4, market
//	                        category, round lot
//	H  trading action       status: state H/P/Q/T as ITCH gives it, reason
//	                        code as ITCH gives it
//	Y  Reg SHO              status: the last state from H ('?' if none),
//	                        reason "SHO" + action ('0', '1', '2')
//	h  operational halt     status: H (halt) or T (resume), reason "OPH" +
//	                        market code ('Q', 'B', 'X')
//	S  system event         status for every instrument defined so far: its
//	                        last state from H ('?' if none), reason "SYS" +
//	                        event code ('O', 'S', 'Q', 'M', 'E', 'C')
//	E  executed             trade at the resting order's price; aggressor
//	                        is the side opposite the resting order
//	C  executed with price  trade at the execution price when printable
//	                        ('Y'); a non-printable one moves the book only
//	P  non-cross trade      trade; aggressor opposite the non-displayed
//	                        order's side
//	Q  cross trade          trade flagged feed.FlagCross, aggressor unknown;
//	                        a cross of zero shares publishes nothing
//	B  broken trade         trade bust naming the match number
//	A F E C X D U           with Config.Depth N, a level delta for each of
//	                        the side's top N levels that changed (below);
//	                        then a quote whenever the stock's best bid or
//	                        ask price or size changed
//	V W                     nothing (market-wide; Price(8) levels are index
//	                        values, not instrument prices)
//	L K J I N O             nothing yet (NOII is not normalized)
//
// # Depth
//
// With Config.Depth N (1..MaxDepth), each order event is followed by level
// deltas (feed.TypeLevelDelta) for its side: the differences between the
// side's top N levels before and after the event, best first. A price only
// in the top after is new (a new level, or one pulled up into the top); a
// price only in the top before is deleted (gone, or pushed below the top),
// with zero orders and size; a price in both whose orders or shares changed
// is changed. Subscribers apply them by price (docs/wire-format.md,
// "Applying level deltas"; package book). The deltas come after the
// event's trade and before its quote, and carry feed.FlagBookIncomplete as
// the quote does. One event makes at most four. An event that touches one
// level (all but a replace) gets its deltas from what the book did to that
// level, in O(1); a replace, which touches two, merges a copy of the top
// taken before it with the top after, in O(N). Nothing is allocated.
//
// Every instrument gets a definition before any other message about it, as
// feed.Source requires. A stock without a stock directory message (a feed
// joined mid-day) gets a provisional definition, flagged
// feed.FlagProvisional, from the first message that names the stock (add,
// trade, cross, NOII, and any other type with a stock field): symbol and
// price scale 4, market category 0 and round lot 0 (unknown). A later stock
// directory message publishes the full definition. A message about a stock
// locate that no message has named (a broken trade can be one) cannot be
// published and is counted (Stats.Undefined).
//
// Per-instrument sequence numbers (InstSeq) are not set here: the publisher
// numbers each instrument's messages on its channel.
package itch
