package hgrm

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// FirstPhase is how long a run's start-up phase lasts, from the first
// latency recorded: the latencies received in it go to Split.First, the
// later ones (the steady state) to Split.Steady.
const FirstPhase = time.Second

// Split divides a run's latencies by when they were received: the first
// second (FirstPhase, from the first latency recorded; start-up, first
// packets, caches and queues filling) and the rest, the steady state. The
// whole run is the two together (Whole).
//
// Record allocates nothing: both histograms are allocated by NewSplit, and
// values are clamped into their range so RecordValue cannot fail (its error
// would allocate). It is not safe for concurrent use.
type Split struct {
	startNs       int64 // receipt time of the first latency recorded; 0 before it
	maxNs         int64
	First, Steady *hdrhistogram.Histogram
}

// NewSplit returns a Split of two histograms of 1..maxNs ns, three
// significant digits (as the whole-run histograms tickcast keeps).
func NewSplit(maxNs int64) *Split {
	return &Split{maxNs: maxNs, First: hdrhistogram.New(1, maxNs, 3), Steady: hdrhistogram.New(1, maxNs, 3)}
}

// Record records latency ns of a message received at atNs (any clock in
// ns that does not go backwards by much, such as the wall clock the
// receivers read): into First while atNs is within FirstPhase of the first
// atNs recorded, else into Steady.
func (s *Split) Record(atNs, ns int64) {
	if s.startNs == 0 {
		s.startNs = atNs
	}
	v := min(max(ns, 1), s.maxNs)
	if atNs-s.startNs < int64(FirstPhase) {
		s.First.RecordValue(v)
	} else {
		s.Steady.RecordValue(v)
	}
}

// Whole returns a new histogram of the whole run: First and Steady merged.
// It allocates; call it once, at the end.
func (s *Split) Whole() *hdrhistogram.Histogram {
	h := hdrhistogram.New(1, s.maxNs, 3)
	h.Merge(s.First)
	h.Merge(s.Steady)
	return h
}
