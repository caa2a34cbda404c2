package ud

import (
	"fmt"
	"net/netip"
	"strconv"
)

// Line names where a channel's packets come from: one of its two redundant
// multicast lines (A and B), or recovery. The numbers are those package
// seqgap counts lines by: 0 and 1 index its per-line counters, and
// LineRecovery equals seqgap.LineRecovery.
type Line int

// Lines.
const (
	// LineA is a channel's first (or only) multicast line.
	LineA Line = 0
	// LineB is a channel's redundant second line.
	LineB Line = 1
	// LineRecovery stands for messages that came from recovery (NATS)
	// rather than from a line, and for events that no line's packet caused.
	LineRecovery Line = -1
)

// String returns "A", "B" or "recovery" (Line(n) for any other value).
func (l Line) String() string {
	switch l {
	case LineA:
		return "A"
	case LineB:
		return "B"
	case LineRecovery:
		return "recovery"
	}
	return "Line(" + strconv.Itoa(int(l)) + ")"
}

// LineID is the identity of the one line a Sender or Receiver carries: the
// channel, which of its lines, and the multicast group that line is on. A
// transport addressed by something else (a NATS subject, say) finds it from
// Channel and Line rather than from Group.
type LineID struct {
	// Channel is the channel's number, from 0.
	Channel int
	// Line is LineA or LineB.
	Line Line
	// Group is the line's multicast group and port.
	Group netip.AddrPort
}

// String returns "channel CH line L (GROUP)".
func (id LineID) String() string {
	return "channel " + strconv.Itoa(id.Channel) + " line " + id.Line.String() + " (" + id.Group.String() + ")"
}

// NewSenderFunc opens the Sender of one line. Publishers take one as the
// hook by which a transport is plugged in (tickcast.PublisherConfig.NewSender);
// each transport package provides a constructor for it (udp.Senders,
// rdma.Senders).
type NewSenderFunc func(id LineID) (Sender, error)

// NewReceiverFunc opens the Receiver of one line. Subscribers take one as
// the hook by which a transport is plugged in
// (tickcast.SubscriberConfig.NewReceiver). A receiver with a receive loop
// signals n whenever it publishes datagrams; one without (Filler) in mode
// Direct registers its socket with n (Notifier.Watch).
type NewReceiverFunc func(id LineID, n *Notifier) (Receiver, error)

// OpenSenders returns a NewSenderFunc that opens each line's Sender with
// open, and names the transport and the line's group in its errors ("udp
// sender 239.77.0.1:31001: ..."). Transport packages build their hooks on it.
func OpenSenders[S Sender](transport string, open func(id LineID) (S, error)) NewSenderFunc {
	return func(id LineID) (Sender, error) {
		s, err := open(id)
		if err != nil {
			return nil, fmt.Errorf("%s sender %s: %w", transport, id.Group, err)
		}
		return s, nil
	}
}

// OpenReceivers returns a NewReceiverFunc that opens each line's Receiver
// with open, and names the transport and the line's group in its errors
// ("udp receiver 239.77.0.1:31001: ..."). Transport packages build their
// hooks on it.
func OpenReceivers[R Receiver](transport string, open func(id LineID, n *Notifier) (R, error)) NewReceiverFunc {
	return func(id LineID, n *Notifier) (Receiver, error) {
		r, err := open(id, n)
		if err != nil {
			return nil, fmt.Errorf("%s receiver %s: %w", transport, id.Group, err)
		}
		return r, nil
	}
}
