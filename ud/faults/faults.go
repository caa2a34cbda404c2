// Package faults wraps a ud.Receiver and injects seeded, reproducible
// transport faults: lost datagrams (single and in bursts), duplicated
// datagrams, adjacent reordering and a silent window. It is a test facility,
// for loss drills and for tickcast's own tests; nothing turns it on by
// default, and the reference subscriber uses it only when one of its
// --inject-* or --silence-line settings is given.
//
// # How the faults combine
//
// Each datagram the wrapped receiver delivers is judged once, in arrival
// order:
//
//  1. Silence: with Config.Silence, a datagram whose receive time (its slot's
//     RecvNs) falls in the silent window is dropped and counted as silenced;
//     nothing else applies to it.
//  2. Burst: while a burst is under way, the datagram is dropped.
//  3. Loss: otherwise it is dropped with probability Loss, and such a drop
//     starts a burst with probability Burst; the burst drops it and the
//     BurstLen-1 datagrams after it. With burst length N the long-run
//     fraction of datagrams dropped is Loss·(1+Burst·(N-1)) /
//     (1+Loss·Burst·(N-1)); without bursts it is Loss.
//  4. A datagram that is not dropped is, independently, delivered twice with
//     probability Dup and swapped with the next datagram with probability
//     Reorder. The swap is done only if the next datagram has already
//     arrived and survives steps 1-3 itself (the Receiver never waits for
//     it); otherwise the datagram is delivered in order and no swap is
//     counted. The next datagram, once swapped, is not swapped again, but
//     may be duplicated.
//
// The random choices come from a counter-based splitmix64 generator: the
// choices about the k-th datagram are a function of Config.Seed and k only, so
// a run is reproducible for a given seed and arrival order (reordering also
// depends on whether the next datagram had arrived, and silence on receive
// times). Dropped datagrams are counted both as datagrams and as the
// messages they carried, as Config.CountMessages counts them (for MoldUDP64,
// mold.MessageCount: 0 for heartbeats, end of session and datagrams that are
// not MoldUDP64), so a test can check that the messages a subscriber reports
// missing are exactly those the injector dropped.
//
// # Slots
//
// The Receiver lends the wrapped receiver's slots as they are, without
// copying: a duplicated datagram is the same slot shown twice, and a dropped
// datagram is never shown. The consumer's releases are turned into in-order
// releases of the wrapped receiver: a slot goes back only when every view of
// it and of every older slot has been released, and a dropped slot goes back
// at once when nothing older is still lent.
package faults

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tickcast/tickcast/ud"
)

// viewCap is the capacity of the queue of views (power of two).
const viewCap = 1024

// MaxPeek is how far ahead Peek can see: Peek(i) for i >= MaxPeek returns nil
// even when more datagrams are waiting. A consumer that reads batches with
// Peek(i) until nil and then releases them works unchanged; its batches are
// just at most MaxPeek long.
const MaxPeek = viewCap - 4

// Stats are the faults a Receiver injected.
type Stats struct {
	DroppedDatagrams  uint64 // datagrams dropped by Loss and bursts (not silence)
	DroppedMessages   uint64 // messages in those datagrams (Config.CountMessages)
	Duplicated        uint64 // datagrams delivered twice
	Reordered         uint64 // swaps of adjacent datagrams done
	Bursts            uint64 // bursts started
	SilencedDatagrams uint64 // datagrams dropped in the silent window
	SilencedMessages  uint64 // messages in those datagrams (Config.CountMessages)
}

// Add returns the field-by-field sum of s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		DroppedDatagrams:  s.DroppedDatagrams + o.DroppedDatagrams,
		DroppedMessages:   s.DroppedMessages + o.DroppedMessages,
		Duplicated:        s.Duplicated + o.Duplicated,
		Reordered:         s.Reordered + o.Reordered,
		Bursts:            s.Bursts + o.Bursts,
		SilencedDatagrams: s.SilencedDatagrams + o.SilencedDatagrams,
		SilencedMessages:  s.SilencedMessages + o.SilencedMessages,
	}
}

// view is one datagram as the consumer sees it.
type view struct {
	slot *ud.Slot
	idx  uint64 // the datagram's number in the wrapped receiver's order
}

