// Package upstream receives an exchange's live MoldUDP64 multicast feed, on
// an A and an optional B line, recovers what the lines lose from the
// exchange's MoldUDP64 re-request server, and yields the messages in
// sequence order: Feed implements itch.MessageReader, so that
// itch.NewMessageSource normalizes a live ITCH 5.0 feed as itch.NewSource
// normalizes a file.
//
// # Arbitration
//
// Both lines' packets go to one seqgap.Tracker (lines 0 and 1): the first
// copy of a message wins, the other is counted as a duplicate; packets out
// of order wait in the tracker's window; what neither line brought is a gap.
// A packet of another session replaces the current one when it has ended or
// gone silent, as the tracker rules (seqgap's Sessions).
//
// # Re-requests
//
// With Config.Rerequest, each gap the tracker requests is cut into requests
// of at most Config.MaxCount messages, standard 20-byte MoldUDP64 request
// packets (mold.Request) sent over UDP unicast to the server from one local
// socket; at most Config.InFlight are outstanding at once, the rest queue.
// The server answers with ordinary downstream packets sent to that socket;
// they go to the tracker as recovered messages. An answer that covers only
// the start of a request (a server answers one packet's worth) is followed
// at once by a request for the rest. A request not answered within
// Config.Timeout is sent again, at most Config.Retries times; then it is
// given up, and the tracker declares the range lost as soon as the stream
// reaches it (reason refused). Whatever the requests, a gap still open
// Config.GapDeadline after it was detected is lost (reason timeout): a
// server that answers too slowly, or one that is gone, costs at most that.
// An answer that is not a MoldUDP64 packet is counted (Stats.BadAnswers),
// reported to Config.OnError and dropped; an answer of another session, or
// of messages already had, is counted by the tracker and dropped.
//
// A session first met further in than sequence 1 (a late start) is a gap
// 1..S-1 like any other: it is asked for from sequence 1, at full speed
// (InFlight requests of MaxCount messages at a time), while the live
// packets, beyond what the tracker's window can hold, only tell how far the
// stream reaches (they are counted in Stats.Deferred and recovered in turn);
// once the replay has caught up the live packets are taken as they come.
// Config.StartFrom skips that: the stream starts at that sequence, and what
// lies before it is reported lost (reason skipped).
//
// # Losses
//
// What cannot be recovered is never dropped in silence: where it was lost,
// between the messages before and after it, Next returns itch.ErrLost once
// (itch.Source then reports every instrument it knows book-incomplete and
// flags its quotes from then on), Config.OnEvent gets the tracker's
// EventLost with the exact range and reason, and Stats.Lost counts the
// messages by reason. Without Config.Rerequest nothing is requested: a gap
// waits GapDeadline for the other line and is then lost.
//
// # Waiting
//
// Next blocks in the kernel (the receivers' notifier) until a message is
// released, Config.IdleWait passes (it returns feed.ErrIdle, so that the
// caller can send heartbeats downstream and call again), or the session
// ends and nothing is outstanding (io.EOF). It does not allocate per message.
package upstream
