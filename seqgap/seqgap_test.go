package seqgap

import (
	"testing"

	"github.com/tickcast/tickcast/mold"
)

func sess(s string) mold.Session { x, _ := mold.ParseSession(s); return x }

// step is one packet and what the tracker must say about it.
type step struct {
	line    int
	session string
	seq     uint64
	count   uint16
	skip    int
	release int
	gap     Range
	newSess bool
	prevEnd bool // PrevEndedClean, when newSess and a previous session existed
	eos     bool
}

func TestTracker(t *testing.T) {
	cases := map[string][]step{
		"in order": {
			{session: "S1", seq: 1, count: 3, release: 3, newSess: true},
			{session: "S1", seq: 4, count: 2, release: 2},
		},
		"single loss": {
			{session: "S1", seq: 1, count: 3, release: 3, newSess: true},
			{session: "S1", seq: 6, count: 2, release: 2, gap: Range{4, 5}},
		},
		"first packet lost": {
			{session: "S1", seq: 3, count: 1, release: 1, newSess: true, gap: Range{1, 2}},
		},
		"duplicate and overlap": {
			{session: "S1", seq: 1, count: 3, release: 3, newSess: true},
			{line: 1, session: "S1", seq: 1, count: 3},
			{line: 1, session: "S1", seq: 2, count: 4, skip: 2, release: 2},
		},
		"late packet after gap is a duplicate": {
			{session: "S1", seq: 1, count: 1, release: 1, newSess: true},
			{session: "S1", seq: 3, count: 1, release: 1, gap: Range{2, 2}},
			{session: "S1", seq: 2, count: 1},
		},
		"heartbeat reveals tail loss": {
			{session: "S1", seq: 1, count: 2, release: 2, newSess: true},
			{session: "S1", seq: 3},
			{session: "S1", seq: 6, gap: Range{3, 5}},
		},
		"end of session, then a new session": {
			{session: "S1", seq: 1, count: 2, release: 2, newSess: true},
			{session: "S1", seq: 3, count: mold.EndOfSession, eos: true},
			{session: "S1", seq: 3, count: mold.EndOfSession},
			{session: "S2", seq: 1, count: 1, release: 1, newSess: true, prevEnd: true},
		},
		"abrupt session change": {
			{session: "S1", seq: 1, count: 2, release: 2, newSess: true},
			{session: "S2", seq: 1, count: 1, release: 1, newSess: true, prevEnd: false},
		},
		"end of session after loss": {
			{session: "S1", seq: 1, count: 2, release: 2, newSess: true},
			{session: "S1", seq: 9, count: mold.EndOfSession, eos: true, gap: Range{3, 8}},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			var tr Tracker
			var missing uint64
			for i, s := range steps {
				v := tr.Packet(s.line, mold.Header{Session: sess(s.session), Seq: s.seq, Count: s.count})
				if v.Skip != s.skip || v.Release != s.release || v.Gap != s.gap || v.NewSession != s.newSess || v.EndOfSession != s.eos {
					t.Fatalf("step %d %+v: got %+v", i, s, v)
				}
				if s.newSess && v.HadPrev && v.PrevEndedClean != s.prevEnd {
					t.Fatalf("step %d: previous session ended clean = %v", i, v.PrevEndedClean)
				}
				missing += s.gap.Len()
			}
			if tr.Stats().Missing != missing {
				t.Fatalf("Missing = %d, want %d", tr.Stats().Missing, missing)
			}
		})
	}
}

func TestRangeLen(t *testing.T) {
	for _, c := range []struct {
		r    Range
		want uint64
	}{{Range{}, 0}, {Range{1, 1}, 1}, {Range{4, 9}, 6}, {Range{5, 4}, 0}} {
		if got := c.r.Len(); got != c.want {
			t.Errorf("%v.Len() = %d, want %d", c.r, got, c.want)
		}
	}
}

func TestTrackerAllocatesNothing(t *testing.T) {
	var tr Tracker
	s := sess("S1")
	seq := uint64(1)
	a := testing.AllocsPerRun(1000, func() {
		tr.Packet(0, mold.Header{Session: s, Seq: seq, Count: 5})
		tr.Packet(1, mold.Header{Session: s, Seq: seq, Count: 5})
		seq += 7
	})
	if a != 0 {
		t.Fatalf("%.1f allocations per packet pair", a)
	}
}
