package tickcast

import (
	"math/bits"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/seqgap"
)

// Prometheus metrics.
//
// The counters a Subscriber and a Publisher keep anyway are exported by
// collectors that read StatsSnapshot when Prometheus scrapes: they add
// nothing to the hot path. Every label value a collector knows of (each
// joined channel, each line, each loss reason, each message type) is always
// exported, at 0 until something is counted, so a missing series never
// stands for zero. Latencies, which need one observation per message, come
// from the optional observers LatencyMetrics and PublisherMetrics. The
// names and what an operator does about each are in docs/operations.md.

// Observer is told the latencies a Subscriber sees (SubscriberConfig.Observer).
// Its methods run on the polling goroutine; Released runs once per message
// and must not allocate.
type Observer interface {
	// Released is called for each stream message just before the handler
	// gets it, with the feed handler's send timestamp from the message,
	// when the datagram was received (0 if unknown) and the release time
	// (the clock read once per packet, before its messages are released),
	// all Unix nanoseconds.
	Released(ch int, sendNs, recvNs, nowNs int64)
	// Recovered is called with each recovery answer's latency, from the
	// request to the answer.
	Recovered(ch int, latency time.Duration)
	// Flush is called about every 100 ms, when the subscriber publishes its
	// counters, so the observer can make what it gathered visible to other
	// goroutines.
	Flush()
}

// PublisherObserver is told about a Publisher's packets
// (PublisherConfig.Observer). Its methods run on the publishing goroutine,
// once per flush and once per packet, and must not allocate.
type PublisherObserver interface {
	// Flushed is called when a channel's pending messages are sent, with
	// how long the oldest of them waited, in nanoseconds.
	Flushed(ch int, waitNs int64)
	// Packet is called for every data packet sent, with its message count.
	Packet(ch int, messages int)
}

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

// LatencyMetrics is an Observer that keeps Prometheus histograms of the
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

// Released implements Observer.
func (m *LatencyMetrics) Released(ch int, sendNs, recvNs, nowNs int64) {
	if sendNs > 0 {
		m.live[latSendToRelease].add(nowNs - sendNs)
	}
	if recvNs > 0 {
		m.live[latRecvToRelease].add(nowNs - recvNs)
	}
}

// Recovered implements Observer.
func (m *LatencyMetrics) Recovered(ch int, latency time.Duration) {
	m.live[latRecovery].add(int64(latency))
}

// Flush implements Observer: it publishes the histograms to Collect.
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

// PublisherMetrics is a PublisherObserver that keeps Prometheus histograms
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

// Flushed implements PublisherObserver.
func (m *PublisherMetrics) Flushed(ch int, waitNs int64) { m.flushDelay.Observe(seconds(waitNs)) }

// Packet implements PublisherObserver.
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

// lossReasonNames are the reason label values of lost messages, by
// seqgap.LossReason.
var lossReasonNames = func() []string {
	out := make([]string, lossReasons)
	for r := 1; r < lossReasons; r++ {
		out[r] = seqgap.LossReason(r).String()
	}
	return out
}()

// messageLines are the lines of released messages, by the index of
// ChannelStats.Messages (lineIndex); their names are the label values.
var messageLines = [3]Line{LineA, LineB, LineRecovery}

type subscriberCollector struct {
	metricSet
	s *Subscriber

	packets, wins, messages, gaps, requests, recovered, lost, lostRanges, dupMsgs, dupPkts,
	reordered, overflow, foreign, malformed, sessions, abrupt, staleEvents, heartbeats,
	stale, datagrams, bytes, kernelDrops, ringFull, truncated, recvErrors, ringUsed, ringCap,
	rcvBuf, instGaps, snapshots, recRequests, recFailed, recMessages *prometheus.Desc
}

