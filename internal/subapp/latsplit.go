package subapp

import "github.com/HdrHistogram/hdrhistogram-go"

// LatencySplit is the send-to-release latency of the summary (latency_*)
// split by when the message was released, in microseconds: over the first
// second from the first message released (latency_first_*: start-up, the
// first packets) and over the rest of the run (latency_steady_*: the steady
// state). The two counts add up to latency_count. A run shorter than a
// second has no steady state (latency_steady_count 0).
type LatencySplit struct {
	FirstCount   int64   `json:"latency_first_count"`
	FirstP50Us   float64 `json:"latency_first_p50_us"`
	FirstP90Us   float64 `json:"latency_first_p90_us"`
	FirstP99Us   float64 `json:"latency_first_p99_us"`
	FirstP999Us  float64 `json:"latency_first_p999_us"`
	FirstMaxUs   float64 `json:"latency_first_max_us"`
	SteadyCount  int64   `json:"latency_steady_count"`
	SteadyP50Us  float64 `json:"latency_steady_p50_us"`
	SteadyP90Us  float64 `json:"latency_steady_p90_us"`
	SteadyP99Us  float64 `json:"latency_steady_p99_us"`
	SteadyP999Us float64 `json:"latency_steady_p999_us"`
	SteadyMaxUs  float64 `json:"latency_steady_max_us"`
}

// latencySplit returns the split of the send-to-release latency.
func (m *appMetrics) latencySplit() LatencySplit {
	us := func(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	f, s := m.split.First, m.split.Steady
	return LatencySplit{
		FirstCount: f.TotalCount(), FirstP50Us: us(f, 50), FirstP90Us: us(f, 90), FirstP99Us: us(f, 99),
		FirstP999Us: us(f, 99.9), FirstMaxUs: float64(f.Max()) / 1e3,
		SteadyCount: s.TotalCount(), SteadyP50Us: us(s, 50), SteadyP90Us: us(s, 90), SteadyP99Us: us(s, 99),
		SteadyP999Us: us(s, 99.9), SteadyMaxUs: float64(s.Max()) / 1e3,
	}
}
