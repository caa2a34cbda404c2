package tickcast

import "time"

// Observers.
//
// The counters a Subscriber and a Publisher keep are read with
// StatsSnapshot from any goroutine. Latencies need one observation per
// message, so they go to an optional observer instead. Package tickprom
// exports both to Prometheus (its collectors read StatsSnapshot, its
// LatencyMetrics and PublisherMetrics are these observers); this package
// does not depend on Prometheus.

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
