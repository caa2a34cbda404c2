package rdma

import "github.com/tickcast/tickcast/ud"

// ForLine returns c for one line: Group is the line's group address. RDMA
// multicast is addressed by the group address alone: the port plays no part.
func (c Config) ForLine(id ud.LineID) Config {
	c.Group = id.Group.Addr()
	return c
}

// Senders returns a ud.NewSenderFunc (the hook tickcast.PublisherConfig.
// NewSender takes) that opens a Sender per line: c with the line's group
// (ForLine). c's Group is ignored. Without the verbs backend every open
// fails with an error wrapping ErrNotBuilt.
func Senders(c Config) ud.NewSenderFunc {
	return ud.OpenSenders("rdma", func(id ud.LineID) (*Sender, error) {
		return NewSender(c.ForLine(id))
	})
}

// Receivers returns a ud.NewReceiverFunc (the hook
// tickcast.SubscriberConfig.NewReceiver takes) that opens a Receiver per
// line: c with the line's group (ForLine) and the subscriber's Notifier. c's
// Group and Notifier are ignored. Without the verbs backend every open fails
// with an error wrapping ErrNotBuilt.
func Receivers(c Config) ud.NewReceiverFunc {
	return ud.OpenReceivers("rdma", func(id ud.LineID, n *ud.Notifier) (*Receiver, error) {
		lc := c.ForLine(id)
		lc.Notifier = n
		return NewReceiver(lc)
	})
}
