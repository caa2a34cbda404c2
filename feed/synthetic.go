package feed

import (
	"fmt"
	"github.com/tickcast/tickcast/config"
	"io"
	"time"
)

// SyntheticConfig configures a Synthetic source.
type SyntheticConfig struct {
	// Seed makes the stream; the same seed, instruments and channels give the
	// same messages.
	Seed uint64
	// Instruments is the number of instruments,
	// 1..MaxSyntheticInstruments; ids are 1..N.
	Instruments int
	// Channels is the number of channels the instruments are spread over by
	// ChannelOf, 1..config.MaxChannels.
	Channels int
	// Count is the number of messages to emit in all; 0 means no limit.
	Count uint64
}

// MaxSyntheticInstruments is the most instruments a Synthetic source
// names: its symbols are four letters.
const MaxSyntheticInstruments = 26 * 26 * 26 * 26

var syntheticCheck = config.Checker{Pkg: "feed", Struct: "SyntheticConfig"}

// validate checks c. SyntheticConfig has no defaults: every field but Count
// is required.
func (c SyntheticConfig) validate() error {
	if c.Instruments < 1 || c.Instruments > MaxSyntheticInstruments {
		return syntheticCheck.Invalid("Instruments", c.Instruments, "want 1..%d", MaxSyntheticInstruments)
	}
	return syntheticCheck.Channels("Channels", c.Channels)
}

// Synthetic is a deterministic, verifiable source of plausible market data.
//
// Each channel's stream is a pure function of (seed, instruments, channels,
// channel, channel sequence number), computed by Expect: anyone who knows the
// configuration can recompute any message from its channel and sequence
// number alone, without replaying the stream. The layout of a channel c with
// instruments I_c (ascending ids, n = len(I_c)) is:
//
//   - sequences 1..n are the definitions of I_c in order (InstSeq 1);
//   - sequence s > n belongs to round r = (s-n-1)/n and position
//     p = (s-n-1) mod n; the instrument is I_c[π_r(p)] for a pseudo-random
//     permutation π_r of 0..n-1, so every instrument appears once per round in
//     a different order each round, and its InstSeq is r+2;
//   - one message in five is a trade at the touch (aggressor chosen at
//     random), the others are quotes; an instrument's prices follow a
//     multi-scale random walk over rounds, so they wander like a market but any
//     round's price is computed directly.
//
// Next interleaves the channels that have instruments round-robin, so a
// publisher that numbers each channel's messages from 1 gives every message
// exactly the sequence number Expect uses. Receive and send timestamps are
// not part of the function: Next stamps RecvNs with the wall clock.
type Synthetic struct {
	cfg      SyntheticConfig
	byChan   [][]uint32 // instrument ids per channel, ascending
	active   []int      // channels with at least one instrument
	emitted  uint64
	clock    func() int64
	symbols  []Symbol // index id-1
	basePx   []int64  // per instrument, in ticks
	channels []int    // per instrument (id-1)
	walks    []walk   // per instrument (id-1): the last round's steps
}

// walk caches an instrument's random steps of the last round computed. The
// step at level L depends only on round>>L, so from one round to the next
// only about two levels change; the rest are reused. The cache changes no
// result: Expect stays a pure function of its arguments.
type walk struct {
	valid bool
	round uint64
	steps [walkLevels]int64
}

const walkLevels = 16

// NewSynthetic returns a synthetic source.
func NewSynthetic(cfg SyntheticConfig) (*Synthetic, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Synthetic{
		cfg:      cfg,
		byChan:   make([][]uint32, cfg.Channels),
		symbols:  make([]Symbol, cfg.Instruments),
		basePx:   make([]int64, cfg.Instruments),
		channels: make([]int, cfg.Instruments),
		walks:    make([]walk, cfg.Instruments),
		clock:    NewWallClock(),
	}
	offset := cfg.Seed % (26 * 26 * 26 * 26)
	for i := 0; i < cfg.Instruments; i++ {
		// Four letters: distinct for distinct ids, shifted by the seed.
		v := (uint64(i) + offset) % (26 * 26 * 26 * 26)
		var sym Symbol
		for j := 3; j >= 0; j-- {
			sym[j] = byte('A' + v%26)
			v /= 26
		}
		for j := 4; j < len(sym); j++ {
			sym[j] = ' '
		}
		g.symbols[i] = sym
		// Base price between $5.00 and $505.00, in $0.01 ticks.
		g.basePx[i] = 500 + int64(mix(cfg.Seed, 0xba5e, uint64(i+1), 0)%50000)
		c := ChannelOf(sym, cfg.Channels)
		g.channels[i] = c
		g.byChan[c] = append(g.byChan[c], uint32(i+1))
	}
	for c, ids := range g.byChan {
		if len(ids) > 0 {
			g.active = append(g.active, c)
		}
	}
	return g, nil
}

// Config returns the source's configuration.
func (g *Synthetic) Config() SyntheticConfig { return g.cfg }

// ChannelInstruments returns the ids of channel c's instruments, ascending.
func (g *Synthetic) ChannelInstruments(c int) []uint32 { return g.byChan[c] }

// Symbol returns the symbol of instrument id.
func (g *Synthetic) Symbol(id uint32) Symbol { return g.symbols[id-1] }

// ActiveChannels returns the channels that carry messages, ascending.
func (g *Synthetic) ActiveChannels() []int { return g.active }

