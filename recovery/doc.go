// Package recovery fills the gaps multicast leaves, over NATS.
//
// On the feed handler, a Channel per multicast channel keeps a bounded
// retransmission store (every message of the current session, byte for byte,
// up to limits in messages and bytes) and the snapshot state (each
// instrument's last definition, status, quote and trade, and the channel
// sequence they reflect). The publisher feeds it every packet it sends. A
// Server answers requests from the stores:
//
//   - retransmit: a MoldUDP64 re-request (session, first sequence, count) on
//     tickcast.FEED.retransmit.CH is answered with MoldUDP64 packets carrying
//     exactly those messages, byte-identical to the originals, as a
//     multi-part reply that ends with a final marker, or with a typed error
//     reply (unknown session, too old, not yet, too many, rate limited);
//   - snapshot: a request on tickcast.FEED.snapshot.CH is answered with the
//     channel's state in the same multi-part form, with the sequence it
//     reflects;
//
// and publishes every datagram on tickcast.FEED.live.CH for subscribers that
// cannot receive multicast.
//
// On the subscriber, a Client takes the requests of the seqgap trackers
// (seqgap.Recovery), sends them from worker goroutines, and hands the answers
// back to the goroutine that polls the receive rings (Drain), which gives them
// to the trackers: recovered messages are released in order like any other,
// failed ranges are given up and reported lost. Nothing on the receive path
// waits for NATS.
//
// docs/recovery.md is the protocol's contract: subjects, headers, error codes.
package recovery
