package udp

import "github.com/tickcast/tickcast/ud"

// ForLine returns c for one line: Group and Port are the line's group.
func (c Config) ForLine(id ud.LineID) Config {
	c.Group, c.Port = id.Group.Addr(), int(id.Group.Port())
	return c
}

// Senders returns a ud.NewSenderFunc (the hook tickcast.PublisherConfig.
// NewSender takes) that opens a Sender per line: c with the line's group
// and port (ForLine). c's Group and Port are ignored.
func Senders(c Config) ud.NewSenderFunc {
	return ud.OpenSenders("udp", func(id ud.LineID) (*Sender, error) {
		return NewSender(c.ForLine(id))
	})
}

// Receivers returns a ud.NewReceiverFunc (the hook
// tickcast.SubscriberConfig.NewReceiver takes) that opens a Receiver per
// line: c with the line's group and port (ForLine) and the subscriber's
// Notifier. c's Group, Port and Notifier are ignored.
func Receivers(c Config) ud.NewReceiverFunc {
	return ud.OpenReceivers("udp", func(id ud.LineID, n *ud.Notifier) (*Receiver, error) {
		lc := c.ForLine(id)
		lc.Notifier = n
		return NewReceiver(lc)
	})
}
