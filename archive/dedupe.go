package archive

import "github.com/tickcast/tickcast/mold"

// coverage is what a replay has delivered of each session, and the loss
// records it met, as sorted runs of messages. Two hot-hot feed handlers
// record the same sessions, each in packets and records of its own
// boundaries, so the archive holds most messages twice: a replay delivers
// a packet only if it carries a message not delivered yet, and counts as
// lost only the messages of loss records that no packet delivered covers.
// The runs grow with the holes in what is delivered, not with the
// packets: a session delivered without a hole is one run.
type coverage struct {
	sessions []sessionCoverage
	last     int // index of the session met last
}

type sessionCoverage struct {
	session   mold.Session
	delivered []span
	lost      []span
	ended     bool // its end of session delivered
}

// span is the messages [first, next).
type span struct{ first, next uint64 }

// of returns s's coverage, adding it when first met.
func (c *coverage) of(s mold.Session) *sessionCoverage {
	if c.last < len(c.sessions) && c.sessions[c.last].session == s {
		return &c.sessions[c.last]
	}
	for i := range c.sessions {
		if c.sessions[i].session == s {
			c.last = i
			return &c.sessions[i]
		}
	}
	c.sessions = append(c.sessions, sessionCoverage{session: s})
	c.last = len(c.sessions) - 1
	return &c.sessions[c.last]
}

// fresh reports whether the packet with header h carries a message not
// delivered yet (or is its session's first end of session), and counts
// its messages delivered. A packet partly delivered already is fresh: the
// subscriber's sequence tracker drops what it has seen.
func (c *coverage) fresh(h mold.Header) bool {
	sc := c.of(h.Session)
	n := uint64(h.Messages())
	if n == 0 {
		if h.IsEndOfSession() && !sc.ended {
			sc.ended = true
			return true
		}
		return !h.IsEndOfSession()
	}
	if covers(sc.delivered, h.Seq, h.Seq+n) {
		return false
	}
	sc.delivered = addSpan(sc.delivered, h.Seq, h.Seq+n)
	return true
}

// lose notes a loss record of session s's messages [first, next).
func (c *coverage) lose(s mold.Session, first, next uint64) {
	sc := c.of(s)
	sc.lost = addSpan(sc.lost, first, next)
}

// lost returns the messages of the loss records met that no delivered
// packet carried.
func (c *coverage) lost() uint64 {
	var n uint64
	for _, sc := range c.sessions {
		for _, l := range sc.lost {
			n += l.next - l.first
			for _, d := range sc.delivered {
				if lo, hi := max(l.first, d.first), min(l.next, d.next); lo < hi {
					n -= hi - lo
				}
			}
		}
	}
	return n
}

// covers reports whether the sorted, disjoint spans hold all of
// [first, next).
func covers(spans []span, first, next uint64) bool {
	for i := len(spans) - 1; i >= 0; i-- {
		if spans[i].first <= first {
			return next <= spans[i].next
		}
	}
	return false
}

// addSpan adds [first, next) to the sorted, disjoint spans, merging the
// spans it touches. The usual packet extends the last span in place.
func addSpan(spans []span, first, next uint64) []span {
	if k := len(spans); k > 0 && spans[k-1].first <= first && first <= spans[k-1].next {
		spans[k-1].next = max(spans[k-1].next, next)
		return spans
	}
	out := spans[:0:0]
	placed := false
	for _, s := range spans {
		switch {
		case s.next < first:
			out = append(out, s)
		case next < s.first:
			if !placed {
				out, placed = append(out, span{first, next}), true
			}
			out = append(out, s)
		default: // touching or overlapping: merged into the new span
			first, next = min(first, s.first), max(next, s.next)
		}
	}
	if !placed {
		out = append(out, span{first, next})
	}
	return out
}
