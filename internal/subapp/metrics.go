package subapp

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/internal/metricsrv"
)

// appMetrics is the subscriber's tickcast.Observer: it feeds the Prometheus
// latency histograms and an HDR histogram of the send-to-release latency for
// the summary's exact percentiles; and it serves /metrics on --metrics-addr.
// Released and Recovered run on the polling goroutine.
type appMetrics struct {
	lat *tickcast.LatencyMetrics
	hdr *hdrhistogram.Histogram // send to release, ns; polling goroutine only
	srv *metricsrv.Server
}

// hdrMaxNs is the largest latency the HDR histogram tells apart; longer ones
// are recorded as this.
const hdrMaxNs = int64(time.Minute)

func newAppMetrics() *appMetrics {
	// Three significant digits from 1 ns to a minute: about 200 KB.
	return &appMetrics{lat: tickcast.NewLatencyMetrics(), hdr: hdrhistogram.New(1, hdrMaxNs, 3)}
}

// Released implements tickcast.Observer.
func (m *appMetrics) Released(ch int, sendNs, recvNs, nowNs int64) {
	m.lat.Released(ch, sendNs, recvNs, nowNs)
	if sendNs > 0 {
		// Clamped into the range, so RecordValue cannot fail (its error
		// would allocate).
		m.hdr.RecordValue(min(max(nowNs-sendNs, 1), hdrMaxNs))
	}
}

// Recovered implements tickcast.Observer.
func (m *appMetrics) Recovered(ch int, latency time.Duration) { m.lat.Recovered(ch, latency) }

// Flush implements tickcast.Observer.
func (m *appMetrics) Flush() { m.lat.Flush() }

// serve registers sub's collectors and the latency histograms and serves
// them on addr (nothing is served when addr is empty).
func (m *appMetrics) serve(addr string, sub *tickcast.Subscriber, log zerolog.Logger) error {
	srv, err := metricsrv.Start(addr, log)
	if err != nil {
		return err
	}
	srv.Registry.MustRegister(tickcast.NewSubscriberCollector(sub), m.lat)
	m.srv = srv
	return nil
}

func (m *appMetrics) close() {
	if m.srv != nil {
		m.srv.Close()
	}
}

// LatencySummary is the send-to-release latency in the summary: from the
// feed handler's send timestamp to the release to the handler, over every
// stream message, in microseconds (from the HDR histogram, to three
// significant digits).
type LatencySummary struct {
	LatencyCount  int64   `json:"latency_count"`
	LatencyP50Us  float64 `json:"latency_p50_us"`
	LatencyP90Us  float64 `json:"latency_p90_us"`
	LatencyP99Us  float64 `json:"latency_p99_us"`
	LatencyP999Us float64 `json:"latency_p999_us"`
	LatencyMaxUs  float64 `json:"latency_max_us"`
}

func (m *appMetrics) summary() LatencySummary {
	h := m.hdr
	us := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	return LatencySummary{LatencyCount: h.TotalCount(), LatencyP50Us: us(50), LatencyP90Us: us(90),
		LatencyP99Us: us(99), LatencyP999Us: us(99.9), LatencyMaxUs: float64(h.Max()) / 1e3}
}
