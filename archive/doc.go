// Package archive records a feed's packets, exactly as sent, to a JetStream
// stream, and reads them back.
//
// # Records
//
// Packets are stored many to a JetStream message, a record, since
// JetStream stores tens of thousands of messages a second and a feed sends
// hundreds of thousands of packets. A record holds one channel's packets of
// one session, consecutive in sequence, each with its 2-byte length, after
// a 58-byte header (see Decode for the layout): the channel, the session,
// the messages First..Next-1 it covers, when the recorder took its first
// and last packet, and a CRC-32C of the whole record. A reader checks all of
// it, so a corrupted record is reported with its place in the stream and
// never delivered.
//
// A loss record covers messages the archive does not hold: the recorder had
// no free buffer for them (JetStream fell behind) or JetStream refused
// their record. A reader of the archive therefore sees every place where it
// is incomplete, except the tail a killed feed handler had not yet stored
// (at most RecordDelay of packets).
//
// # Stream and subjects
//
// The stream of feed FEED is TICKCAST_ARCHIVE_FEED, with channel CH's
// records under tickcast.FEED.archive.CH, file storage, retention by age and
// bytes (the oldest records go first), and a duplicate window of two
// minutes: each record's message id is SESSION.CHANNEL.FIRST-NEXT, so that a
// record published twice is stored once.
//
// # Recording
//
// Recorder.Record is called on the sending path with each packet as sent.
// It copies the packet into its channel's record buffer under the
// channel's lock and returns; it never waits for JetStream and allocates
// nothing. A goroutine stores a record when it is full (RecordBytes), when
// its first packet is RecordDelay old, at a new session and at the end of
// a session, and publishes asynchronously, up to 64 records awaiting their
// acknowledgement.
//
// # Reading
//
// A Reader reads one channel's records in the order they were stored; a
// ReplayReceiver delivers their packets into a ring as a multicast
// receiver does (ud.Receiver), opening sealed packets with the key
// records, putting records stored out of order back in order (a record
// published again after a JetStream leader's death lands after later
// ones), and delivering each message once when two hot-hot feed handlers
// recorded it. A MergeReceiver replays and then joins the live stream
// where the two meet. A Retriever reads a range of messages back for a
// retransmission the feed handler's store can no longer make. A file
// written by FileWriter (tickarchive export) is replayed with no NATS.
package archive
