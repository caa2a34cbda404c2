// Package tickprom exports tickcast's counters and latencies to Prometheus.
//
// The counters a Subscriber, a Publisher and a recovery Server keep anyway
// are exported by collectors that read their snapshots when Prometheus
// scrapes: they add nothing to the hot path. Every label value a collector
// knows of (each joined channel, each line, each loss reason, each message
// type) is always exported, at 0 until something is counted, so a missing
// series never stands for zero. Latencies, which need one observation per
// message, come from the observers LatencyMetrics (a tickcast.Observer) and
// PublisherMetrics (a tickcast.PublisherObserver). The names and what an
// operator does about each are in docs/operations.md.
//
// Package tickcast itself does not depend on Prometheus: a subscriber that
// embeds it without this package does not link client_golang.
package tickprom

import (
	"math/bits"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast"
)

var (
	_ tickcast.Observer          = (*LatencyMetrics)(nil)
	_ tickcast.PublisherObserver = (*PublisherMetrics)(nil)
)

// LatencyBuckets are the latency histograms' bucket bounds, in seconds:
// 1 µs doubling up to about 8.4 s.
var LatencyBuckets = prometheus.ExponentialBuckets(1e-6, 2, latencyBuckets)

const latencyBuckets = 24

// latencyHist is a histogram over LatencyBuckets kept with plain counters
// by one goroutine: observing costs a few nanoseconds, where a
// prometheus.Histogram's atomic updates cost about 25.
type latencyHist struct {
	counts [latencyBuckets + 1]uint64 // per bucket, not cumulative; the last is +Inf
	n      uint64
	sumNs  uint64
}

// add counts a latency of ns nanoseconds (negative, from two hosts' clocks
// apart, counts as 0).
func (h *latencyHist) add(ns int64) {
	v := uint64(max(ns, 0))
	// Bucket k holds (1000·2^(k-1), 1000·2^k] ns; bucket 0 holds [0, 1000].
	k := 0
	if v > 1000 {
		k = min(bits.Len64((v-1)/1000), latencyBuckets)
	}
	h.counts[k]++
	h.n++
	h.sumNs += v
}

// metric returns h as a Prometheus histogram.
func (h *latencyHist) metric(d *prometheus.Desc) prometheus.Metric {
	buckets := make(map[float64]uint64, latencyBuckets)
	cum := uint64(0)
	for k, le := range LatencyBuckets {
		cum += h.counts[k]
		buckets[le] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.n, float64(h.sumNs)/1e9, buckets)
}

// LatencyMetrics is a tickcast.Observer that keeps Prometheus histograms of the
// tick-to-subscriber latency (the feed handler's send timestamp to the
// release to the handler, and the receive timestamp to the release) and of
// the recovery latency. Register it on a registry as a collector; what the
// polling goroutine observed is visible to scrapes after its next Flush
// (about every 100 ms).
type LatencyMetrics struct {
	live  [3]latencyHist // polling goroutine only
	mu    sync.Mutex
	pub   [3]latencyHist // as of the last Flush
	descs [3]*prometheus.Desc
}

// Indexes of LatencyMetrics' histograms.
const (
	latSendToRelease = iota
	latRecvToRelease
	latRecovery
)

// NewLatencyMetrics returns empty latency histograms.
func NewLatencyMetrics() *LatencyMetrics {
	m := &LatencyMetrics{}
	m.descs[latSendToRelease] = prometheus.NewDesc("tickcast_subscriber_send_to_release_seconds",
		"Latency from the feed handler's send timestamp in each message to its release to the subscriber's handler.", nil, nil)
	m.descs[latRecvToRelease] = prometheus.NewDesc("tickcast_subscriber_receive_to_release_seconds",
		"Latency from the receipt of each message's datagram to its release to the handler (time in the ring, the reorder window or recovery).", nil, nil)
	m.descs[latRecovery] = prometheus.NewDesc("tickcast_subscriber_recovery_latency_seconds",
		"Latency of each recovery answer, from the request to the answer.", nil, nil)
	return m
}

// Released implements tickcast.Observer.
func (m *LatencyMetrics) Released(ch int, sendNs, recvNs, nowNs int64) {
	if sendNs > 0 {
		m.live[latSendToRelease].add(nowNs - sendNs)
	}
	if recvNs > 0 {
		m.live[latRecvToRelease].add(nowNs - recvNs)
	}
}

// Recovered implements tickcast.Observer.
func (m *LatencyMetrics) Recovered(ch int, latency time.Duration) {
	m.live[latRecovery].add(int64(latency))
}

// Flush implements tickcast.Observer: it publishes the histograms to Collect.
func (m *LatencyMetrics) Flush() {
	m.mu.Lock()
	m.pub = m.live
	m.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (m *LatencyMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *LatencyMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	pub := m.pub
	m.mu.Unlock()
	for i, d := range m.descs {
		ch <- pub[i].metric(d)
	}
}

// seconds converts nanoseconds to seconds; a negative duration counts as 0.
func seconds(ns int64) float64 { return float64(max(ns, 0)) / 1e9 }

// PublisherMetrics is a tickcast.PublisherObserver that keeps Prometheus histograms
// of the messages per packet and the flush delay. Register it on a registry
// as a collector.
type PublisherMetrics struct {
	perPacket, flushDelay prometheus.Histogram
}

// NewPublisherMetrics returns empty publisher histograms.
func NewPublisherMetrics() *PublisherMetrics {
	return &PublisherMetrics{
		perPacket: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tickcast_publisher_messages_per_packet",
			Help: "Messages in each data packet sent.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		flushDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tickcast_publisher_flush_delay_seconds",
			Help: "How long the oldest message of each flush waited in a partly filled packet.", Buckets: LatencyBuckets}),
	}
}

// Flushed implements tickcast.PublisherObserver.
func (m *PublisherMetrics) Flushed(ch int, waitNs int64) { m.flushDelay.Observe(seconds(waitNs)) }

// Packet implements tickcast.PublisherObserver.
func (m *PublisherMetrics) Packet(ch int, messages int) { m.perPacket.Observe(float64(messages)) }

// Describe implements prometheus.Collector.
func (m *PublisherMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.perPacket.Describe(ch)
	m.flushDelay.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *PublisherMetrics) Collect(ch chan<- prometheus.Metric) {
	m.perPacket.Collect(ch)
	m.flushDelay.Collect(ch)
}

// metricSet describes a collector's metrics and builds them at scrape time.
type metricSet struct{ descs []*prometheus.Desc }

func (ms *metricSet) desc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	ms.descs = append(ms.descs, d)
	return d
}

func (ms *metricSet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range ms.descs {
		ch <- d
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}
