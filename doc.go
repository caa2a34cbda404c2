// Package tickcast is the client of a tickcast market-data feed: a
// Subscriber receives the feed's sequenced MoldUDP64 multicast channels,
// releases every message in order exactly once, and recovers what the
// network lost; a Publisher is the sending side a feed handler (package fh)
// is built on.
//
// # The feed
//
// A feed is a number of channels (SubscriberConfig.Channels, at most
// config.MaxChannels). Each channel is one MoldUDP64 stream with its own
// session and sequence numbers, on its own multicast group: channel c of a
// feed whose channel 0 is on group G is on ChannelGroup(G, c). A channel
// may be sent twice, on an A line and a B line (two groups, or two feed
// handlers publishing the same stream); the subscriber takes each message
// from whichever line brings it first. Instruments map to channels by a
// fixed hash (feed.ChannelOf), so a subscriber interested in a few symbols
// joins only their channels (ChannelsOf).
//
// # Receiving
//
// NewSubscriber joins the channels of SubscriberConfig.Join (all by
// default) with the transport SubscriberConfig.NewReceiver opens for each
// line: udp.Receivers for UDP multicast, rdma.Receivers for RDMA UD
// multicast, or a function around natslive.NewReceiver for the TCP fallback
// over NATS. Datagrams land in pre-allocated receive rings. Poll takes
// what the rings hold, runs each channel's sequence tracker (package
// seqgap) and calls the Handler:
// Message for every message, in sequence order per channel, and Event for
// what happened to the stream (a session started or ended, a gap, a
// recovery request, messages declared lost with their exact range and
// reason, a channel gone silent). Run is the loop around Poll that sleeps
// when every ring is empty; a program with an event loop of its own calls
// Poll from it. Neither allocates per message.
//
// The receive modes trade CPU for latency: with udp.Direct (the lowest
// latency that still sleeps) the goroutine that runs the handler reads the
// sockets itself, so a packet reaches the handler without any thread
// handing it over; udp.DirectSpin with SubscriberConfig.Spin never sleeps;
// udp.Blocking and udp.BusyPoll have a receive thread per line.
//
// # Gaps and recovery
//
// A sequence gap waits a short while for the packet to turn up late or on
// the other line, then is asked for from the feed handler's retransmission
// store over NATS (SubscriberConfig.Recovery, a recovery.Client). A
// subscriber that joins late, or whose gap the store no longer holds, loads
// a snapshot of the channel's instruments instead. Without recovery, or
// when it fails, the gap is reported lost (an Event with the range and the
// reason) after seqgap.Config.LostAfter. Nothing is lost silently: for
// every channel, what the publisher sent equals what was released plus
// what the snapshot covered plus what was reported lost.
//
// # Counters and metrics
//
// Stats and StatsSnapshot give the subscriber's counters; the JSON summary
// of cmd/subscriber and the Prometheus metrics use the same names. An
// Observer sees the latency of every released message. The Prometheus
// collectors are in a package of their own, so that embedding the client
// does not bring in the Prometheus client library.
//
// # Publishing
//
// A Publisher (NewPublisher) spreads normalized messages (package feed)
// over the channels, packs each channel's messages into MoldUDP64 packets
// up to the transport's datagram size, and sends them on every line with
// PublisherConfig.NewSender's transport (udp.Senders, rdma.Senders). A
// packet is flushed when the input drains, when it is full, or after
// PublisherConfig.MaxDelay; an idle channel sends heartbeats. OnPacket
// hands every packet to the retransmission store before it is sent.
// Publisher.Run publishes a feed.Source at a paced rate; Publish, Flush and
// Poll let a program drive it message by message.
package tickcast