// Receiver is a ud.Receiver that shows the datagrams of another one with
// faults injected. Peek, Release and Wait belong to one consumer goroutine,
// as for any receiver; Faults, Stats and Close may be called from any
// goroutine that may call them on the wrapped receiver.
//
// Peek(i) works for any i below MaxPeek. Release(n) may release datagrams
// not yet peeked, as on the real receivers.
//
// MaxDatagram, Stats, Close, Fill, RingLen, RingCap and SyncDrops are the
// wrapped receiver's (ud.Wrapper): Stats is the transport's view, which
// counts every datagram received, including those dropped here, and Fill
// returns how many datagrams arrived before faults.
type Receiver struct {
	ud.Wrapper // the wrapped receiver (Inner), and what passes through to it

	cfg Config

	// Thresholds: a choice with probability p is taken when the top 53
	// bits of the generator's output are below p·2^53.
	lossT, burstT, dupT, reorderT uint64
	silenceFrom, silenceTo        int64 // window relative to t0, ns; silenceTo < 0: open-ended

	// Consumer state.
	views     [viewCap]view
	vHead     uint64 // views released
	vTail     uint64 // views made
	judged    uint64 // datagrams of Inner judged (shown or dropped)
	released  uint64 // datagrams of Inner released
	burstLeft int    // datagrams the current burst still drops
	t0        int64  // RecvNs of the first datagram (silence)
	started   bool

	dropped, droppedMsgs, duplicated, reordered, bursts, silenced, silencedMsgs atomic.Uint64
}

var _ ud.Receiver = (*Receiver)(nil)

// Wrap returns a Receiver that shows r's datagrams with the faults cfg
// describes. The Receiver owns r from then on: use r only through it. cfg
// errors are *ConfigError.
func Wrap(r ud.Receiver, cfg Config) (*Receiver, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Receiver{
		Wrapper:     ud.Wrapper{Inner: r},
		cfg:         cfg,
		lossT:       threshold(cfg.Loss),
		burstT:      threshold(cfg.Burst),
		dupT:        threshold(cfg.Dup),
		reorderT:    threshold(cfg.Reorder),
		silenceFrom: int64(cfg.SilenceAfter),
		silenceTo:   -1,
	}
	if cfg.SilenceFor > 0 {
		w.silenceTo = int64(cfg.SilenceAfter + cfg.SilenceFor)
	}
	return w, nil
}

// Faults returns the faults injected so far.
func (r *Receiver) Faults() Stats {
	return Stats{
		DroppedDatagrams:  r.dropped.Load(),
		DroppedMessages:   r.droppedMsgs.Load(),
		Duplicated:        r.duplicated.Load(),
		Reordered:         r.reordered.Load(),
		Bursts:            r.bursts.Load(),
		SilencedDatagrams: r.silenced.Load(),
		SilencedMessages:  r.silencedMsgs.Load(),
	}
}

// Config returns the configuration in use (BurstLen with its default filled
// in).
func (r *Receiver) Config() Config { return r.cfg }

// Peek returns the i-th unreleased datagram's slot (0 = oldest) as the faults
// leave them, or nil when fewer than i+1 are waiting or i >= MaxPeek. It
// never blocks. The slot is the wrapped receiver's: a duplicated datagram
// is the same slot twice. Consumer only.
func (r *Receiver) Peek(i int) *ud.Slot {
	if i < 0 {
		return nil
	}
	for uint64(i) >= r.vTail-r.vHead {
		if !r.fill() {
			return nil
		}
	}
	return r.views[(r.vHead+uint64(i))%viewCap].slot
}

// Release hands back the n oldest unreleased datagrams. Slots of the
// wrapped receiver go back to it oldest first, as soon as no view of them or
// of an older slot is lent. It panics if fewer than n datagrams are waiting.
// Consumer only.
func (r *Receiver) Release(n int) {
	if n <= 0 {
		return
	}
	for uint64(n) > r.vTail-r.vHead {
		if !r.fill() {
			panic(fmt.Sprintf("faults: Release(%d) with only %d datagrams lent", n, r.vTail-r.vHead))
		}
	}
	r.vHead += uint64(n)
	r.releaseInner()
}

// Wait blocks until a datagram that survives the faults is waiting, the
// timeout passes, or the wrapped receiver is closed and drained (ud.ErrClosed).
// It returns nil at once when a datagram is ready to be shown, even if the
// wrapped receiver has nothing new. Consumer only.
func (r *Receiver) Wait(timeout time.Duration) error {
	if r.vTail != r.vHead || r.fill() {
		return nil
	}
	// Nothing is lent now, so everything judged has been released and the
	// wrapped receiver's Wait blocks until a new datagram arrives.
	if timeout <= 0 {
		return r.Inner.Wait(0)
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := r.Inner.Wait(timeout); err != nil {
			return err
		}
		if r.fill() {
			return nil
		}
		if timeout = time.Until(deadline); timeout <= 0 {
			return nil
		}
	}
}

