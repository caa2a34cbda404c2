// Package recovery fills the gaps multicast leaves, over NATS.
//
// On the feed handler, a Channel per multicast channel keeps a bounded
// retransmission store (every message of the current session, byte for byte,
// up to limits in messages and bytes) and the snapshot state (each
// instrument's last definition, status, quote and trade, its price levels
// as the level deltas describe them, and the channel sequence they
// reflect). The publisher feeds it every packet it sends. A
// Server answers requests from the stores:
//
//   - retransmit: a MoldUDP64 re-request (session, first sequence, count) on
//     tickcast.FEED.retransmit.CH is answered with MoldUDP64 packets carrying
//     exactly those messages, byte-identical to the originals, as a
//     multi-part reply that ends with a final marker, or with a typed error
//     reply (unknown session, too old, not yet, too many, rate limited); a
//     request that asks for a repair (Tickcast-Answer: repair) is answered
//     once per range within a short window, on tickcast.FEED.repair.CH,
//     which every client hears, and each requester gets a pointer to it;
//   - snapshot: a request on tickcast.FEED.snapshot.CH is answered with the
//     channel's state in the same multi-part form, with the sequence it
//     reflects;
//
// and publishes every datagram on tickcast.FEED.live.CH for subscribers that
// cannot receive multicast, a channel's only while it is wanted
// (ServerConfig.Live): consumers announce their demand on
// tickcast.FEED.demand.CH every DemandEvery, which keeps the channel's live
// feed on for a lease (ServerConfig.LiveLease) and is answered with it; with
// the embedded NATS server, a subscriber to the live subject is enough
// (ServerConfig.LiveInterest). Otherwise a datagram costs the publishing
// path one atomic load and is counted as skipped.
//
// On the subscriber, a Client takes the requests the seqgap trackers put in
// their outboxes (Client.Request, which never waits), sends them from its own
// goroutine, and hands the answers back to the goroutine that polls the
// receive rings (Drain). Each answer is sorted into a seqgap.Outcome
// (recovered packets, a snapshot, refused, retry, or the session ended), which
// the polling goroutine gives to its tracker (seqgap.Tracker.Answer) without
// reading error codes: recovered messages are released in order like any
// other, refused ranges are reported lost, ranges that failed in transit are
// asked for again. Nothing on the receive path waits for NATS. The client
// listens to the repair subjects: a repair answers its requests of the same
// range, and a range already repaired for another subscriber is not asked
// for at all.
//
// docs/recovery.md is the protocol's contract: subjects, headers, error codes.
package recovery