// NewSubscriberCollector returns a Prometheus collector of s's counters
// (tickcast_subscriber_*), per joined channel and line where they are kept
// so. It reads StatsSnapshot at scrape time, so registering it costs the
// subscriber nothing per message. The latency histograms are LatencyMetrics,
// set as SubscriberConfig.Observer and registered apart.
func NewSubscriberCollector(s *Subscriber) prometheus.Collector {
	c := &subscriberCollector{s: s}
	ch, cl := []string{"channel"}, []string{"channel", "line"}
	const p = "tickcast_subscriber_"
	c.packets = c.desc(p+"packets_total", "Packets of the channel's session taken from each line.", cl...)
	c.wins = c.desc(p+"line_wins_total", "Packets that brought at least one new message first, by line (A/B arbitration).", cl...)
	c.messages = c.desc(p+"messages_total", "Messages released to the handler, by the line that delivered them first (A, B or recovery).", cl...)
	c.gaps = c.desc(p+"gaps_total", "Sequence gaps detected.", ch...)
	c.requests = c.desc(p+"recovery_requests_total", "Missing ranges requested from recovery.", ch...)
	c.recovered = c.desc(p+"messages_recovered_total", "Messages released that came from recovery.", ch...)
	c.lost = c.desc(p+"messages_lost_total", "Messages declared lost for good, by reason.", "channel", "reason")
	c.lostRanges = c.desc(p+"lost_ranges_total", "Lost ranges reported.", ch...)
	c.dupMsgs = c.desc(p+"duplicate_messages_total", "Messages dropped as already released or held.", ch...)
	c.dupPkts = c.desc(p+"duplicate_packets_total", "Packets that brought nothing new (the other line's copies included).", ch...)
	c.reordered = c.desc(p+"reordered_messages_total", "Messages that arrived early and waited in the reorder window.", ch...)
	c.overflow = c.desc(p+"window_overflow_messages_total", "Messages that arrived beyond the reorder window and forced a loss.", ch...)
	c.foreign = c.desc(p+"foreign_packets_total", "Packets of another channel or an older session dropped on the channel's groups.", ch...)
	c.malformed = c.desc(p+"malformed_packets_total", "Datagrams that are not valid MoldUDP64 packets.", ch...)
	c.sessions = c.desc(p+"sessions_started_total", "Sessions started.", ch...)
	c.abrupt = c.desc(p+"sessions_abrupt_total", "Sessions replaced by a new one without end of session.", ch...)
	c.staleEvents = c.desc(p+"stale_events_total", "Times the channel went stale (nothing received, not even heartbeats).", ch...)
	c.heartbeats = c.desc(p+"heartbeats_total", "Heartbeats received.", ch...)
	c.stale = c.desc(p+"channel_stale", "1 while the channel receives nothing, not even heartbeats, before its session ended; else 0.", ch...)
	c.datagrams = c.desc(p+"datagrams_received_total", "Datagrams the transport received into the ring.", cl...)
	c.bytes = c.desc(p+"received_bytes_total", "Payload bytes the transport received.", cl...)
	c.kernelDrops = c.desc(p+"kernel_drops_total", "Datagrams the kernel (or NIC) dropped for the line's socket: the receiver fell behind.", cl...)
	c.ringFull = c.desc(p+"ring_full_total", "Times the receive loop found every ring slot lent out (ring overflow).", cl...)
	c.truncated = c.desc(p+"truncated_datagrams_total", "Datagrams larger than a ring slot, dropped.", cl...)
	c.recvErrors = c.desc(p+"receive_errors_total", "Receive errors other than no data.", cl...)
	c.ringUsed = c.desc(p+"ring_used_slots", "Received datagrams waiting in the ring when last sampled (about every 100 ms).", cl...)
	c.ringCap = c.desc(p+"ring_slots", "Receive ring size.", cl...)
	c.rcvBuf = c.desc(p+"receive_buffer_bytes", "Socket receive buffer the kernel granted.", cl...)
	c.instGaps = c.desc(p+"instrument_gaps_total", "Per-instrument sequence skips (instruments touched by a lost range).")
	c.snapshots = c.desc(p+"snapshots_total", "Snapshots applied (late join or a range too old to retransmit).")
	c.recRequests = c.desc(p+"recovery_client_requests_total", "Requests the recovery client sent (a range may take several).")
	c.recFailed = c.desc(p+"recovery_failures_total", "Recovery requests that failed: error reply, timeout or queue full.")
	c.recMessages = c.desc(p+"recovery_client_messages_total", "Messages received in recovery replies.")
	return c
}

