package tickprom

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast/feed/upstream"
)

type upstreamCollector struct {
	metricSet
	stats func() upstream.Stats

	packets, duplicates, gaps, recovered, lost, malformed, deferred, requests, retries, gaveUp,
	answers, badAnswers, kernelDrops, truncated *prometheus.Desc
}

// NewUpstreamCollector returns a Prometheus collector of a live upstream
// feed's counters (tickcast_upstream_*; package feed/upstream). stats is
// called at scrape time (upstream.Feed.Stats).
func NewUpstreamCollector(stats func() upstream.Stats) prometheus.Collector {
	c := &upstreamCollector{stats: stats}
	const n = "tickcast_upstream_"
	c.packets = c.desc(n+"packets_total", "MoldUDP64 packets received from the exchange, by line.", "line")
	c.kernelDrops = c.desc(n+"kernel_drops_total", "Datagrams of the line the kernel dropped before the feed handler read them.", "line")
	c.truncated = c.desc(n+"truncated_datagrams_total", "Datagrams of the line longer than upstream.MaxDatagram, dropped (their messages are recovered as lost ones).", "line")
	c.duplicates = c.desc(n+"duplicate_messages_total", "Upstream messages dropped as already had (the other line's copies).")
	c.gaps = c.desc(n+"gaps_total", "Upstream sequence gaps detected.")
	c.recovered = c.desc(n+"recovered_messages_total", "Upstream messages recovered from the exchange's re-request server.")
	c.lost = c.desc(n+"lost_messages_total", "Upstream messages lost for good, by reason (timeout, refused, session-replaced, window-full, skipped); each loss is flagged downstream.", "reason")
	c.malformed = c.desc(n+"malformed_datagrams_total", "Line datagrams that are not MoldUDP64 packets, dropped.")
	c.deferred = c.desc(n+"deferred_packets_total", "Live packets beyond the reorder window (a late start), whose messages were re-requested instead.")
	c.requests = c.desc(n+"rerequests_total", "MoldUDP64 re-request packets sent, retries included.")
	c.retries = c.desc(n+"rerequest_retries_total", "Re-request packets sent again after their timeout.")
	c.gaveUp = c.desc(n+"rerequests_given_up_total", "Re-requests given up after their retries; their ranges are lost (reason refused).")
	c.answers = c.desc(n+"rerequest_answers_total", "Answer packets taken from the re-request server.")
	c.badAnswers = c.desc(n+"rerequest_bad_answers_total", "Datagrams from the re-request server that are not MoldUDP64 packets of messages, dropped.")
	return c
}

// Collect implements prometheus.Collector.
func (c *upstreamCollector) Collect(out chan<- prometheus.Metric) {
	st := c.stats()
	for l, name := range [2]string{"a", "b"} {
		counter(out, c.packets, st.Tracker.PacketsOnLine[l], name)
		counter(out, c.kernelDrops, st.Lines[l].KernelDrops, name)
		counter(out, c.truncated, st.Lines[l].Truncated, name)
	}
	counter(out, c.duplicates, st.Tracker.Duplicates)
	counter(out, c.gaps, st.Tracker.Gaps)
	counter(out, c.recovered, st.Tracker.Recovered)
	for i, reason := range upstream.LossReasons() {
		if i > 0 {
			counter(out, c.lost, st.Lost[i], reason)
		}
	}
	counter(out, c.malformed, st.Malformed)
	counter(out, c.deferred, st.Deferred)
	counter(out, c.requests, st.Requests)
	counter(out, c.retries, st.Retries)
	counter(out, c.gaveUp, st.GaveUp)
	counter(out, c.answers, st.Answers)
	counter(out, c.badAnswers, st.BadAnswers)
}
