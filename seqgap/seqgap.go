// Package seqgap tracks the sequence numbers of one MoldUDP64 stream (a
// channel) as its packets arrive, possibly on two lines (A and B):
//
//   - messages are released once, in sequence order;
//   - a packet whose messages were all released before is a duplicate and is
//     counted; a packet that overlaps what was released has its released part
//     skipped;
//   - a packet that starts past the next expected sequence opens a gap,
//     reported as the exact range of missing sequence numbers;
//   - a heartbeat or end of session carries the stream's next sequence, so a
//     loss of the last packets before a quiet period is a gap too (a tail gap);
//   - a packet of another session starts a new stream: the old one is
//     reported as ended cleanly (its end of session was seen) or abruptly
//     (with the last sequence received).
//
// Tracker does the bookkeeping only; the caller owns the packets, calls it
// once per packet header, and releases the messages it is told to. It never
// allocates. This version moves past a gap at once (the missing range is
// reported, and recovery fills it out of band); the reorder window and
// recovery deadlines build on the same calls.
package seqgap

import (
	"fmt"

	"github.com/tickcast/tickcast/mold"
)

// Range is the inclusive range of sequence numbers From..To. Sequence
// numbers start at 1, so the zero Range is empty.
type Range struct {
	From, To uint64
}

// Len returns the number of sequence numbers in r.
func (r Range) Len() uint64 {
	if r.From == 0 || r.To < r.From {
		return 0
	}
	return r.To - r.From + 1
}

func (r Range) String() string { return fmt.Sprintf("%d..%d", r.From, r.To) }

// Verdict tells the caller what to do with one packet.
type Verdict struct {
	// Skip is how many leading messages of the packet were released before
	// and must be dropped.
	Skip int
	// Release is how many messages after Skip to release, in order.
	Release int
	// Gap is the range the packet revealed as missing, if Gap.Len() > 0.
	Gap Range
	// NewSession is set when the packet starts a new session; Ended then
	// describes the previous one (if there was one).
	NewSession bool
	// PrevSession, PrevEndedClean and PrevLastSeq describe the session the
	// packet replaced, when NewSession is set and HadPrev is true.
	HadPrev        bool
	PrevSession    mold.Session
	PrevEndedClean bool
	PrevLastSeq    uint64
	// EndOfSession is set when the packet ends the session.
	EndOfSession bool
}

// Stats are a tracker's cumulative counters.
type Stats struct {
	Packets       uint64 // packets seen, all lines
	Released      uint64 // messages released
	DupPackets    uint64 // packets that carried nothing new
	DupMessages   uint64 // messages dropped as already released
	Gaps          uint64 // gap events
	Missing       uint64 // messages in all gaps
	Heartbeats    uint64
	Sessions      uint64 // sessions seen
	AbruptEnds    uint64 // sessions replaced without an end of session
	WinsPerLine   [2]uint64
	PacketsOnLine [2]uint64
}

// Tracker follows one channel.
type Tracker struct {
	session mold.Session
	started bool
	ended   bool
	next    uint64 // next sequence to release
	stats   Stats
}

// Session returns the current session and whether one has started.
func (t *Tracker) Session() (mold.Session, bool) { return t.session, t.started }

// Next returns the next sequence number the tracker will release.
func (t *Tracker) Next() uint64 { return t.next }

// Ended reports whether the current session's end of session was seen.
func (t *Tracker) Ended() bool { return t.ended }

// Stats returns the counters.
func (t *Tracker) Stats() Stats { return t.stats }

// Packet takes the header of a packet received on line (0 = A, 1 = B) and
// says which of its messages to release.
func (t *Tracker) Packet(line int, h mold.Header) Verdict {
	var v Verdict
	t.stats.Packets++
	t.stats.PacketsOnLine[line&1]++
	if !t.started || h.Session != t.session {
		v.NewSession = true
		if t.started {
			v.HadPrev = true
			v.PrevSession = t.session
			v.PrevEndedClean = t.ended
			v.PrevLastSeq = t.next - 1
			if !t.ended {
				t.stats.AbruptEnds++
			}
		}
		t.session = h.Session
		t.started = true
		t.ended = false
		t.next = 1
		t.stats.Sessions++
	}
	switch {
	case h.IsHeartbeat(), h.IsEndOfSession():
		if h.IsHeartbeat() {
			t.stats.Heartbeats++
		} else {
			v.EndOfSession = !t.ended
			t.ended = true
		}
		// The header's sequence is the next one the publisher will use:
		// anything before it that we lack is lost.
		if h.Seq > t.next {
			v.Gap = Range{t.next, h.Seq - 1}
			t.gap(v.Gap)
			t.next = h.Seq
		}
		return v
	}
	n := uint64(h.Count)
	end := h.Seq + n // one past the packet's last message
	if end <= t.next {
		t.stats.DupPackets++
		t.stats.DupMessages += n
		return v
	}
	if h.Seq > t.next {
		v.Gap = Range{t.next, h.Seq - 1}
		t.gap(v.Gap)
		t.next = h.Seq
	}
	v.Skip = int(t.next - h.Seq)
	v.Release = int(end - t.next)
	t.stats.DupMessages += uint64(v.Skip)
	t.stats.Released += uint64(v.Release)
	t.stats.WinsPerLine[line&1]++
	t.next = end
	return v
}

func (t *Tracker) gap(r Range) {
	t.stats.Gaps++
	t.stats.Missing += r.Len()
}
