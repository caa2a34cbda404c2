package tickprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tickcast/tickcast/archive"
)

// archiveCollector exports a feed handler's archive recorder's counters.
type archiveCollector struct {
	stats                                                             func() archive.RecorderStats
	records, packets, messages, bytes, lostPackets, lostMsgs, lossRec *prometheus.Desc
	errs, lag, pending, unwritten                                     *prometheus.Desc
}

// NewArchiveCollector exports the counters stats returns (a feed handler's
// archive.Recorder, feedhandler --archive): records, packets, messages
// and bytes stored, what could not be recorded, and how far recording
// lags.
func NewArchiveCollector(stats func() archive.RecorderStats) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("tickcast_archive_"+name, help, nil, nil)
	}
	return &archiveCollector{stats: stats,
		records:     d("records_total", "Records (many packets each) stored in the archive stream and acknowledged by JetStream."),
		packets:     d("packets_total", "Packets stored in the archive, as sent."),
		messages:    d("messages_total", "Messages in the packets stored in the archive."),
		bytes:       d("bytes_total", "Record bytes stored in the archive (before JetStream's compression, if on)."),
		lostPackets: d("lost_packets_total", "Packets sent but not stored in the archive: no free record buffer (JetStream fell behind) or their record refused."),
		lostMsgs:    d("lost_messages_total", "Messages in the packets not stored; each run of them is written to the archive as a loss record."),
		lossRec:     d("loss_records_total", "Loss records stored: places where the archive says it is incomplete."),
		errs:        d("errors_total", "Records and loss records JetStream refused or did not acknowledge in time (its storage full, no stream, no JetStream, no acknowledgement)."),
		unwritten:   d("unwritten_loss_runs_total", "Runs of lost messages no loss record covers: a channel's queue of runs full, or their loss record still refused at the end. Readers see them as gaps."),
		lag:         d("lag_seconds", "Time from the latest stored record's first packet to JetStream's acknowledgement."),
		pending:     d("pending_records", "Records handed to JetStream and not yet acknowledged."),
	}
}

// Describe implements prometheus.Collector.
func (c *archiveCollector) Describe(out chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.packets, c.messages, c.bytes, c.lostPackets, c.lostMsgs, c.lossRec, c.errs, c.unwritten, c.lag, c.pending} {
		out <- d
	}
}

// Collect implements prometheus.Collector.
func (c *archiveCollector) Collect(out chan<- prometheus.Metric) {
	st := c.stats()
	counter := func(d *prometheus.Desc, v uint64) {
		out <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(c.records, st.Records)
	counter(c.packets, st.Packets)
	counter(c.messages, st.Messages)
	counter(c.bytes, st.Bytes)
	counter(c.lostPackets, st.LostPackets)
	counter(c.lostMsgs, st.LostMessages)
	counter(c.lossRec, st.LossRecords)
	counter(c.errs, st.Errors)
	counter(c.unwritten, st.UnwrittenLoss)
	out <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, st.LagSeconds)
	out <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.PendingRecords))
}
