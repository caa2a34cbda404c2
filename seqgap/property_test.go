package seqgap

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
)

// propOut collects what a tracker releases and loses.
type propOut struct {
	t        *testing.T
	released []uint64
	lost     []Range
	requests []Range
}

func (o *propOut) Release(seq uint64, msg []byte, line int, recvNs int64) {
	if got := string(msg); got != fmt.Sprintf("m%d", seq) {
		o.t.Fatalf("released %q as seq %d", got, seq)
	}
	o.released = append(o.released, seq)
}

func (o *propOut) Event(ev *Event) {
	if ev.Kind == EventLost {
		o.lost = append(o.lost, ev.Range)
	}
}

func (o *propOut) Request(s mold.Session, r Range) { o.requests = append(o.requests, r) }

type arrival struct {
	line int
	pkt  []byte
}

// schedule is one random run: n messages in packets, delivered on two lines
// with loss, duplication, reordering and dark periods, and a recovery that
// answers after a random delay except for withheld packets.
type schedule struct {
	rng      *rand.Rand
	session  mold.Session
	n        uint64
	packets  [][]byte // data packets in publishing order
	firsts   []uint64
	withheld map[int]bool // packet index → dropped everywhere, never recovered
	arrivals []arrival
}

func newSchedule(seed uint64) *schedule {
	s := &schedule{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), withheld: map[int]bool{}}
	s.session, _ = mold.ParseSession("PROP")
	b, _ := mold.NewBuilder(1500)
	s.n = uint64(20 + s.rng.IntN(400))
	for seq := uint64(1); seq <= s.n; {
		k := min(uint64(1+s.rng.IntN(8)), s.n-seq+1)
		b.Start(s.session, seq)
		for i := uint64(0); i < k; i++ {
			b.Add([]byte(fmt.Sprintf("m%d", seq+i)))
		}
		s.packets = append(s.packets, append([]byte{}, b.Finish()...))
		s.firsts = append(s.firsts, seq)
		seq += k
	}
	return s
}

func (s *schedule) build(withhold bool) {
	rng := s.rng
	if withhold {
		for i := range s.packets {
			if rng.Float64() < 0.05 {
				s.withheld[i] = true
			}
		}
	}
	var lines [2][]arrival
	for l := 0; l < 2; l++ {
		loss := []float64{0, 0.05, 0.3, 1}[rng.IntN(4)] // 1: the line is dark
		darkFrom, darkTo := -1, -1
		if rng.IntN(3) == 0 {
			darkFrom = rng.IntN(len(s.packets))
			darkTo = darkFrom + rng.IntN(len(s.packets)/2+1)
		}
		for i, p := range s.packets {
			if s.withheld[i] || rng.Float64() < loss || (i >= darkFrom && i < darkTo) {
				continue
			}
			lines[l] = append(lines[l], arrival{l, p})
			if rng.Float64() < 0.05 {
				lines[l] = append(lines[l], arrival{l, p}) // duplicate
			}
		}
		// Reorder: swap neighbours, sometimes a few apart.
		for i := range lines[l] {
			if rng.Float64() < 0.1 {
				j := min(len(lines[l])-1, i+1+rng.IntN(4))
				lines[l][i], lines[l][j] = lines[l][j], lines[l][i]
			}
		}
	}
	// Interleave the lines, each in its own order.
	a, b := lines[0], lines[1]
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && rng.IntN(2) == 0) {
			s.arrivals, a = append(s.arrivals, a[0]), a[1:]
		} else {
			s.arrivals, b = append(s.arrivals, b[0]), b[1:]
		}
	}
	// End of session on both lines, the last copy reliable so the tail of
	// the stream is always known.
	eos := mold.AppendEndOfSession(nil, s.session, s.n+1)
	s.arrivals = append(s.arrivals, arrival{rng.IntN(2), eos})
}

// run feeds the schedule to a tracker whose recovery serves every request
// after a random delay, except withheld packets' messages.
func (s *schedule) run(t *testing.T, cfg Config) *propOut {
	out := &propOut{t: t}
	tr, err := New(cfg, out)
	if err != nil {
		t.Fatal(err)
	}
	withheldSeq := map[uint64]bool{}
	for i := range s.withheld {
		p, _ := mold.Parse(s.packets[i])
		for k := 0; k < p.Messages(); k++ {
			withheldSeq[p.Seq+uint64(k)] = true
		}
	}
	type pending struct {
		due int
		r   Range
	}
	var queue []pending
	now := int64(0)
	b, _ := mold.NewBuilder(65000)
	serve := func(r Range) {
		// Answer in chunks of up to 16 messages, skipping withheld ones.
		for seq := r.From; seq <= r.To; {
			for seq <= r.To && withheldSeq[seq] {
				seq++
			}
			if seq > r.To {
				break
			}
			b.Start(s.session, seq)
			for seq <= r.To && !withheldSeq[seq] && b.Count() < 16 {
				b.Add([]byte(fmt.Sprintf("m%d", seq)))
				seq++
			}
			p, _ := mold.Parse(b.Finish())
			tr.Recovered(s.session, p, now, out)
		}
	}
	for i := 0; i <= len(s.arrivals)+10; i++ {
		if i < len(s.arrivals) {
			a := s.arrivals[i]
			p, err := mold.Parse(a.pkt)
			if err != nil {
				t.Fatal(err)
			}
			tr.Packet(a.line, p, now, now, out)
		}
		now += int64(1 + s.rng.IntN(10_000))
		before := len(out.requests)
		tr.Tick(now, out)
		for _, r := range out.requests[before:] {
			queue = append(queue, pending{i + s.rng.IntN(5), r})
		}
		for len(queue) > 0 && queue[0].due <= i {
			serve(queue[0].r)
			queue = queue[1:]
		}
	}
	// Let every deadline pass.
	now += int64(2 * cfg.LostAfter)
	tr.Tick(now, out)
	if g, h := tr.Outstanding(); g != 0 || h != 0 {
		t.Fatalf("after all deadlines: %d gaps and %d held messages outstanding", g, h)
	}
	return out
}

