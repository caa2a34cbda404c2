package hgrm

import (
	"testing"
	"time"
)

// TestSplit checks that latencies received within FirstPhase of the first
// one go to First and the later ones to Steady, clamped into the range.
func TestSplit(t *testing.T) {
	s := NewSplit(int64(time.Minute))
	const t0 = int64(1_767_364_200_000_000_000)
	for i := int64(0); i < 2000; i++ { // one per ms for 2 s: 1000 in each phase
		s.Record(t0+i*int64(time.Millisecond), 5_000)
	}
	s.Record(t0+3*int64(time.Second), -7)               // a clock step: 1 ns
	s.Record(t0+3*int64(time.Second), int64(time.Hour)) // clamped to a minute
	if n := s.First.TotalCount(); n != 1000 {
		t.Errorf("first phase: %d latencies, want 1000", n)
	}
	if n := s.Steady.TotalCount(); n != 1002 {
		t.Errorf("steady state: %d latencies, want 1002", n)
	}
	if mn, mx := s.Steady.Min(), s.Steady.Max(); mn != 1 || mx < int64(59*time.Second) || mx > int64(61*time.Second) {
		t.Errorf("steady min %d max %d ns, want 1 and about a minute", mn, mx)
	}
}

// TestSplitAllocs pins Record at zero allocations: it runs on the
// subscriber's hot path.
func TestSplitAllocs(t *testing.T) {
	s := NewSplit(int64(time.Minute))
	at := int64(1)
	if n := testing.AllocsPerRun(1000, func() {
		at += int64(time.Millisecond)
		s.Record(at, at%1_000_000)
	}); n != 0 {
		t.Errorf("Record: %v allocations per call, want 0", n)
	}
}

// TestSplitWhole: the whole run is both phases merged: every latency
// counted once, the extremes kept.
func TestSplitWhole(t *testing.T) {
	s := NewSplit(int64(time.Minute))
	start := int64(1_000_000_000)
	for i := int64(1); i <= 1000; i++ {
		s.Record(start+i*int64(2*time.Millisecond), i*1000) // 2 s: half in each phase
	}
	w := s.Whole()
	if w.TotalCount() != 1000 || s.First.TotalCount()+s.Steady.TotalCount() != 1000 || s.First.TotalCount() == 0 || s.Steady.TotalCount() == 0 {
		t.Fatalf("whole %d, first %d, steady %d: want 1000 in all, both phases used", w.TotalCount(), s.First.TotalCount(), s.Steady.TotalCount())
	}
	if w.Min() > 1000 || !w.ValuesAreEquivalent(w.Max(), 1_000_000) {
		t.Errorf("whole min %d max %d, want 1000 and 1000000", w.Min(), w.Max())
	}
}
