package feed

import (
	"testing"
	"time"
)

// TestWallClockFollowsTheWallClock: readings of NewWallClock's clock lie
// between time.Now() read just before and just after them, over longer
// than several anchors, and never go backwards (beyond the rounding).
func TestWallClockFollowsTheWallClock(t *testing.T) {
	clock := NewWallClock()
	var last int64
	reads := 0
	for end := time.Now().Add(5 * WallClockAnchor); time.Now().Before(end); reads++ {
		before := time.Now().UnixNano()
		got := clock()
		after := time.Now().UnixNano()
		// The monotonic and wall clocks may differ by the rounding of the
		// anchor's two readings: allow a microsecond.
		if got < before-1000 || got > after+1000 {
			t.Fatalf("read %d: %d, outside the wall clock's [%d, %d]", reads, got, before, after)
		}
		if got < last-1000 {
			t.Fatalf("read %d: %d went back from %d", reads, got, last)
		}
		last = got
		if reads%1000 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if reads < 1000 {
		t.Fatalf("only %d reads", reads)
	}
}

func BenchmarkWallClock(b *testing.B) {
	clock := NewWallClock()
	var sink int64
	for b.Loop() {
		sink += clock()
	}
	_ = sink
}

func BenchmarkTimeNowUnixNano(b *testing.B) {
	var sink int64
	for b.Loop() {
		sink += time.Now().UnixNano()
	}
	_ = sink
}
