package dashboards

// Subscriber returns the subscribers' dashboard: messages per line and A/B
// arbitration, gaps, recovery and losses, duplicates and stray packets,
// silent lines and stale channels, the transport (kernel drops, receive
// ring), the latencies and the NATS connection.
func Subscriber() *Dashboard {
	const sub = "tickcast_subscriber_"
	b := newBuilder("tickcast-subscriber", "tickcast / Subscriber",
		"Subscribers: tickcast_subscriber_* (docs/operations.md says what each metric means and what to do about it).",
		sub+"messages_total")

	b.stats(
		stat("Messages /s", "Messages released to the handlers on the selected channels.", "mps", nil,
			q(rate(sub+"messages_total", byChannel, ""), "messages")),
		stat("Lost", "Messages declared lost for good in the time range: the handler never saw them.", "short", ptr(1),
			q(increase(sub+"messages_lost_total", byChannel), "lost")),
		stat("Stale channels", "Channels receiving nothing, not even heartbeats, before their session ended.", "short", ptr(1),
			q(`sum(`+sub+`channel_stale`+byChannel+`)`, "stale")),
		stat("Send → release p99", "99th percentile of the feed handler's send timestamp to the release to the handler (all channels).", "s", ptr(0.001),
			q(`histogram_quantile(0.99, sum by (le) (rate(`+sub+`send_to_release_seconds_bucket`+byInstance+`[$__rate_interval])))`, "p99")),
	)

	b.row("Stream")
	b.graph(stacked("Messages /s by line", "Messages released to the handler, by the line that delivered them first (A, B or recovery); a rising recovery share means steady loss.", "mps",
		q(rate(sub+"messages_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("A/B wins /s", "Packets that brought at least one new message first, by line; a line that never wins is late or broken.", "pps",
		q(rate(sub+"line_wins_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Packets /s by line", "Packets of the channel's session taken from each line; one far below the other is losing packets upstream.", "pps",
		q(rate(sub+"packets_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Silent lines", "1 while a line of a channel carries no datagram, not even a heartbeat, and the channel's other line does: the feed handler of that line, or its path, is down (see the runbook, \"A line stopped\"); else 0.", "short",
		q(`sum by (instance, channel, line) (rate(`+sub+`datagrams_received_total`+byChannel+`[$__rate_interval])) == bool 0`+
			` and on (instance, channel) sum by (instance, channel) (rate(`+sub+`datagrams_received_total`+byChannel+`[$__rate_interval])) > 0`,
			"channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Gaps and recovery /s", "Sequence gaps detected, missing ranges requested from recovery, and messages released that came from recovery.", "short",
		q(rate(sub+"gaps_total", byChannel, "instance, channel"), "gaps channel {{channel}} {{instance}}"),
		q(rate(sub+"recovery_requests_total", byChannel, "instance, channel"), "requests channel {{channel}} {{instance}}"),
		q(rate(sub+"messages_recovered_total", byChannel, "instance, channel"), "recovered channel {{channel}} {{instance}}")))
	b.graph(stacked("Lost /s by reason", "Messages declared lost for good, by reason (timeout, refused, session-replaced, window-full).", "mps",
		q(rate(sub+"messages_lost_total", byChannel, "instance, channel, reason"), "{{reason}} channel {{channel}} {{instance}}")))
	b.graph(timeseries("Duplicates /s", "Messages and packets that brought nothing new; with A and B lines about half the packets are duplicates.", "short",
		q(rate(sub+"duplicate_messages_total", byChannel, "instance, channel"), "messages channel {{channel}} {{instance}}"),
		q(rate(sub+"duplicate_packets_total", byChannel, "instance, channel"), "packets channel {{channel}} {{instance}}")))
	b.graph(timeseries("Reordered and window overflow /s", "Messages that arrived early and waited in the reorder window, and those beyond it that forced a loss.", "mps",
		q(rate(sub+"reordered_messages_total", byChannel, "instance, channel"), "reordered channel {{channel}} {{instance}}"),
		q(rate(sub+"window_overflow_messages_total", byChannel, "instance, channel"), "overflow channel {{channel}} {{instance}}")))
	b.graph(timeseries("Foreign and malformed packets /s", "Packets of another channel or an older session on the channel's groups (fix the group plan), and datagrams that are not MoldUDP64.", "pps",
		q(rate(sub+"foreign_packets_total", byChannel, "instance, channel"), "foreign channel {{channel}} {{instance}}"),
		q(rate(sub+"malformed_packets_total", byChannel, "instance, channel"), "malformed channel {{channel}} {{instance}}")))
	b.graph(timeseries("Competing publisher: packets /s", "Packets of a competing session on the channel's groups (another publisher: a script, a second feed handler), dropped while the followed session is alive or confirmed by recovery. Anything above zero: see the runbook, \"Competing publishers\".", "pps",
		q(rate(sub+"competing_packets_total", byChannel, "instance, channel"), "competing channel {{channel}} {{instance}}")))
	b.graph(timeseries("Stale channels and stale events", "1 while a channel receives nothing, not even heartbeats, before its session ended; and the times channels went stale in the time range.", "short",
		q(sumBy("instance, channel", sub+"channel_stale"+byChannel), "stale channel {{channel}} {{instance}}"),
		q(`sum by (instance, channel) (increase(`+sub+`stale_events_total`+byChannel+`[$__range]))`, "stale events channel {{channel}} {{instance}}")))
	b.graph(timeseries("Heartbeats /s", "Heartbeats received.", "pps",
		q(rate(sub+"heartbeats_total", byChannel, "instance, channel"), "channel {{channel}} {{instance}}")))
	b.graph(timeseries("Sessions", "Sessions started, and sessions replaced without end of session (a feed handler restart or crash), in the time range.", "short",
		q(`sum by (instance, channel) (increase(`+sub+`sessions_started_total`+byChannel+`[$__range]))`, "started channel {{channel}} {{instance}}"),
		q(`sum by (instance, channel) (increase(`+sub+`sessions_abrupt_total`+byChannel+`[$__range]))`, "abrupt channel {{channel}} {{instance}}")))
	b.graph(timeseries("Snapshots and instrument gaps /s", "Snapshots applied (late join, range too old), and per-instrument sequence skips (instruments a lost range touched).", "short",
		q(rate(sub+"snapshots_total", byInstance, "instance"), "snapshots {{instance}}"),
		q(rate(sub+"instrument_gaps_total", byInstance, "instance"), "instrument gaps {{instance}}")))

	b.row("Transport")
	b.graph(timeseries("Kernel drops /s", "Datagrams the kernel dropped for the line's socket: the receiver fell behind; raise --rcvbuf and net.core.rmem_max.", "pps",
		q(rate(sub+"kernel_drops_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Ring occupancy", "Received datagrams waiting in the receive ring (sampled about every 100 ms), as a share of the ring; sustained high occupancy warns before overflow.", "percentunit",
		q(`sum by (instance, channel, line) (`+sub+`ring_used_slots`+byChannel+`) / sum by (instance, channel, line) (`+sub+`ring_slots`+byChannel+`)`, "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Ring full /s", "Times the receive loop found every ring slot lent out: the consumer falls behind the feed.", "short",
		q(rate(sub+"ring_full_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Datagrams received /s", "Datagrams the transport took into the ring, per line.", "pps",
		q(rate(sub+"datagrams_received_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Received bytes /s", "Payload bytes the transport received, per line.", "Bps",
		q(rate(sub+"received_bytes_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Truncated datagrams and receive errors /s", "Datagrams larger than a ring slot (set --max-datagram as the feed handler's) and receive errors.", "short",
		q(rate(sub+"truncated_datagrams_total", byChannel, "instance, channel, line"), "truncated channel {{channel}} {{line}} {{instance}}"),
		q(rate(sub+"receive_errors_total", byChannel, "instance, channel, line"), "errors channel {{channel}} {{line}} {{instance}}")))

	b.row("Latency")
	b.graph(timeseries("Send → release latency", "Feed handler's send timestamp in each message to its release to the handler (tick to subscriber; includes the hosts' clock offset).", "s",
		quantiles(sub+"send_to_release_seconds")...))
	b.graph(timeseries("Receive → release latency", "Receipt of each message's datagram to its release: time in the ring, the reorder window or recovery. High while send → receive is low: the subscriber itself is slow.", "s",
		quantiles(sub+"receive_to_release_seconds")...))
	b.graph(timeseries("Recovery latency", "Recovery request to answer.", "s",
		q(quantile(0.5, sub+"recovery_latency_seconds", byInstance, "instance"), "p50 {{instance}}"),
		q(quantile(0.99, sub+"recovery_latency_seconds", byInstance, "instance"), "p99 {{instance}}")))
	b.graph(timeseries("Recovery client /s", "Requests the recovery client sent, messages received in replies, and requests that failed (error reply, timeout or queue full).", "short",
		q(rate(sub+"recovery_client_requests_total", byInstance, "instance"), "requests {{instance}}"),
		q(rate(sub+"recovery_client_messages_total", byInstance, "instance"), "messages {{instance}}"),
		q(rate(sub+"recovery_failures_total", byInstance, "instance"), "failures {{instance}}")))
	b.natsRow()
	b.rdmaRow()
	return b.d
}
