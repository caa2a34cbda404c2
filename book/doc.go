// Package book keeps a subscriber's copy of the feed handler's order books:
// per instrument, the top price levels of each side, built from the level
// deltas (feed.TypeLevelDelta) the feed handler publishes and the levels a
// recovery snapshot carries, and answers best bid and offer and depth
// queries.
//
// The feed handler publishes, for each instrument, the changes of its top
// N levels per side (cmd/feedhandler --depth N): after each upstream
// event, one delta per level of the top N whose price, shares or orders
// changed, including a level that enters the top N (new) or leaves it
// (deleted) because a level above it came or went. Deltas apply by price
// (docs/wire-format.md, "Applying level deltas"): new and changed set the
// level at the delta's price, deleted removes it. A book that has applied
// every delta of its instrument since the last snapshot holds exactly the
// feed handler's top N levels of each side, at the same channel sequence.
//
// A handler keeps one Books per channel and feeds it every message,
// snapshot messages (sequence 0) included:
//
//	func (h *handler) Message(ch int, seq uint64, msg []byte, recvNs int64) {
//		if err := h.books[ch].Apply(msg); err != nil {
//			// the book missed deltas: see below
//		}
//	}
//
//	func (h *handler) Event(ev *tickcast.Event) {
//		switch ev.Kind {
//		case tickcast.EventSnapshot, tickcast.EventSessionStart:
//			h.books[ev.Channel].Reset()
//		}
//	}
//
// A snapshot carries every level of the top N of each instrument as a new
// level, after the instrument's definition, status, quote and trade, so a
// book reset at the snapshot event and fed its messages equals the feed
// handler's at the snapshot's sequence. Conflation
// (tickcast.ConflateConfig) delivers each level's latest state and keeps
// books right, although a side may briefly hold more than N levels while
// held deltas are delivered.
//
// A range reported lost (tickcast.EventLost, and tickcast.EventInstrumentGap
// naming the instruments it touched) leaves those instruments' books
// wrong until the next snapshot; Apply returns an *Error when a delta does
// not fit its book, which is how a missed delta usually shows.
//
// docs/book.md describes the package and how it is checked against the
// feed handler's books.
package book