// fill judges the wrapped receiver's next datagrams until one (or a swapped
// pair) is shown, and reports whether any was. It stops without showing
// anything when the wrapped receiver has no unjudged datagram or the view
// queue has no room for the worst case (a swapped pair, both duplicated).
func (r *Receiver) fill() bool {
	for viewCap-(r.vTail-r.vHead) >= 4 {
		s := r.Inner.Peek(int(r.judged - r.released))
		if s == nil {
			return false
		}
		k := r.judged
		r.judged++
		if r.drop(k, s) {
			if r.vTail == r.vHead {
				r.releaseInner() // nothing older is lent
			}
			continue
		}
		if r.chance(k, streamReorder, r.reorderT) {
			if next := r.Inner.Peek(int(r.judged - r.released)); next != nil {
				k2 := r.judged
				r.judged++
				if !r.drop(k2, next) {
					r.show(k2, next)
					r.reordered.Add(1)
				}
				// A dropped partner goes back with k, which is
				// older and still lent.
			}
		}
		r.show(k, s)
		return true
	}
	return false
}

// show appends datagram k's view, twice if Dup chooses it.
func (r *Receiver) show(k uint64, s *ud.Slot) {
	r.views[r.vTail%viewCap] = view{slot: s, idx: k}
	r.vTail++
	if r.chance(k, streamDup, r.dupT) {
		r.views[r.vTail%viewCap] = view{slot: s, idx: k}
		r.vTail++
		r.duplicated.Add(1)
	}
}

// drop decides whether datagram k, in slot s, is dropped, and counts it.
func (r *Receiver) drop(k uint64, s *ud.Slot) bool {
	if r.cfg.Silence && r.inSilence(s) {
		r.silenced.Add(1)
		r.silencedMsgs.Add(r.messages(s))
		return true
	}
	switch {
	case r.burstLeft > 0:
		r.burstLeft--
	case r.chance(k, streamLoss, r.lossT):
		if r.chance(k, streamBurst, r.burstT) {
			r.burstLeft = r.cfg.BurstLen - 1
			r.bursts.Add(1)
		}
	default:
		return false
	}
	r.dropped.Add(1)
	r.droppedMsgs.Add(r.messages(s))
	return true
}

// inSilence reports whether s was received in the silent window. A slot
// without a receive time (RecvNs 0) is taken as received now.
func (r *Receiver) inSilence(s *ud.Slot) bool {
	ts := s.RecvNs
	if ts == 0 {
		ts = time.Now().UnixNano()
	}
	if !r.started {
		r.started, r.t0 = true, ts
	}
	d := ts - r.t0
	return d >= r.silenceFrom && (r.silenceTo < 0 || d < r.silenceTo)
}

// releaseInner gives the wrapped receiver back every judged slot older than
// the oldest slot a lent view still shows.
//
// The views are in judging order except that a swapped pair shows k+1
// before k, so a view's datagram number is never more than one below that
// of any earlier view. The oldest slot still shown is therefore found
// within the first few views: once a view's number is two above the
// minimum so far, no later view can be below it.
func (r *Receiver) releaseInner() {
	frontier := r.judged
	for v := r.vHead; v != r.vTail; v++ {
		idx := r.views[v%viewCap].idx
		if idx < frontier {
			frontier = idx
		} else if idx > frontier+1 {
			break
		}
	}
	if frontier > r.released {
		r.Inner.Release(int(frontier - r.released))
		r.released = frontier
	}
}

// messages returns the number of messages in s's datagram as
// Config.CountMessages counts them, or 0 without it or when it does not
// recognize the datagram.
func (r *Receiver) messages(s *ud.Slot) uint64 {
	if r.cfg.CountMessages == nil {
		return 0
	}
	n, ok := r.cfg.CountMessages(s.Data())
	if !ok || n < 0 {
		return 0
	}
	return uint64(n)
}

// Generator streams: each choice about a datagram has its own.
const (
	streamLoss = iota
	streamBurst
	streamDup
	streamReorder
	numStreams
)

const golden = 0x9e3779b97f4a7c15

// chance reports whether the choice of the given stream about datagram k is
// taken, with threshold t (see threshold). It is the splitmix64 sequence
// of the seed, indexed by (k, stream), so it needs no state.
func (r *Receiver) chance(k uint64, stream int, t uint64) bool {
	if t == 0 {
		return false
	}
	return mix(r.cfg.Seed+(k*numStreams+uint64(stream)+1)*golden)>>11 < t
}

// threshold turns probability p into a threshold for 53-bit uniform values.
func threshold(p float64) uint64 { return uint64(p * (1 << 53)) }

// mix is splitmix64's output function.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// DeriveSeed returns a seed for one of several receivers from a common seed
// and a key that tells the receivers apart (a group's address and port, for
// example), so that each receiver's faults are independent of the others'.
func DeriveSeed(seed, key uint64) uint64 {
	return mix(mix(seed+golden) ^ (key+1)*golden)
}
