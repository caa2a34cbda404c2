package tickcast

import (
	"fmt"
	"net/netip"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
)

// RDMAConfig holds the RDMA UD multicast settings shared by every line and
// channel of a publisher or subscriber. The transport is built only with
// -tags rdma (see package ud/rdma); otherwise opening a line fails with an
// error wrapping rdma.ErrNotBuilt.
type RDMAConfig struct {
	// Interface is the IPv4 address of the interface whose RDMA device
	// carries the lines. Required: loopback has no RDMA device.
	Interface netip.Addr
	// MaxDatagram caps the datagram size below the port's active MTU; zero
	// means the MTU.
	MaxDatagram int
	// RingSlots per receiver; zero means rdma.DefaultRingSlots.
	RingSlots int
	// Batch is the completion poll and post list size; zero means
	// rdma.DefaultBatch.
	Batch int
	// Mode is the receive mode (blocking or busy-poll).
	Mode rdma.Mode
	// CPU pins a busy-poll receive thread; -1 for none.
	CPU int
}

// line returns the rdma.Config of one group. RDMA multicast is addressed by
// the group address alone: the port plays no part.
func (c RDMAConfig) line(group netip.AddrPort, n *ud.Notifier) rdma.Config {
	return rdma.Config{
		Group:       group.Addr(),
		Interface:   c.Interface,
		MaxDatagram: c.MaxDatagram,
		RingSlots:   c.RingSlots,
		Batch:       c.Batch,
		Mode:        c.Mode,
		CPU:         c.CPU,
		Notifier:    n,
	}
}

// RDMASenders returns a PublisherConfig.NewSender that opens RDMA UD
// multicast senders.
func RDMASenders(c RDMAConfig) func(netip.AddrPort) (ud.Sender, error) {
	return func(g netip.AddrPort) (ud.Sender, error) {
		s, err := rdma.NewSender(c.line(g, nil))
		if err != nil {
			return nil, fmt.Errorf("rdma sender %s: %w", g, err)
		}
		return s, nil
	}
}

// RDMAReceivers returns a SubscriberConfig.NewReceiver that opens RDMA UD
// multicast receivers.
func RDMAReceivers(c RDMAConfig) func(netip.AddrPort, *ud.Notifier) (ud.Receiver, error) {
	return func(g netip.AddrPort, n *ud.Notifier) (ud.Receiver, error) {
		r, err := rdma.NewReceiver(c.line(g, n))
		if err != nil {
			return nil, fmt.Errorf("rdma receiver %s: %w", g, err)
		}
		return r, nil
	}
}
