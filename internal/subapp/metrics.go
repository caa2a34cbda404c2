package subapp

import (
	"encoding/binary"
	"os"
	"runtime/metrics"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/hgrm"
	"github.com/tickcast/tickcast/internal/metricsrv"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/tickprom"
	"golang.org/x/sys/unix"
)

// appMetrics is the subscriber's tickcast.Observer: it feeds the Prometheus
// latency histograms and HDR histograms of the send-to-release and
// tick-to-handler latencies for the summary's exact percentiles; and it
// serves /metrics on --metrics-addr. Released, tick and Recovered run on the
// polling goroutine.
type appMetrics struct {
	lat     *tickprom.LatencyMetrics
	tickHdr *hdrhistogram.Histogram // feed handler's receipt of the tick to release, ns; polling goroutine only
	// split is the send-to-release latency in ns, by release time: the
	// first second and the steady state (LatencySplit); the whole run is
	// the two merged (Split.Whole). Polling goroutine only.
	split *hgrm.Split
	// The stages of the path, each a histogram in ns: in the feed handler
	// (tick received to send stamp), on the wire and in the kernel up to
	// the receive call that took the datagram (send stamp to the receive
	// stamp), and from that call to the release to the handler (hand-off
	// between threads, if any, and the subscriber's own work).
	stageFH, stageWire, stageRelease *hdrhistogram.Histogram
	// recovery: request queued to answer applied, ns, per recovery answer.
	recovery *hdrhistogram.Histogram
	// relNs is the release time Released was last given: the handler's
	// message that follows it is the same message, so tick reads it.
	relNs int64
	// nats is the NATS connection's state, nil when the subscriber does
	// not connect to NATS (no recovery, no --transport nats).
	nats *natsconn.Metrics
	// rdma is the RDMA port's counters, nil unless --transport rdma found
	// the device behind --iface.
	rdma prometheus.Collector
	srv  *metricsrv.Server
}

// hdrMaxNs is the largest latency the HDR histogram tells apart; longer ones
// are recorded as this.
const hdrMaxNs = int64(time.Minute)

func newAppMetrics() *appMetrics {
	// Three significant digits from 1 ns to a minute: about 200 KB.
	h := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, hdrMaxNs, 3) }
	return &appMetrics{lat: tickprom.NewLatencyMetrics(), tickHdr: h(),
		stageFH: h(), stageWire: h(), stageRelease: h(), recovery: h(), split: hgrm.NewSplit(hdrMaxNs)}
}

// Released implements tickcast.Observer.
func (m *appMetrics) Released(ch int, sendNs, recvNs, nowNs int64) {
	m.relNs = nowNs
	m.lat.Released(ch, sendNs, recvNs, nowNs)
	if sendNs > 0 {
		m.split.Record(nowNs, nowNs-sendNs) // clamped: cannot fail or allocate
		if recvNs > 0 {
			m.stageWire.RecordValue(min(max(recvNs-sendNs, 1), hdrMaxNs))
		}
	}
	if recvNs > 0 {
		m.stageRelease.RecordValue(min(max(nowNs-recvNs, 1), hdrMaxNs))
	}
}

// tick records the tick-to-handler latency of msg, the stream message the
// handler is given right after Released was called for it: from the feed
// handler's receive timestamp in the message header (when it received the
// upstream event) to the release time. Messages without the timestamp are
// skipped. It does not allocate.
func (m *appMetrics) tick(msg []byte) {
	if len(msg) < feed.HeaderLen || m.relNs == 0 {
		return
	}
	if recvNs := int64(binary.LittleEndian.Uint64(msg[feed.RecvNsOffset:])); recvNs > 0 {
		m.tickHdr.RecordValue(min(max(m.relNs-recvNs, 1), hdrMaxNs))
		if sendNs := int64(binary.LittleEndian.Uint64(msg[feed.SendNsOffset:])); sendNs > 0 {
			m.stageFH.RecordValue(min(max(sendNs-recvNs, 1), hdrMaxNs))
		}
	}
}

// Recovered implements tickcast.Observer.
func (m *appMetrics) Recovered(ch int, latency time.Duration) {
	m.lat.Recovered(ch, latency)
	m.recovery.RecordValue(min(max(int64(latency), 1), hdrMaxNs))
}

