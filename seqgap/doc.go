// Package seqgap decides, for one channel (one MoldUDP64 stream, possibly
// received on an A and a B line), what a subscriber has, what it lacks and
// what to ask for. It is pure bookkeeping: no sockets, no goroutines, no
// timers and no allocation per message. The caller feeds it packets, the
// clock and recovery's answers; it releases messages in order to an Output,
// reports events there, and puts its requests for missing ranges in an
// outbox.
//
// # State
//
// A Tracker knows the current session and three sequence numbers:
//
//	next   the next sequence to release; everything below it was released or
//	       declared lost, exactly once
//	high   one past the highest sequence known to exist (from data packets,
//	       heartbeats and end of session)
//	window next .. next+Window-1: messages that arrived early are copied out
//	       of the receive slot into a held slot here
//
// Sequences in [next, high) that are not held are missing. They are kept as a
// short ordered list of gaps, each with the time it was detected; adjacent
// gaps are coalesced.
//
// # Arrivals
//
// For each message of a data packet, with sequence s:
//
//   - s < next, or s already held: a duplicate, counted and dropped. This is
//     also how the second copy of an A/B pair is discarded: the first arrival
//     wins, and each line's wins are counted.
//   - s == next: released at once, straight from the packet (no copy); then
//     every held message that has become contiguous is released too.
//   - next < s < next+Window: copied into the window and held.
//   - s >= next+Window: cannot be held. The front of the window is declared
//     lost (window-full), once per packet, until the packet fits: what
//     arrived is never discarded, and the stream never stalls.
//
// A packet that starts past high opens a gap [high, start-1]. A heartbeat or
// end of session carries the publisher's next sequence, so losing the last
// packets before a quiet period opens a gap too (a tail gap).
//
// # Deadlines
//
// Tick(now) is called by the caller's loop; nothing here reads a clock. It
// does four jobs, each a function of its own: it reports a silent channel
// stale (and probes its tail), expires a late join's wait, settles the head
// gaps (lost when LostAfter old, or as soon as the stream reaches a refused
// part), and requests gaps once they are GapDelay old (so that a packet merely
// late, or the other line's copy, can close them first without a request).
// Declaring a gap lost releases the held messages before it, reports the
// exact missing ranges in an EventLost, and moves next past it: the stream
// never stalls and never skips silently. Without Config.Recovery nothing is
// requested: gaps wait LostAfter for late packets and are then lost.
//
// A channel that receives nothing, not even a heartbeat, for StaleAfter is
// reported stale once (EventStale), and fresh again on the next packet.
//
// # Recovery: outbox and answers
//
// As etcd's raft hands its Ready to the caller instead of doing I/O, the
// tracker does not call recovery: each Request (a range, or a late join's
// prefix marked Snapshot) goes into an outbox, a buffer reused from call to
// call, that the caller drains with Requests after Packet and Tick and sends
// once. Every answer comes back through one entry point, Answer, whose
// Outcome says what it is:
//
//	AnswerPackets   recovered messages, released in order like live ones
//	AnswerSnapshot  the caller applied a snapshot: the stream resumes at Next
//	AnswerRefused   recovery cannot serve the range: lost once reached
//	AnswerRetry     failed in transit: asked again within the deadline
//	AnswerEnded     the session ended at Next (a tail gap if messages are
//	                missing, EventSessionEnd once), and the range is refused
//
// Recovered messages of another session, or already released or held, are
// counted (Stats.IgnoredRecov) and dropped; a refusal or retry of another
// session changes nothing.
//
// # Sessions
//
// A packet of another session starts a new stream only when the current one
// has ended, or has sent nothing for StaleAfter; otherwise the two interleave
// (a competing publisher on the group, or a restart while the old session's
// last packets are in flight) and the other session's packets are counted
// (Stats.Competing), reported once (EventCompeting) and dropped. With
// recovery, the tracker asks which session the channel publishes (a Request
// marked Query) at the start of each session and for each new competitor;
// the answer (AnswerSession) confirms the current session or replaces it by
// the one named. With ConfirmFirst the caller also asks before the first
// packet (Tracker.Probe): a first session recovery named, or one met before
// recovery could tell, is released at once; only one other than the session
// named waits for recovery's word. A session followed unconfirmed that
// recovery then replaces while it still sends is reported as competing, and
// what it delivered counted (Stats.Unvetted).
//
// When a session is replaced, whatever the old one still
// lacked is declared lost (reason session-replaced), its held messages are
// released, and it is reported as ended cleanly (end of session was seen,
// EventSessionEnd at that time) or abruptly (EventSessionAbrupt with the last
// sequence known). The new session starts at sequence 1: if its first packet
// starts later, the messages before it form a gap like any other, unless the
// packet lies beyond the window: that is a late join, whose prefix is asked
// for as a snapshot (a Request marked Snapshot) while live messages are held.
// An AnswerSnapshot jumps a stream forward.
//
// A packet with sequence 0, or one that leaps more than 2^32 past the known
// end of its session, is dropped and counted rather than believed.
package seqgap
