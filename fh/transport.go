package fh

import (
	"net/netip"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/ud"
)

// senders returns the publisher's NewSender for c.Transport and the
// MaxDatagram to give the publisher: the one place the feed handler builds
// its transport. With rdma and no MaxDatagram, the packet size comes from
// the port's active MTU (a MaxDatagram larger than it fails: too large).
func senders(c *Config) (func(netip.AddrPort) (ud.Sender, error), int) {
	if c.Transport == "rdma" {
		return tickcast.RDMASenders(tickcast.RDMAConfig{Interface: c.Interface, MaxDatagram: c.MaxDatagram, CPU: -1}), c.MaxDatagram
	}
	return tickcast.UDPSenders(tickcast.UDPConfig{Interface: c.Interface, TTL: c.TTL, MaxDatagram: c.MaxDatagram, CPU: -1}), c.MaxDatagram
}
