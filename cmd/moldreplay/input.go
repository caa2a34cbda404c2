package main

import (
	"io"

	"github.com/tickcast/tickcast/feed/itch"
)

// Input is what the exchange serves: messages in order, each with the time
// it was recorded, in nanoseconds on any clock (an ITCH timestamp counts from
// midnight). The exchange paces by these times and sends the messages
// unchanged. An ITCH file is one Input (itchInput); a capture of MoldUDP64
// packets, whose messages carry the same timestamps, is another.
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
