package fh

import (
	"log/slog"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/udp"
)

// senders returns the publisher's NewSender for c.Transport and the
// MaxDatagram to give the publisher: the one place the feed handler builds
// its transport. With rdma and no MaxDatagram, the packet size comes from
// the port's active MTU (a MaxDatagram larger than it fails: too large).
func senders(c *Config) (ud.NewSenderFunc, int) {
	if c.Transport == "rdma" {
		// The transport's event lines (rdma event ...) go to the feed
		// handler's log, in its format.
		return rdma.Senders(rdma.Config{Interface: c.Interface, MaxDatagram: c.MaxDatagram, CPU: -1,
			Logger: slog.New(zerolog.NewSlogHandler(c.Log))}), c.MaxDatagram
	}
	return udp.Senders(udp.Config{Interface: c.Interface, TTL: c.TTL, MaxDatagram: c.MaxDatagram, CPU: -1, GSO: c.GSO}), c.MaxDatagram
}
