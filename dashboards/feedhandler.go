package dashboards

// FeedHandler returns the feed handler's dashboard: messages in and out,
// packets, batching and flushes, heartbeats, what each line sends, the
// recovery server's work and rejections, the retransmission stores, the
// feed handlers that are up, and the NATS connection.
func FeedHandler() *Dashboard {
	const (
		pub = "tickcast_publisher_"
		rec = "tickcast_recovery_"
		ar  = "tickcast_archive_"
	)
	b := newBuilder("tickcast-feedhandler", "tickcast / Feed handler",
		"The feed handler: tickcast_publisher_* and tickcast_recovery_* (docs/operations.md says what each metric means and what to do about it).",
		pub+"messages_total")

	b.stats(
		stat("Messages in /s", "Normalized messages taken from the upstream source.", "mps", nil,
			q(rate(pub+"messages_in_total", byInstance, ""), "in")),
		stat("Messages out /s", "Messages published on the selected channels (each line carries all of them).", "mps", nil,
			q(rate(pub+"messages_total", byChannel, ""), "out")),
		stat("Packets /s", "Data packets sent on the selected channels.", "pps", nil,
			q(rate(pub+"packets_total", byChannel, ""), "packets")),
		stat("Recovery rejected", "Recovery requests answered with an error in the time range, not-yet (routine probes past the end of a stream) excluded.", "short", ptr(1),
			q(increase(rec+"rejected_total", `{instance=~"$instance",reason!="not-yet"}`), "rejected")),
	)

	b.row("Publishing")
	b.graph(timeseries("Messages in /s by type", "Normalized messages taken from the upstream source, by message type; flat means the source stalled.", "mps",
		q(rate(pub+"messages_in_total", byInstance, "instance, source, type"), "{{type}} ({{source}}) {{instance}}")))
	b.graph(timeseries("Messages out /s by channel", "Messages published per channel (each line carries all of them).", "mps",
		q(rate(pub+"messages_total", byChannel, "instance, channel"), "channel {{channel}} {{instance}}")))
	b.graph(timeseries("Packets /s by channel", "Data packets sent per channel.", "pps",
		q(rate(pub+"packets_total", byChannel, "instance, channel"), "channel {{channel}} {{instance}}")))
	b.graph(timeseries("Messages per packet", "Quantiles of the messages in each data packet (all channels); low means small packets, more packets per message.", "short",
		q(quantile(0.5, pub+"messages_per_packet", byInstance, "instance"), "p50 {{instance}}"),
		q(quantile(0.99, pub+"messages_per_packet", byInstance, "instance"), "p99 {{instance}}"),
		q(`sum by (instance) (rate(`+pub+`messages_per_packet_sum`+byInstance+`[$__rate_interval])) / sum by (instance) (rate(`+pub+`messages_per_packet_count`+byInstance+`[$__rate_interval]))`, "mean {{instance}}")))
	b.graph(stacked("Flushes /s by reason", "Why packets went out: the input drained, the packet was full, or the --max-delay deadline passed. Many deadline flushes: input arrives too slowly to fill packets.", "pps",
		q(rate(pub+"flushes_total", byInstance, "instance, reason"), "{{reason}} {{instance}}")))
	b.graph(timeseries("Flush delay", "How long the oldest message of each flush waited in a partly filled packet; bounded by --max-delay while input flows.", "s",
		quantiles(pub+"flush_delay_seconds")...))
	b.graph(timeseries("Heartbeats /s by channel", "Heartbeats sent on the channels' idle lines.", "pps",
		q(rate(pub+"heartbeats_total", byChannel, "instance, channel"), "channel {{channel}} {{instance}}")))
	b.graph(timeseries("Sent bytes /s by line", "Datagram payload bytes sent, per channel and line.", "Bps",
		q(rate(pub+"sent_bytes_total", byChannel, "instance, channel, line"), "channel {{channel}} {{line}} {{instance}}")))
	b.graph(timeseries("Send errors, retries, unknown instruments /s", "Send errors (check the interface and routes) and sends repeated after a partial send or a transient error (the socket send buffer is too small); and messages dropped because their instrument was never defined.", "short",
		q(rate(pub+"send_errors_total", byChannel, "instance, channel, line"), "errors channel {{channel}} {{line}} {{instance}}"),
		q(rate(pub+"send_retries_total", byChannel, "instance, channel, line"), "retries channel {{channel}} {{line}} {{instance}}"),
		q(rate(pub+"unknown_instrument_messages_total", byInstance, "instance"), "unknown instrument {{instance}}")))
	b.graph(timeseries("Another publisher on the feed's groups: packets /s", "Packets of another session heard on this feed handler's own groups (it listens for them). Anything above zero: another publisher sends there; see the runbook, \"Competing publishers\".", "pps",
		q(rate(pub+"foreign_packets_total", byChannel, "instance, channel"), "foreign channel {{channel}} {{instance}}")))

	b.row("Recovery server")
	b.graph(timeseries("Recovery requests and messages served /s", "Retransmit requests received and messages sent back; rising means subscribers are losing packets.", "short",
		q(rate(rec+"requests_total", byInstance, "instance"), "requests {{instance}}"),
		q(rate(rec+"messages_served_total", byInstance, "instance"), "messages served {{instance}}")))
	b.graph(stacked("Recovery rejected /s by reason", "Retransmit and snapshot requests answered with an error, by reason; not-yet is routine (probes past the end of a stream).", "short",
		q(rate(rec+"rejected_total", byInstance, "instance, reason"), "{{reason}} {{instance}}")))
	b.graph(timeseries("Snapshots served /s", "Snapshots served (late joiners, ranges too old to retransmit) and the messages they carried.", "short",
		q(rate(rec+"snapshots_served_total", byInstance, "instance"), "snapshots {{instance}}"),
		q(rate(rec+"snapshot_messages_served_total", byInstance, "instance"), "snapshot messages {{instance}}")))
	b.graph(timeseries("Live NATS publishing /s", "Datagrams published on the live NATS subjects, and those that could not be (NATS down or slow).", "short",
		q(rate(rec+"live_published_total", byInstance, "instance"), "published {{instance}}"),
		q(rate(rec+"live_publish_errors_total", byInstance, "instance"), "errors {{instance}}")))

	b.row("Retransmission stores")
	b.graph(timeseries("Store depth (messages)", "Messages each channel's retransmission store holds; at --store-messages the oldest are dropped.", "short",
		q(sumBy("instance, channel", rec+"store_messages"+byChannel), "channel {{channel}} {{instance}}")))
	b.graph(timeseries("Store size", "Message bytes each channel's retransmission store holds; at --store-bytes the oldest are dropped.", "bytes",
		q(sumBy("instance, channel", rec+"store_bytes"+byChannel), "channel {{channel}} {{instance}}")))
	b.graph(timeseries("Retransmittable range (messages)", "next - oldest sequence: how far back a subscriber can recover; older gaps need a snapshot.", "short",
		q(sumBy("instance, channel", rec+"store_next_sequence"+byChannel+" - "+rec+"store_oldest_sequence"+byChannel), "channel {{channel}} {{instance}}")))
	b.graph(timeseries("Oldest sequence in store", "Oldest sequence number each channel's store can retransmit (the next one when empty).", "none",
		q(sumBy("instance, channel", rec+"store_oldest_sequence"+byChannel), "oldest channel {{channel}} {{instance}}")))
	b.graph(timeseries("Next sequence", "Sequence number each channel's next message will get, as the publisher and the store see it.", "none",
		q(sumBy("instance, channel", pub+"next_sequence"+byChannel), "publisher channel {{channel}} {{instance}}"),
		q(sumBy("instance, channel", rec+"store_next_sequence"+byChannel), "store channel {{channel}} {{instance}}")))

	b.row("Archive")
	b.graph(timeseries("Archived messages and bytes /s", "What the archive (feedhandler --archive) stores per second: messages in the packets recorded, and record bytes before JetStream's compression. Flat while the feed publishes: recording stopped.", "short",
		q(rate(ar+"messages_total", byInstance, "instance"), "messages {{instance}}"),
		q(rate(ar+"bytes_total", byInstance, "instance"), "bytes {{instance}}")))
	b.graph(timeseries("Archive lag and messages not archived", "Time from a record's first packet to JetStream's acknowledgement (seconds), and messages sent but not archived in the interval (each run written as a loss record). Any loss: see the runbook, alert TickcastArchiveIncomplete.", "short",
		q(sumBy("instance", ar+"lag_seconds"+byInstance), "lag s {{instance}}"),
		q(`sum by (instance) (increase(`+ar+`lost_messages_total`+byInstance+`[$__rate_interval]))`, "not archived {{instance}}")))

	b.row("Feed handlers")
	b.graph(timeseries("Feed handlers up", "1 while Prometheus scrapes a feed handler, 0 while it cannot: every target of the feedhandler job, whatever instances are selected, so that a lost peer of a hot-hot pair shows. See the runbook, \"Feed handler down\".", "short",
		q(`max by (instance) (up{job="feedhandler"})`, "{{instance}}")))
	b.natsRow()
	b.rdmaRow()
	return b.d
}