// Collect implements prometheus.Collector.
func (c *subscriberCollector) Collect(out chan<- prometheus.Metric) {
	total, chans := c.s.StatsSnapshot(nil)
	for i := range chans {
		cs := &chans[i]
		ch := strconv.Itoa(cs.Channel)
		t := &cs.Tracker
		for l := range 2 {
			line := Line(l).String()
			counter(out, c.packets, t.PacketsOnLine[l], ch, line)
			counter(out, c.wins, t.WinsPerLine[l], ch, line)
		}
		for l, line := range messageLines {
			counter(out, c.messages, cs.Messages[l], ch, line.String())
		}
		counter(out, c.gaps, t.Gaps, ch)
		counter(out, c.requests, t.Requests, ch)
		counter(out, c.recovered, t.Recovered, ch)
		for r := 1; r < lossReasons; r++ {
			counter(out, c.lost, cs.Lost[r], ch, lossReasonNames[r])
		}
		counter(out, c.lostRanges, t.LostRanges, ch)
		counter(out, c.dupMsgs, t.DupMessages, ch)
		counter(out, c.dupPkts, t.DupPackets, ch)
		counter(out, c.reordered, t.Held, ch)
		counter(out, c.overflow, t.Overflow, ch)
		counter(out, c.foreign, cs.Foreign, ch)
		counter(out, c.malformed, cs.Malformed, ch)
		counter(out, c.sessions, t.Sessions, ch)
		counter(out, c.abrupt, t.AbruptEnds, ch)
		counter(out, c.staleEvents, t.StaleEvents, ch)
		counter(out, c.heartbeats, t.Heartbeats, ch)
		stale := 0.0
		if cs.Stale {
			stale = 1
		}
		gauge(out, c.stale, stale, ch)
		for l := range cs.NumLines {
			ls := &cs.Lines[l]
			line := Line(l).String()
			counter(out, c.datagrams, ls.Datagrams, ch, line)
			counter(out, c.bytes, ls.Bytes, ch, line)
			counter(out, c.kernelDrops, ls.KernelDrops, ch, line)
			counter(out, c.ringFull, ls.RingFull, ch, line)
			counter(out, c.truncated, ls.Truncated, ch, line)
			counter(out, c.recvErrors, ls.Errors, ch, line)
			gauge(out, c.rcvBuf, float64(ls.RcvBuf), ch, line)
			if ls.RingCap > 0 {
				gauge(out, c.ringUsed, float64(ls.RingUsed), ch, line)
				gauge(out, c.ringCap, float64(ls.RingCap), ch, line)
			}
		}
	}
	counter(out, c.instGaps, total.InstrumentGaps)
	counter(out, c.snapshots, total.Snapshots)
	var rs struct{ Requests, Failed, Recovered uint64 }
	if rec := c.s.cfg.Recovery; rec != nil {
		st := rec.Stats()
		rs.Requests, rs.Failed, rs.Recovered = st.Requests, st.Failed, st.Recovered
	}
	counter(out, c.recRequests, rs.Requests)
	counter(out, c.recFailed, rs.Failed)
	counter(out, c.recMessages, rs.Recovered)
}

// messageTypes are the feed's message types, each exported as a type label
// value of tickcast_publisher_messages_in_total; any other counts as
// "other".
var messageTypes = []feed.Type{feed.TypeDefinition, feed.TypeQuote, feed.TypeTrade, feed.TypeTradeBust,
	feed.TypeStatus, feed.TypeLevelDelta}