// recoveryP99 returns the 99th percentile of the recovery latency, in
// microseconds (0 before any answer).
func (m *appMetrics) recoveryP99() float64 {
	return float64(m.recovery.ValueAtQuantile(99)) / 1e3
}

// Flush implements tickcast.Observer.
func (m *appMetrics) Flush() { m.lat.Flush() }

// DefaultMetricsAddr is --metrics-addr's default. A subscriber left at it
// serves on the first free port of metricsPorts from its port on
// (9465..9564), so that several run on one host with their defaults.
const (
	DefaultMetricsAddr = "127.0.0.1:9465"
	metricsPorts       = 100
)

// checkMetrics checks --metrics-addr and --metrics-sd-dir. Its errors are
// *cliconf.Error.
func (s *Settings) checkMetrics() error {
	if err := metricsrv.CheckAddr(s.MetricsAddr); err != nil {
		return cliconf.Invalid("metrics-addr", "%v", err)
	}
	if s.MetricsSDDir == "" {
		return nil
	}
	if s.MetricsAddr == "" {
		return cliconf.Invalid("metrics-sd-dir", "%q: service discovery needs metrics on (--metrics-addr is empty)", s.MetricsSDDir)
	}
	if fi, err := os.Stat(s.MetricsSDDir); err != nil || !fi.IsDir() {
		return cliconf.Invalid("metrics-sd-dir", "%q is not an existing directory", s.MetricsSDDir)
	}
	return nil
}

// metricsPortsToTry is how many ports, from --metrics-addr's on, the
// subscriber may try: the range when the address is the default and was not
// given explicitly, else that one port.
func (s *Settings) metricsPortsToTry() int {
	if _, set := s.Origins["metrics-addr"]; set || s.MetricsAddr != DefaultMetricsAddr {
		return 1
	}
	return metricsPorts
}

// serve registers sub's collectors, the latency histograms and the NATS
// connection's state (when there is a connection) and serves them on
// --metrics-addr (nothing is served when it is empty), registering the
// address in --metrics-sd-dir if set.
func (m *appMetrics) serve(s *Settings, sub *tickcast.Subscriber, log zerolog.Logger) error {
	srv, err := metricsrv.StartDefault(s.MetricsAddr, s.metricsPortsToTry(), log)
	if err != nil {
		return err
	}
	srv.Registry.MustRegister(tickprom.NewSubscriberCollector(sub), m.lat)
	if m.nats != nil {
		srv.Registry.MustRegister(m.nats)
	}
	if m.rdma != nil {
		srv.Registry.MustRegister(m.rdma)
	}
	if s.MetricsSDDir != "" {
		path, err := srv.Register(s.MetricsSDDir, "subscriber", map[string]string{"feed": s.FeedName})
		if err != nil {
			srv.Close()
			return err
		}
		log.Info().Str("file", path).Str("addr", srv.Addr()).Msg("registered for Prometheus file-based service discovery")
	}
	m.srv = srv
	return nil
}

func (m *appMetrics) close() {
	if m.srv != nil {
		m.srv.Close()
	}
}

// LatencySummary is the latency in the summary, in microseconds (from the
// HDR histograms, to three significant digits), over every stream message:
//
//   - latency_*: send to release, from the feed handler's send timestamp
//     (taken when it flushed the packet) to the release to the handler;
//   - tick_latency_*: tick to handler, from the feed handler's receive
//     timestamp (taken when it received the upstream event, before
//     normalizing and publishing it) to the release to the handler.
type LatencySummary struct {
	LatencyCount      int64   `json:"latency_count"`
	LatencyP50Us      float64 `json:"latency_p50_us"`
	LatencyP90Us      float64 `json:"latency_p90_us"`
	LatencyP99Us      float64 `json:"latency_p99_us"`
	LatencyP999Us     float64 `json:"latency_p999_us"`
	LatencyMaxUs      float64 `json:"latency_max_us"`
	TickLatencyCount  int64   `json:"tick_latency_count"`
	TickLatencyP50Us  float64 `json:"tick_latency_p50_us"`
	TickLatencyP90Us  float64 `json:"tick_latency_p90_us"`
	TickLatencyP99Us  float64 `json:"tick_latency_p99_us"`
	TickLatencyP999Us float64 `json:"tick_latency_p999_us"`
	TickLatencyMaxUs  float64 `json:"tick_latency_max_us"`
	LatencySplit
}

