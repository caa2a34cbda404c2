package tickcast

import (
	"fmt"
	"net/netip"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// UDPConfig holds the UDP multicast settings shared by every line and
// channel of a publisher or subscriber.
type UDPConfig struct {
	// Interface is the local interface address; zero means 127.0.0.1.
	Interface netip.Addr
	// TTL of sent datagrams; 0 keeps them on this host.
	TTL int
	// MaxDatagram is the largest datagram; zero means udp.DefaultMaxDatagram.
	MaxDatagram int
	// RcvBuf is the receive buffer to request; zero means as large as allowed.
	RcvBuf int
	// RingSlots per receiver; zero means udp.DefaultRingSlots.
	RingSlots int
	// Batch is the sendmmsg/recvmmsg batch; zero means udp.DefaultBatch.
	Batch int
	// Mode is the receive mode (blocking or busy-poll).
	Mode udp.Mode
	// CPU pins a busy-poll receive thread; -1 for none.
	CPU int
	// Backoff makes busy-poll receive threads sleep briefly when idle
	// (udp.Config.Backoff).
	Backoff bool
}

func (c UDPConfig) line(group netip.AddrPort, n *ud.Notifier) udp.Config {
	return udp.Config{
		Group:       group.Addr(),
		Port:        int(group.Port()),
		Interface:   c.Interface,
		TTL:         c.TTL,
		MaxDatagram: c.MaxDatagram,
		RcvBuf:      c.RcvBuf,
		RingSlots:   c.RingSlots,
		Batch:       c.Batch,
		Mode:        c.Mode,
		CPU:         c.CPU,
		Backoff:     c.Backoff,
		Notifier:    n,
	}
}

// UDPSenders returns a PublisherConfig.NewSender that opens UDP multicast
// senders.
func UDPSenders(c UDPConfig) func(netip.AddrPort) (ud.Sender, error) {
	return func(g netip.AddrPort) (ud.Sender, error) {
		s, err := udp.NewSender(c.line(g, nil))
		if err != nil {
			return nil, fmt.Errorf("udp sender %s: %w", g, err)
		}
		return s, nil
	}
}

// UDPReceivers returns a SubscriberConfig.NewReceiver that opens UDP
// multicast receivers.
func UDPReceivers(c UDPConfig) func(netip.AddrPort, *ud.Notifier) (ud.Receiver, error) {
	return func(g netip.AddrPort, n *ud.Notifier) (ud.Receiver, error) {
		r, err := udp.NewReceiver(c.line(g, n))
		if err != nil {
			return nil, fmt.Errorf("udp receiver %s: %w", g, err)
		}
		return r, nil
	}
}
