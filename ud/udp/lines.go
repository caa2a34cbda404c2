package udp

import (
	"fmt"

	"github.com/tickcast/tickcast/ud"
)

// ForLine returns c for one line: Group and Port are the line's group.
func (c Config) ForLine(id ud.LineID) Config {
	c.Group, c.Port = id.Group.Addr(), int(id.Group.Port())
	return c
}

// Senders returns a ud.NewSenderFunc (the hook tickcast.PublisherConfig.
// NewSender takes) that opens a Sender per line: c with the line's group
// and port (ForLine). c's Group and Port are ignored.
func Senders(c Config) ud.NewSenderFunc {
	return func(id ud.LineID) (ud.Sender, error) {
		s, err := NewSender(c.ForLine(id))
		if err != nil {
			return nil, fmt.Errorf("udp sender %s: %w", id.Group, err)
		}
		return s, nil
	}
}

// Receivers returns a ud.NewReceiverFunc (the hook
// tickcast.SubscriberConfig.NewReceiver takes) that opens a Receiver per
// line: c with the line's group and port (ForLine) and the subscriber's
// Notifier. c's Group, Port and Notifier are ignored.
func Receivers(c Config) ud.NewReceiverFunc {
	return func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
		lc := c.ForLine(id)
		lc.Notifier = n
		r, err := NewReceiver(lc)
		if err != nil {
			return nil, fmt.Errorf("udp receiver %s: %w", id.Group, err)
		}
		return r, nil
	}
}
