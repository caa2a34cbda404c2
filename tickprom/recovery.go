package tickprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast/recovery"
)

// errorCodes are the reason label values of rejected requests, each
// exported at 0 until counted.
var errorCodes = []recovery.ErrorCode{recovery.CodeBadRequest, recovery.CodeUnknownSession, recovery.CodeTooOld,
	recovery.CodeNotYet, recovery.CodeTooMany, recovery.CodeRateLimited, recovery.CodeUnknownChannel}

type recoveryServerCollector struct {
	srv    *recovery.Server
	stores []*recovery.Channel

	requests, answers, repairs, suppressed, served, rejected, snapshots, snapMsgs, live, liveErrs, liveSkipped, liveDropped, liveDemands,
	storeMsgs, storeBytes, oldest, next *prometheus.Desc
	archiveAnswers, archiveMsgs, archiveMisses *prometheus.Desc
}

// NewRecoveryServerCollector returns a Prometheus collector of the recovery
// server's counters (tickcast_recovery_*) and of the channels' stores
// (depth and retained sequence range, per channel; stores[ch] is channel
// ch's, nil entries are skipped). Both are read at scrape time under their
// own locks.
func NewRecoveryServerCollector(srv *recovery.Server, stores []*recovery.Channel) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("tickcast_recovery_"+name, help, labels, nil)
	}
	return &recoveryServerCollector{srv: srv, stores: stores,
		requests:       d("requests_total", "Retransmit requests received."),
		answers:        d("answers_total", "Retransmit requests answered with messages: inline replies, and repairs (each counted once, however many requests it answers)."),
		repairs:        d("repairs_total", "Repairs published on the repair subjects, heard by every subscriber of the feed."),
		suppressed:     d("requests_suppressed_total", "Retransmit requests answered with a pointer to a repair of the same range published within the repair window."),
		served:         d("messages_served_total", "Messages sent in retransmit replies and repairs."),
		rejected:       d("rejected_total", "Retransmit and snapshot requests answered with an error, by reason.", "reason"),
		snapshots:      d("snapshots_served_total", "Snapshots served."),
		snapMsgs:       d("snapshot_messages_served_total", "Messages sent in snapshots."),
		live:           d("live_published_total", "Datagrams published on the live NATS subjects."),
		liveErrs:       d("live_publish_errors_total", "Datagrams that could not be published on the live NATS subjects."),
		liveSkipped:    d("live_skipped_total", "Datagrams not published on the live NATS subjects because nobody wanted them (no demand lease, no subscriber seen)."),
		liveDemands:    d("live_demands_total", "Demand messages received on the live feed's demand subjects (tickcast.FEED.demand.CH)."),
		liveDropped:    d("live_dropped_total", "Datagrams not published on the live NATS subjects because the queue to NATS was full."),
		archiveAnswers: d("archive_answers_total", "Retransmit requests for ranges evicted from the store answered from the archive (feedhandler --archive)."),
		archiveMsgs:    d("archive_messages_served_total", "Messages sent in retransmit replies and repairs read from the archive."),
		archiveMisses:  d("archive_misses_total", "Ranges evicted from the store that the archive did not hold either (answered too-old)."),
		storeMsgs:      d("store_messages", "Messages the channel's retransmission store holds.", "channel"),
		storeBytes:     d("store_bytes", "Message bytes the channel's retransmission store holds.", "channel"),
		oldest:         d("store_oldest_sequence", "Oldest sequence number the channel's store can retransmit (the next one when empty).", "channel"),
		next:           d("store_next_sequence", "Sequence number of the channel's next message.", "channel"),
	}
}

// Describe implements prometheus.Collector.
func (c *recoveryServerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.answers, c.repairs, c.suppressed, c.served, c.rejected, c.snapshots, c.snapMsgs, c.live,
		c.liveErrs, c.liveSkipped, c.liveDropped, c.liveDemands, c.storeMsgs, c.storeBytes, c.oldest, c.next, c.archiveAnswers, c.archiveMsgs, c.archiveMisses} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *recoveryServerCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := c.srv.Stats()
	counter(c.requests, st.Requests)
	counter(c.answers, st.Answers)
	counter(c.repairs, st.Repairs)
	counter(c.suppressed, st.Suppressed)
	counter(c.served, st.MessagesServed)
	counter(c.snapshots, st.Snapshots)
	counter(c.snapMsgs, st.SnapshotMessages)
	counter(c.live, st.LivePublished)
	counter(c.liveErrs, st.LivePublishErrors)
	counter(c.liveSkipped, st.LiveSkipped)
	counter(c.liveDropped, st.LiveDropped)
	counter(c.liveDemands, st.LiveDemands)
	counter(c.archiveAnswers, st.ArchiveAnswers)
	counter(c.archiveMsgs, st.ArchiveMessages)
	counter(c.archiveMisses, st.ArchiveMisses)
	for _, code := range errorCodes {
		counter(c.rejected, st.Rejected[code], string(code))
		delete(st.Rejected, code)
	}
	for code, n := range st.Rejected { // a code this list does not know yet
		counter(c.rejected, n, string(code))
	}
	for i, store := range c.stores {
		if store == nil {
			continue
		}
		chn := strconv.Itoa(i)
		msgs, bytes := store.Len()
		gauge(c.storeMsgs, float64(msgs), chn)
		gauge(c.storeBytes, float64(bytes), chn)
		gauge(c.oldest, float64(store.Oldest()), chn)
		gauge(c.next, float64(store.Next()), chn)
	}
}