// ChannelCount returns how many messages channel c receives when the source
// emits its full Count (0 if Count is 0: unlimited).
func (g *Synthetic) ChannelCount(c int) uint64 {
	if g.cfg.Count == 0 || len(g.byChan[c]) == 0 {
		return 0
	}
	k := uint64(len(g.active))
	idx := uint64(0)
	for i, a := range g.active {
		if a == c {
			idx = uint64(i)
		}
	}
	n := g.cfg.Count / k
	if idx < g.cfg.Count%k {
		n++
	}
	return n
}

// Next emits the next message, or io.EOF after Count messages.
func (g *Synthetic) Next(m *Msg) error {
	if g.cfg.Count != 0 && g.emitted >= g.cfg.Count {
		return io.EOF
	}
	k := uint64(len(g.active))
	c := g.active[g.emitted%k]
	seq := g.emitted/k + 1
	g.emitted++
	g.Expect(c, seq, m)
	m.RecvNs = g.clock()
	return nil
}

// Emitted returns how many messages Next has emitted.
func (g *Synthetic) Emitted() uint64 { return g.emitted }

// SyntheticEpochNs is the exchange timestamp of sequence 0 of every channel:
// 2026-01-02 14:30:00 UTC. Message s of channel c is stamped
// SyntheticEpochNs + s·1000 + c.
const SyntheticEpochNs = 1767364200 * int64(time.Second)

// Expect fills m with message seq (1-based) of channel c, as the function of
// the configuration described on Synthetic. RecvNs and SendNs are set to 0.
// It panics if c has no instruments or seq is 0.
func (g *Synthetic) Expect(c int, seq uint64, m *Msg) {
	ids := g.byChan[c]
	n := uint64(len(ids))
	if n == 0 || seq == 0 {
		panic(fmt.Sprintf("feed: synthetic: no message %d on channel %d", seq, c))
	}
	m.Version = Version
	m.ExchangeNs = SyntheticEpochNs + int64(seq)*1000 + int64(c)
	m.RecvNs = 0
	m.SendNs = 0
	m.Flags = 0
	if seq <= n {
		id := ids[seq-1]
		m.Type = TypeDefinition
		m.Instrument = id
		m.InstSeq = 1
		m.Def = Definition{Symbol: g.symbols[id-1], PriceScale: 4, MarketCategory: 'Q', RoundLot: 100}
		return
	}
	k := seq - n - 1
	round, pos := k/n, k%n
	id := ids[permute(g.cfg.Seed, uint64(c), round, pos, n)]
	m.Instrument = id
	m.InstSeq = uint32(round + 2)
	h := mix(g.cfg.Seed, uint64(c), seq, 0x7e57)
	bid, ask := g.touch(id, round)
	const tick = 100 // $0.01 in 10^-4 units
	if h%5 == 0 {
		m.Type = TypeTrade
		m.Trade.Size = 100 * (1 + (h>>8)%10)
		m.Trade.MatchID = uint64(c)<<40 | seq
		if (h>>16)&1 == 0 {
			m.Trade.Aggressor = SideBuy
			m.Trade.Px = ask * tick
		} else {
			m.Trade.Aggressor = SideSell
			m.Trade.Px = bid * tick
		}
		return
	}
	m.Type = TypeQuote
	m.Flags = FlagBidPresent | FlagAskPresent
	m.Quote = Quote{
		BidPx:   bid * tick,
		BidSize: 100 * (1 + (h>>8)%20),
		AskPx:   ask * tick,
		AskSize: 100 * (1 + (h>>24)%20),
	}
}

// touch returns instrument id's bid and ask in ticks for a round: a sum of
// random steps at 16 time scales (step size growing with the square root of
// the scale), which wanders like a random walk yet needs no history.
func (g *Synthetic) touch(id uint32, round uint64) (bid, ask int64) {
	w := &g.walks[id-1]
	mid := g.basePx[id-1] * 4 // quarter ticks, for finer walks
	amp := int64(1)
	for lvl := uint64(0); lvl < walkLevels; lvl++ {
		if !w.valid || w.round>>lvl != round>>lvl {
			w.steps[lvl] = int64(mix(g.cfg.Seed, uint64(id), lvl, round>>lvl)%5) - 2
		}
		mid += w.steps[lvl] * amp
		if lvl%2 == 1 {
			amp *= 2
		}
	}
	w.valid, w.round = true, round
	mid /= 4
	if mid < 10 {
		mid = 10
	}
	spread := 1 + int64(mix(g.cfg.Seed, uint64(id), 0x5b, round)%3)
	return mid, mid + spread
}

// mix hashes four words into one (splitmix64 finalizer over a running state).
func mix(a, b, c, d uint64) uint64 {
	h := a ^ 0x9e3779b97f4a7c15
	for _, v := range [...]uint64{b, c, d} {
		h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// permute maps pos to a position in 0..n-1, a different bijection for each
// round: pos·a + b mod n with a coprime to n.
func permute(seed, c, round, pos, n uint64) uint64 {
	if n == 1 {
		return 0
	}
	h := mix(seed, c, round, 0x9e47)
	a := 1 + h%(n-1)
	for gcd(a, n) != 1 {
		a++
		if a >= n {
			a = 1
		}
	}
	b := (h >> 32) % n
	return (pos%n*a + b) % n
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