// StageSummary splits the path of a message into stages, in microseconds
// (median and 99th percentile over every stream message): in the feed
// handler, from its receipt of the tick to the send stamp (batching and
// pacing included); from the send stamp to the subscriber's receive call
// returning with the datagram (the kernel, and the wakeup of the thread
// that receives); and from there to the release to the handler (the
// hand-off to the handler's goroutine, when receiving is a thread of its
// own, and the subscriber's work). It also counts the wakeups: context
// switches of the whole process per packet received, and the Go
// scheduler's latency (how long goroutines waited to run, from
// runtime/metrics /sched/latencies:seconds).
type StageSummary struct {
	FHP50Us           float64 `json:"stage_tick_to_send_p50_us"`
	FHP99Us           float64 `json:"stage_tick_to_send_p99_us"`
	WireP50Us         float64 `json:"stage_send_to_receive_p50_us"`
	WireP99Us         float64 `json:"stage_send_to_receive_p99_us"`
	ReleaseP50Us      float64 `json:"stage_receive_to_release_p50_us"`
	ReleaseP99Us      float64 `json:"stage_receive_to_release_p99_us"`
	CtxSwitchesPerPkt float64 `json:"context_switches_per_packet"`
	SchedP50Us        float64 `json:"sched_latency_p50_us"`
	SchedP99Us        float64 `json:"sched_latency_p99_us"`
}

func (m *appMetrics) stages(packets uint64) StageSummary {
	us := func(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	st := StageSummary{FHP50Us: us(m.stageFH, 50), FHP99Us: us(m.stageFH, 99),
		WireP50Us: us(m.stageWire, 50), WireP99Us: us(m.stageWire, 99),
		ReleaseP50Us: us(m.stageRelease, 50), ReleaseP99Us: us(m.stageRelease, 99)}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil && packets > 0 {
		st.CtxSwitchesPerPkt = float64(ru.Nvcsw+ru.Nivcsw) / float64(packets)
	}
	st.SchedP50Us, st.SchedP99Us = schedLatency()
	return st
}

// schedLatency returns the median and 99th percentile of the Go scheduler's
// latency histogram since the process started, in microseconds.
func schedLatency() (p50, p99 float64) {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := s[0].Value.Float64Histogram()
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	q := func(f float64) float64 {
		want, acc := uint64(f*float64(total)), uint64(0)
		for i, c := range h.Counts {
			if acc += c; acc > want {
				return h.Buckets[i+1] * 1e6 // the bucket's upper bound
			}
		}
		return 0
	}
	if total == 0 {
		return 0, 0
	}
	return q(0.5), q(0.99)
}

func (m *appMetrics) summary() LatencySummary {
	h, t := m.split.Whole(), m.tickHdr
	us := func(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	return LatencySummary{LatencyCount: h.TotalCount(), LatencyP50Us: us(h, 50), LatencyP90Us: us(h, 90),
		LatencyP99Us: us(h, 99), LatencyP999Us: us(h, 99.9), LatencyMaxUs: float64(h.Max()) / 1e3,
		TickLatencyCount: t.TotalCount(), TickLatencyP50Us: us(t, 50), TickLatencyP90Us: us(t, 90),
		TickLatencyP99Us: us(t, 99), TickLatencyP999Us: us(t, 99.9), TickLatencyMaxUs: float64(t.Max()) / 1e3,
		LatencySplit: m.latencySplit()}
}

// writeLatency writes the send-to-release HDR histogram to path (nothing
// when path is empty) as a percentile distribution (.hgrm, values in
// microseconds, the format HdrHistogram's plotters read). An error is
// logged, not returned: the summary is printed either way.
func (m *appMetrics) writeLatency(path string, log zerolog.Logger) {
	if path == "" {
		return
	}
	if err := hgrm.Write(path, m.split.Whole()); err != nil {
		log.Error().Err(err).Str("path", path).Msg("latency-out")
	}
}