type publisherCollector struct {
	metricSet
	p      *Publisher
	source string

	in, unknown, messages, packets, heartbeats, flushes, nextSeq, datagrams, bytes, syscalls,
	errors, retries *prometheus.Desc
}

// NewPublisherCollector returns a Prometheus collector of p's counters
// (tickcast_publisher_*), per channel and line where they are kept so;
// source names the upstream feed in the source label of the messages taken
// in. It reads StatsSnapshot at scrape time, so registering it costs the
// publisher nothing per message. The packet histograms are
// PublisherMetrics, set as PublisherConfig.Observer and registered apart.
func NewPublisherCollector(p *Publisher, source string) prometheus.Collector {
	c := &publisherCollector{p: p, source: source}
	ch, cl := []string{"channel"}, []string{"channel", "line"}
	const n = "tickcast_publisher_"
	c.in = c.desc(n+"messages_in_total", "Normalized messages taken from the upstream source, by source and message type.", "source", "type")
	c.unknown = c.desc(n+"unknown_instrument_messages_total", "Messages dropped because their instrument was never defined.")
	c.messages = c.desc(n+"messages_total", "Messages published on the channel (each line carries all of them).", ch...)
	c.packets = c.desc(n+"packets_total", "Data packets sent on the channel (each line carries all of them).", ch...)
	c.heartbeats = c.desc(n+"heartbeats_total", "Heartbeats sent on the channel's idle lines.", ch...)
	c.flushes = c.desc(n+"flushes_total", "Packets flushed, by why: the input drained, the packet was full, or the max-delay deadline passed.", "reason")
	c.nextSeq = c.desc(n+"next_sequence", "Sequence number the channel's next message will get.", ch...)
	c.datagrams = c.desc(n+"datagrams_sent_total", "Datagrams sent (data packets, heartbeats, end of session), per channel and line.", cl...)
	c.bytes = c.desc(n+"sent_bytes_total", "Datagram payload bytes sent, per channel and line.", cl...)
	c.syscalls = c.desc(n+"send_syscalls_total", "Send system calls made, per channel and line.", cl...)
	c.errors = c.desc(n+"send_errors_total", "Send errors, per channel and line.", cl...)
	c.retries = c.desc(n+"send_retries_total", "Sends repeated after a partial send or a transient error, per channel and line.", cl...)
	return c
}

// Collect implements prometheus.Collector.
func (c *publisherCollector) Collect(out chan<- prometheus.Metric) {
	total, in, chans := c.p.StatsSnapshot(nil)
	other := uint64(0)
	for _, v := range in {
		other += v
	}
	for _, t := range messageTypes {
		counter(out, c.in, in.Of(t), c.source, t.String())
		other -= in.Of(t)
	}
	counter(out, c.in, other, c.source, "other")
	counter(out, c.unknown, total.UnknownInstrument)
	counter(out, c.flushes, total.FlushDrain, "drain")
	counter(out, c.flushes, total.FlushFull, "full")
	counter(out, c.flushes, total.FlushDeadline, "deadline")
	for i := range chans {
		cs := &chans[i]
		ch := strconv.Itoa(cs.Channel)
		counter(out, c.messages, cs.Messages, ch)
		counter(out, c.packets, cs.Packets, ch)
		counter(out, c.heartbeats, cs.Heartbeats, ch)
		gauge(out, c.nextSeq, float64(cs.NextSeq), ch)
		for l := range cs.NumLines {
			ls := &cs.Lines[l]
			line := Line(l).String()
			counter(out, c.datagrams, ls.Datagrams, ch, line)
			counter(out, c.bytes, ls.Bytes, ch, line)
			counter(out, c.syscalls, ls.Syscalls, ch, line)
			counter(out, c.errors, ls.Errors, ch, line)
			counter(out, c.retries, ls.Retries, ch, line)
		}
	}
}
