package subapp

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tickcast/tickcast/feed"
)

// Slow consumers (docs/slow-consumers.md): --handler-delay, a test
// facility, makes the handler slow; --conflate lets the subscriber keep up
// with such a handler by delivering each instrument's latest quote instead
// of every quote, and --verify then also checks that the last quote
// delivered of every instrument is the feed's last.

// spin holds the calling goroutine for d on the clock. A timer would
// resolve to about a millisecond; a handler delay is microseconds.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// lastQuotes keeps, per joined channel, the sequence of the last quote the
// handler got of each instrument and the first and last stream sequences it
// got, for the check of a conflating run. Its tables are allocated up
// front: noting a message allocates nothing.
type lastQuotes struct {
	quote       [][]uint64 // by channel, then instrument id
	first, last []uint64   // by channel
}

func newLastQuotes(channels, instruments int) *lastQuotes {
	q := &lastQuotes{quote: make([][]uint64, channels), first: make([]uint64, channels), last: make([]uint64, channels)}
	for c := range q.quote {
		q.quote[c] = make([]uint64, instruments+1)
	}
	return q
}

// note records stream message seq of channel ch.
func (q *lastQuotes) note(ch int, seq uint64, msg []byte) {
	if ch < 0 || ch >= len(q.quote) {
		return
	}
	if q.first[ch] == 0 {
		q.first[ch] = seq
	}
	q.last[ch] = max(q.last[ch], seq)
	if len(msg) < feed.HeaderLen || feed.Type(msg[0]) != feed.TypeQuote {
		return
	}
	if inst := binary.LittleEndian.Uint32(msg[4:]); int(inst) < len(q.quote[ch]) {
		q.quote[ch][inst] = max(q.quote[ch][inst], seq)
	}
}

// check compares, on every channel that got messages, the last quote of
// each instrument with the feed's last quote as of the channel's last
// sequence received (last), as the verifier computes it. An instrument
// whose last quote came before the first sequence received (a late join)
// is not checked. It returns how many instruments differ and the first
// difference.
func (h *handler) checkLastQuotes() (bad uint64, first error) {
	q := h.last
	for ch := range q.quote {
		if q.last[ch] == 0 {
			continue
		}
		for inst, seq := range h.v.LastQuotes(ch, q.last[ch]) {
			if seq < q.first[ch] || (int(inst) < len(q.quote[ch]) && q.quote[ch][inst] == seq) {
				continue
			}
			bad++
			if first == nil {
				got := uint64(0)
				if int(inst) < len(q.quote[ch]) {
					got = q.quote[ch][inst]
				}
				first = fmt.Errorf("verify: channel %d instrument %d: last quote delivered is seq %d, the feed's last is seq %d", ch, inst, got, seq)
			}
		}
	}
	return bad, first
}

// conflated returns how many quotes the subscriber conflated; 0 without
// --conflate, at no cost.
func (a *App) conflated() uint64 {
	if !a.s.Conflate {
		return 0
	}
	return a.sub.Stats().Conflated
}
