package fh

import (
	"log/slog"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/shm"
	"github.com/tickcast/tickcast/ud/udp"
)

// senders returns the publisher's NewSender for c.Transport and the
// MaxDatagram to give the publisher: the one place the feed handler builds
// its transport. With rdma and no MaxDatagram, the packet size comes from
// the port's active MTU (a MaxDatagram larger than it fails: too large).
func senders(c *Config) (ud.NewSenderFunc, int) {
	var net ud.NewSenderFunc
	if c.Transport == "rdma" {
		// The transport's event lines (rdma event ...) go to the feed
		// handler's log, in its format.
		net = rdma.Senders(rdma.Config{Interface: c.Interface, MaxDatagram: c.MaxDatagram, CPU: -1,
			Logger: slog.New(zerolog.NewSlogHandler(c.Log))})
	} else {
		net = udp.Senders(udp.Config{Interface: c.Interface, TTL: c.TTL, MaxDatagram: c.MaxDatagram, CPU: -1, GSO: c.GSO})
	}
	if !c.SHM {
		return net, c.MaxDatagram
	}
	slot := c.MaxDatagram
	if slot == 0 {
		slot = 4096 // rdma: the port's MTU, at most 4096
	}
	local := shm.Senders(shm.Config{Dir: c.SHMDir, Feed: c.FeedName, Slots: c.SHMSlots, MaxDatagram: slot,
		FileMode: c.SHMMode, CPU: -1})
	log := c.Log
	return func(id ud.LineID) (ud.Sender, error) {
		n, err := net(id)
		if err != nil || id.Line != ud.LineA {
			return n, err
		}
		l, err := local(id)
		if err != nil {
			n.Close()
			return nil, err
		}
		return &teeSender{Sender: n, local: l, ch: id.Channel, log: log}, nil
	}, c.MaxDatagram
}

// teeSender sends each datagram to the network and writes it to the
// channel's shared-memory ring (Config.SHM). The network's send is the
// result: a failure of the ring is counted and logged, and multicast goes
// on.
type teeSender struct {
	ud.Sender // the network's
	local     ud.Sender
	ch        int
	log       zerolog.Logger
	failures  uint64
}

// Send writes datagrams to the ring, then sends them on the network. The
// ring comes first: it costs the network's send a memory copy (and a futex
// wake while a local reader sleeps), where the network's send would cost
// the local readers a system call's time and the kernel's loopback.
func (t *teeSender) Send(datagrams [][]byte) error {
	if lerr := t.local.Send(datagrams); lerr != nil {
		if t.failures++; t.failures <= 3 || t.failures%100000 == 0 {
			t.log.Error().Err(lerr).Int("channel", t.ch).Uint64("failures", t.failures).
				Msg("shared-memory ring: packets not written; multicast goes on")
		}
	}
	return t.Sender.Send(datagrams)
}

// Segments passes the network sender's answer (ud.Segmenter).
func (t *teeSender) Segments() bool {
	s, ok := t.Sender.(ud.Segmenter)
	return ok && s.Segments()
}

// Close closes both.
func (t *teeSender) Close() error {
	lerr := t.local.Close()
	if err := t.Sender.Close(); err != nil {
		return err
	}
	return lerr
}
