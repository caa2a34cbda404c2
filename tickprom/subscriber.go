package tickprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/seqgap"
)

// lossReasonNames are the reason label values of lost messages, by
// seqgap.LossReason.
var lossReasonNames = func() []string {
	out := make([]string, len(tickcast.ChannelStats{}.Missing))
	for r := 1; r < len(out); r++ {
		out[r] = seqgap.LossReason(r).String()
	}
	return out
}()

// messageLines are the lines of released messages, by the index of
// tickcast.ChannelStats.Messages; their names are the label values.
var messageLines = [len(tickcast.ChannelStats{}.Messages)]tickcast.Line{tickcast.LineA, tickcast.LineB, tickcast.LineRecovery}

type subscriberCollector struct {
	metricSet
	s *tickcast.Subscriber

	packets, wins, messages, filtered, gaps, requests, recovered, lost, lostRanges, dupMsgs, dupPkts,
	reordered, overflow, foreign, competing, malformed, unauth, noKey, sessions, abrupt, staleEvents, heartbeats,
	stale, datagrams, bytes, kernelDrops, ringFull, truncated, recvErrors, ringUsed, ringCap,
	rcvBuf, instGaps, snapshots, recRequests, recFailed, recMessages, recArchive, recHeard, recBackedOff, conflated *prometheus.Desc
}

// NewSubscriberCollector returns a Prometheus collector of s's counters
// (tickcast_subscriber_*), per joined channel and line where they are kept
// so. It reads StatsSnapshot at scrape time, so registering it costs the
// subscriber nothing per message. The latency histograms are LatencyMetrics,
// set as tickcast.SubscriberConfig.Observer and registered apart.
func NewSubscriberCollector(s *tickcast.Subscriber) prometheus.Collector {
	c := &subscriberCollector{s: s}
	ch, cl := []string{"channel"}, []string{"channel", "line"}
	const p = "tickcast_subscriber_"
	c.packets = c.desc(p+"packets_total", "Packets of the channel's session taken from each line.", cl...)
	c.wins = c.desc(p+"line_wins_total", "Packets that brought at least one new message first, by line (A/B arbitration).", cl...)
	c.messages = c.desc(p+"messages_total", "Messages released to the handler, by the line that delivered them first (A, B or recovery).", cl...)
	c.filtered = c.desc(p+"filtered_messages_total", "Messages the symbol filter held back (instruments not asked for), recovered ones included.", ch...)
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
	c.competing = c.desc(p+"competing_packets_total", "Packets of a competing session (another publisher on the channel's groups) dropped while the followed session is alive.", ch...)
	c.malformed = c.desc(p+"malformed_packets_total", "Datagrams that are not valid MoldUDP64 packets.", ch...)
	c.unauth = c.desc(p+"unauthenticated_packets_total", "Data packets whose seal did not verify under the followed session's keys (forged or altered), dropped.", ch...)
	c.noKey = c.desc(p+"no_key_packets_total", "Data packets of a session whose keys are not held (a new session before its keys came, or a forgery), dropped; genuine ones are recovered.", ch...)
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
	c.recArchive = c.desc(p+"recovery_client_archive_messages_total", "Messages received in recovery replies that the feed handler read from its archive: evicted from its store.")
	c.recHeard = c.desc(p+"recovery_client_heard_total", "Missing ranges answered by a repair another subscriber asked for, without a request of this one's.")
	c.recBackedOff = c.desc(p+"recovery_client_backed_off_total", "Requests that waited a random back-off because losses were shared with other subscribers.")
	c.conflated = c.desc(p+"conflated_messages_total", "Quotes and level deltas superseded by a later one of their instrument or price level while the channel conflated (--conflate), not delivered.", ch...)
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
			line := tickcast.Line(l).String()
			counter(out, c.packets, t.PacketsOnLine[l], ch, line)
			counter(out, c.wins, t.WinsPerLine[l], ch, line)
		}
		for l, line := range messageLines {
			counter(out, c.messages, cs.Messages[l], ch, line.String())
		}
		counter(out, c.filtered, cs.Filtered, ch)
		counter(out, c.gaps, t.Gaps, ch)
		counter(out, c.requests, t.Requests, ch)
		counter(out, c.recovered, t.Recovered, ch)
		for r := 1; r < len(cs.Missing); r++ {
			counter(out, c.lost, cs.Missing[r], ch, lossReasonNames[r])
		}
		counter(out, c.lostRanges, t.LostRanges, ch)
		counter(out, c.dupMsgs, t.Duplicates, ch)
		counter(out, c.dupPkts, t.DuplicatePackets, ch)
		counter(out, c.reordered, t.Reordered, ch)
		counter(out, c.overflow, t.WindowFull, ch)
		counter(out, c.foreign, cs.Foreign, ch)
		counter(out, c.competing, t.Competing, ch)
		counter(out, c.malformed, cs.Malformed, ch)
		counter(out, c.unauth, cs.Unauthenticated, ch)
		counter(out, c.noKey, cs.NoKey, ch)
		counter(out, c.conflated, cs.Conflated, ch)
		counter(out, c.sessions, t.Sessions, ch)
		counter(out, c.abrupt, t.SessionsAbrupt, ch)
		counter(out, c.staleEvents, t.Stale, ch)
		counter(out, c.heartbeats, t.Heartbeats, ch)
		stale := 0.0
		if cs.Stale {
			stale = 1
		}
		gauge(out, c.stale, stale, ch)
		for l := range cs.NumLines {
			ls := &cs.Lines[l]
			line := tickcast.Line(l).String()
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
	rs := c.s.RecoveryStats()
	counter(out, c.recRequests, rs.Requests)
	counter(out, c.recFailed, rs.Failed)
	counter(out, c.recMessages, rs.Recovered)
	counter(out, c.recArchive, rs.RecoveredArchive)
	counter(out, c.recHeard, rs.Heard)
	counter(out, c.recBackedOff, rs.BackedOff)
}
