package tickcast

import (
	"encoding/binary"
	"slices"

	"github.com/tickcast/tickcast/feed"
)

// Symbol filters (SubscriberConfig.Symbols).
//
// A channel carries every instrument whose symbol feed.ChannelOf maps to it;
// a subscriber that wants a few of them joins their channels and filters
// each one's messages. The normalized header names an instrument by its id
// only, so each channel learns which ids are wanted from the definitions as
// they pass (stream, recovery and snapshot alike): a definition whose symbol
// is wanted marks its id, any other definition unmarks it. A message of an
// unmarked id, or of an id of maxTrackedInstrument or more, is filtered:
// counted (SubscriberStats.Filtered) and not handed to the handler, with no
// per-instrument gap check. The table is one bit per id below
// maxTrackedInstrument, allocated when the channel is joined, so filtering
// allocates nothing per message.
//
// Gap detection and recovery do not look at the filter: a lost range's
// instruments are unknown until it is recovered, so every gap is requested,
// and its recovered messages are filtered as they are released.

// symbolSet is the set of wanted symbols; nil means no filter.
type symbolSet map[feed.Symbol]struct{}

// newSymbolSet returns the set of symbols, nil for none. The symbols must
// have passed SubscriberConfig.validate.
func newSymbolSet(symbols []string) symbolSet {
	if len(symbols) == 0 {
		return nil
	}
	set := make(symbolSet, len(symbols))
	for _, s := range symbols {
		sym, _ := feed.MakeSymbol(s)
		set[sym] = struct{}{}
	}
	return set
}

// channelFilter is one joined channel's filter: the ids its definitions
// named a wanted symbol, and how many stream messages it held back. It also
// keeps what UnseenSymbols reports: which wanted symbols a definition named,
// and how many instruments the channel's definitions named.
type channelFilter struct {
	want     symbolSet
	wanted   []uint64 // bit id%64 of word id/64: instrument id is wanted
	filtered uint64   // stream messages (recovered ones included) held back

	seen     map[feed.Symbol]bool // every wanted symbol: a definition named it
	defined  []uint64             // bit per id, as wanted: a definition named it
	ndefined int                  // ids in defined
	examples [4]feed.Symbol       // the first symbols defined, for messages
}

// newChannelFilter returns the filter of a channel for want (nil: none).
func newChannelFilter(want symbolSet) channelFilter {
	if want == nil {
		return channelFilter{}
	}
	seen := make(map[feed.Symbol]bool, len(want))
	for sym := range want {
		seen[sym] = false // every key now, so that marking one allocates nothing
	}
	return channelFilter{want: want, wanted: make([]uint64, maxTrackedInstrument/64),
		seen: seen, defined: make([]uint64, maxTrackedInstrument/64)}
}

// pass reports whether msg goes to the handler. A definition first marks or
// unmarks its instrument. Without a filter every message passes.
func (f *channelFilter) pass(msg []byte) bool {
	if f.want == nil {
		return true
	}
	if len(msg) < feed.HeaderLen {
		return false
	}
	inst := binary.LittleEndian.Uint32(msg[4:])
	if inst >= maxTrackedInstrument {
		return false
	}
	word, bit := inst/64, uint64(1)<<(inst%64)
	if feed.Type(msg[0]) == feed.TypeDefinition && len(msg) >= feed.DefinitionLen {
		var sym feed.Symbol
		copy(sym[:], msg[feed.HeaderLen:])
		if f.defined[word]&bit == 0 {
			f.defined[word] |= bit
			if f.ndefined < len(f.examples) {
				f.examples[f.ndefined] = sym
			}
			f.ndefined++
		}
		if _, ok := f.want[sym]; ok {
			f.wanted[word] |= bit
			f.seen[sym] = true
		} else {
			f.wanted[word] &^= bit
		}
	}
	return f.wanted[word]&bit != 0
}

// stream is pass for a stream message (live or recovered): one that does
// not pass is counted as filtered.
func (f *channelFilter) stream(msg []byte) bool {
	if f.pass(msg) {
		return true
	}
	f.filtered++
	return false
}

// filtered returns the messages the symbol filter held back on every
// channel (SubscriberStats.Filtered), without Stats' other work.
func (s *Subscriber) filtered() uint64 {
	n := uint64(0)
	for _, sc := range s.chans {
		n += sc.filter.filtered
	}
	return n
}

// SymbolCoverage says which of a symbol filter's symbols the joined
// channels have defined (Subscriber.SymbolCoverage).
type SymbolCoverage struct {
	// Unseen are the symbols of SubscriberConfig.Symbols that no definition
	// released on the joined channels named, in the order configured: the
	// subscriber hands on nothing of them.
	Unseen []string
	// Defined is the number of instruments the definitions released on the
	// joined channels named (each id once per channel).
	Defined int
	// Examples are a few of the symbols defined, in the order they came.
	Examples []string
}

// SymbolCoverage reports, for a subscriber with SubscriberConfig.Symbols,
// which wanted symbols no definition has named so far: a symbol the feed
// does not carry, or whose definition has not arrived yet, receives
// nothing. Without a filter it returns the zero SymbolCoverage. Call it
// from the goroutine of Poll and Run, or after Run returned.
func (s *Subscriber) SymbolCoverage() SymbolCoverage {
	var c SymbolCoverage
	if len(s.cfg.Symbols) == 0 {
		return c
	}
	for _, sym := range s.cfg.Symbols {
		want, _ := feed.MakeSymbol(sym)
		seen := false
		for _, sc := range s.chans {
			seen = seen || sc.filter.seen[want]
		}
		if !seen && !slices.Contains(c.Unseen, sym) {
			c.Unseen = append(c.Unseen, sym)
		}
	}
	for _, sc := range s.chans {
		f := &sc.filter
		c.Defined += f.ndefined
		for _, sym := range f.examples[:min(f.ndefined, len(f.examples))] {
			if len(c.Examples) < len(f.examples) {
				c.Examples = append(c.Examples, sym.String())
			}
		}
	}
	return c
}
