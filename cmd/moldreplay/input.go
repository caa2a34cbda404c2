package main

import (
	"io"
	"net/netip"

	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/feed/pcap"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// Input is what the exchange serves: messages in order, each with the time
// it was recorded, in nanoseconds on any clock (an ITCH timestamp counts from
// midnight). The exchange paces by these times and sends the messages
// unchanged. An ITCH file is one Input (itchInput); a capture of MoldUDP64
// packets is another (pcapInput).
type Input interface {
	// Next returns the next message and its recorded time. The message is
	// valid until the next call. At the end of the input it returns io.EOF;
	// input that is not valid returns an error saying where.
	Next() (msg []byte, ns int64, err error)
}

// itchTimestampEnd is where an ITCH 5.0 message's timestamp ends: type (1),
// stock locate (2), tracking number (2), timestamp (6).
const itchTimestampEnd = 11

// itchInput reads an ITCH 5.0 file in NASDAQ's format (a length-prefixed
// message after another), plain or gzip. A message too short to hold a
// timestamp (an empty one, or of a type ITCH 5.0 does not define) is sent
// as it is, at the time of the message before it.
type itchInput struct {
	rd   *itch.Reader
	last int64
}

// newITCHInput returns the Input of r, plain or gzip (told apart by the gzip
// magic bytes).
func newITCHInput(r io.Reader) (*itchInput, error) {
	dr, err := itch.Decompress(r)
	if err != nil {
		return nil, err
	}
	return &itchInput{rd: itch.NewReader(dr)}, nil
}

// Next implements Input.
func (in *itchInput) Next() ([]byte, int64, error) {
	b, _, err := in.rd.Next()
	if err != nil {
		return nil, 0, err
	}
	if len(b) >= itchTimestampEnd {
		in.last = itch.Message(b).Timestamp()
	}
	return b, in.last, nil
}

// pcapInput reads a capture of MoldUDP64 packets carrying ITCH 5.0, pcap or
// pcapng (package pcap): the messages of the session it carries, in
// sequence order, A and B copies counted once, each at the capture time of
// the packet that carried it. The exchange numbers them from 1 in its own
// session: a gap in the capture (messages never captured) is not a gap of
// the feed it serves, and is counted in CaptureStats.
type pcapInput struct {
	msgs *pcap.Messages
}

// CaptureStats are what a pcap input read and skipped, for the summary.
type CaptureStats struct {
	*pcap.Counts
	*pcap.MoldCounts
}

// newPcapInput returns the Input of the capture r, keeping the datagrams to
// dst (zero: every MoldUDP64 datagram). malformed is called with each
// record or datagram skipped as malformed, and event with each gap of the
// capture's sequence and each session start or end in it, unsequenced
// once if the capture's packets carry sequence number 0 (pcap.Config).
func newPcapInput(r io.Reader, dst netip.AddrPort, malformed func(error), event func(*seqgap.Event),
	unsequenced func(mold.Session)) (*pcapInput, error) {
	m, err := pcap.NewMessages(r, pcap.Config{Dst: dst, OnMalformed: malformed, OnEvent: event, OnUnsequenced: unsequenced})
	if err != nil {
		return nil, err
	}
	return &pcapInput{msgs: m}, nil
}

// Next implements Input.
func (in *pcapInput) Next() ([]byte, int64, error) {
	b, _, err := in.msgs.Next()
	if err != nil {
		return nil, 0, err
	}
	return b, in.msgs.Time(), nil
}

// Stats returns what the input read so far.
func (in *pcapInput) Stats() CaptureStats {
	return CaptureStats{Counts: in.msgs.Counts(), MoldCounts: in.msgs.MoldCounts()}
}
