// Package fh is the feed handler: it takes a normalized market-data feed from
// a source and publishes it as sequenced MoldUDP64 packets on multicast
// channels, keeps what it sent for recovery, and serves that recovery over
// NATS. cmd/feedhandler is a thin program around it (flags, the source the
// flags name, the --demo subscriber); a program can embed the same feed
// handler with New and Run.
//
// # The model
//
// A feed handler is these parts, wired together by New:
//
//   - The source (Config.Source, a feed.Source) yields normalized messages:
//     the deterministic synthetic feed of package feed, an ITCH 5.0 file
//     read through package feed/itch, or any other implementation. Run reads
//     it until io.EOF, Config.Duration or cancellation.
//
//   - The publisher (tickcast.Publisher) spreads instruments over
//     Config.Channels channels, batches each channel's messages into
//     MoldUDP64 packets (flushed when full or after Config.MaxDelay) and
//     sends every packet on the channel's A-line group, and its B-line
//     group when Config.GroupB is set. Channel c uses the group address
//     plus c. An idle channel sends a heartbeat every Config.Heartbeat.
//     The transport is UDP multicast or RDMA UD multicast (Config.Transport).
//
//   - The retransmission store (one recovery.Channel per channel) receives
//     every packet the publisher sends, heartbeats and end of session
//     included, bounded by Config.StoreMessages and Config.StoreBytes.
//
//   - The recovery server (recovery.Server) answers retransmit and snapshot
//     requests from the stores on the subjects tickcast.FEED.* of
//     Config.FeedName, at most Config.MaxRetransmit messages a request and
//     Config.RateLimit messages per second a requester.
//
//   - NATS is embedded (a server started on Config.NATSListen, with the
//     users of Config.NATSUsers) unless Config.NATSURL names an external
//     server or cluster.
//
//   - The live NATS feed (Config.NATSLive) also publishes every datagram on
//     tickcast.FEED.live.CH, the fallback for subscribers without
//     multicast, but a channel's only while it is wanted, so that it costs
//     the multicast path one atomic load per datagram otherwise: while a
//     consumer's demand lease runs (ud/natslive announces demand on
//     tickcast.FEED.demand.CH every second; a lease lasts five seconds)
//     or, with the embedded server, while anyone subscribes.
//     Config.NATSLiveAlways publishes every datagram regardless, for
//     consumers on an external server that cannot announce demand. A
//     consumer recovers what was published before its demand took effect
//     as a gap.
//
//   - Metrics: with Config.MetricsAddr, a Prometheus endpoint serves the
//     publisher's counters and packet histograms, the recovery server's
//     counters, the stores' depth and the Go runtime's.
//
//   - The session record (Config.SessionRecord): on a NATS cluster with
//     JetStream, the feed's sessions are a key-value entry that every feed
//     handler of the feed shares. Two feed handlers on two hosts then
//     publish the same sessions, one line each (Config.Line), and serve
//     recovery in one queue group; one that joins running sessions first
//     replays its input silently to its peer's position (docs/hot-hot.md).
//
// After the source ends, Run sends end of session on every channel and,
// for Config.Linger, keeps serving recovery and repeats the end of session
// every heartbeat interval, so that a subscriber that lost it still learns
// where the session ended.
//
// A store refusing a packet (which only a broken stream does) is logged, at
// most ten times, and counted in Summary.StoreErrors; publishing goes on.
//
// # Errors
//
// New reports a bad Config as a *ConfigError naming the field; Validate
// gives the same check without starting anything.
package fh
