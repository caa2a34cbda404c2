package tickprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
)

// messageTypes are the feed's message types, each exported as a type label
// value of tickcast_publisher_messages_in_total; any other counts as
// "other".
var messageTypes = []feed.Type{feed.TypeDefinition, feed.TypeQuote, feed.TypeTrade, feed.TypeTradeBust,
	feed.TypeStatus, feed.TypeLevelDelta}

type publisherCollector struct {
	metricSet
	p      *tickcast.Publisher
	source string

	in, unknown, messages, packets, heartbeats, flushes, nextSeq, datagrams, bytes, syscalls,
	errors, retries, segmented *prometheus.Desc
}

// NewPublisherCollector returns a Prometheus collector of p's counters
// (tickcast_publisher_*), per channel and line where they are kept so;
// source names the upstream feed in the source label of the messages taken
// in. It reads StatsSnapshot at scrape time, so registering it costs the
// publisher nothing per message. The packet histograms are
// PublisherMetrics, set as tickcast.PublisherConfig.Observer and registered
// apart.
func NewPublisherCollector(p *tickcast.Publisher, source string) prometheus.Collector {
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
	c.segmented = c.desc(n+"segmented_datagrams_total", "Datagrams sent in runs of equal length by segmentation offload (UDP GSO), per channel and line; among datagrams_sent_total.", cl...)
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
			line := cs.LineOf[l].String()
			counter(out, c.datagrams, ls.Datagrams, ch, line)
			counter(out, c.bytes, ls.Bytes, ch, line)
			counter(out, c.syscalls, ls.Syscalls, ch, line)
			counter(out, c.errors, ls.Errors, ch, line)
			counter(out, c.retries, ls.Retries, ch, line)
			counter(out, c.segmented, ls.Segmented, ch, line)
		}
	}
}

// foreignCollector exports the feed handler's count of packets on its own
// groups that it did not send.
type foreignCollector struct {
	counts func() []uint64
	desc   *prometheus.Desc
}

// NewForeignPacketsCollector returns a collector of
// tickcast_publisher_foreign_packets_total, by channel: counts returns the
// packets received on each channel's groups that the feed handler did not
// send (another publisher on them).
func NewForeignPacketsCollector(counts func() []uint64) prometheus.Collector {
	return &foreignCollector{counts: counts, desc: prometheus.NewDesc("tickcast_publisher_foreign_packets_total",
		"Packets received on the channel's groups that this feed handler did not send: another publisher is on them.", []string{"channel"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *foreignCollector) Describe(out chan<- *prometheus.Desc) { out <- c.desc }

// Collect implements prometheus.Collector.
func (c *foreignCollector) Collect(out chan<- prometheus.Metric) {
	for ch, n := range c.counts() {
		out <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), strconv.Itoa(ch))
	}
}