// check asserts that out released 1..n in order, exactly once, except the
// withheld packets' messages, which were reported lost, exactly.
func (s *schedule) check(t *testing.T, out *propOut) {
	var wantLost []uint64
	for i := range s.withheld {
		p, _ := mold.Parse(s.packets[i])
		for k := 0; k < p.Messages(); k++ {
			wantLost = append(wantLost, p.Seq+uint64(k))
		}
	}
	slices.Sort(wantLost)
	var gotLost []uint64
	for _, r := range out.lost {
		for seq := r.From; seq <= r.To; seq++ {
			gotLost = append(gotLost, seq)
		}
	}
	if !slices.Equal(gotLost, wantLost) {
		t.Fatalf("lost %v (ranges %v), want exactly %v", gotLost, out.lost, wantLost)
	}
	lost := map[uint64]bool{}
	for _, seq := range gotLost {
		lost[seq] = true
	}
	want := uint64(1)
	for _, seq := range out.released {
		for lost[want] {
			want++
		}
		if seq != want {
			t.Fatalf("released %d, want %d (released so far %d)", seq, want, len(out.released))
		}
		want++
	}
	for lost[want] {
		want++
	}
	if want != s.n+1 {
		t.Fatalf("released up to %d, want all %d", want-1, s.n)
	}
}

func propertyRuns() int {
	if testing.Short() {
		return 1000
	}
	return 10_000
}

// TestPropertyPerfectRecovery: with recovery serving every request, the
// output is exactly the input, once, in order, whatever the lines did.
func TestPropertyPerfectRecovery(t *testing.T) {
	for seed := uint64(1); seed <= uint64(propertyRuns()); seed++ {
		s := newSchedule(seed)
		s.build(false)
		// Windows larger than a schedule, so that the window never forces a
		// loss here (window-full has its own scenario file).
		cfg := Config{Window: []int{512, 1024, 4096}[seed%3], LostAfter: time.Second, GapDelay: time.Duration(seed%3) * 5 * time.Microsecond}
		out := s.run(t, cfg)
		if t.Failed() {
			return
		}
		if len(out.lost) != 0 {
			t.Fatalf("seed %d: lost %v with perfect recovery", seed, out.lost)
		}
		s.check(t, out)
	}
}

// TestPropertyWithheldRecovery: when recovery withholds some packets (and
// both lines lost them), exactly their messages are reported lost and
// nothing else is missing.
func TestPropertyWithheldRecovery(t *testing.T) {
	for seed := uint64(1); seed <= uint64(propertyRuns()); seed++ {
		s := newSchedule(seed + 1<<32)
		s.build(true)
		cfg := Config{Window: []int{512, 1024, 4096}[seed%3], LostAfter: time.Second}
		out := s.run(t, cfg)
		s.check(t, out)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// countOut counts without allocating.
type countOut struct{ released, events int }

func (o *countOut) Release(uint64, []byte, int, int64) { o.released++ }
func (o *countOut) Event(*Event)                       { o.events++ }

func TestTrackerAllocatesNothing(t *testing.T) {
	out := &countOut{}
	tr, _ := New(Config{Window: 64}, nil)
	sess, _ := mold.ParseSession("S")
	b, _ := mold.NewBuilder(1500)
	mk := func(seq uint64) mold.Packet {
		b.Start(sess, seq)
		for i := uint64(0); i < 4; i++ {
			b.Add([]byte(fmt.Sprintf("m%d", seq+i)))
		}
		p, _ := mold.Parse(append([]byte{}, b.Finish()...))
		return p
	}
	// Pre-built packets: in order, the B copy, and a pair swapped.
	pkts := make([]mold.Packet, 0, 3000)
	for seq := uint64(1); len(pkts) < 3000; seq += 12 {
		p1, p2, p3 := mk(seq), mk(seq+4), mk(seq+8)
		pkts = append(pkts, p1, p1, p3, p2)
	}
	i := 0
	a := testing.AllocsPerRun(500, func() {
		for k := 0; k < 4; k++ {
			tr.Packet(k&1, pkts[i], 0, 0, out)
			i++
		}
		tr.Tick(0, out)
	})
	if a != 0 {
		t.Fatalf("%.1f allocations per 4 packets (reorder and duplicate included)", a)
	}
	if out.released < 5000 {
		t.Fatalf("only %d released", out.released)
	}
}
