// Package hgrm writes latency histograms as .hgrm files: HdrHistogram's
// percentile distribution text format, which its plotters read. The
// subscriber's --latency-out and tickbench's receivers and pingers write
// theirs with it, so every .hgrm file tickcast writes has one layout. Split
// divides a run's latencies into its first second and its steady state, the
// same way for every receiver.
package hgrm

import (
	"fmt"
	"os"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Write writes h, whose values are nanoseconds, to path as a percentile
// distribution in microseconds (five ticks per half distance). An empty
// path writes nothing.
func Write(path string, h *hdrhistogram.Histogram) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := h.PercentilesPrint(f, 5, 1e3); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
