package tickcast

import (
	"context"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud/udp"
)

// convoyHandler counts channel 0's messages and, at its trigger-th, sends
// one packet to channel 1 (the send puts it in channel 1's socket before it
// returns, on loopback). The trigger lies past the first poll, which takes
// at most 4096 messages of a channel and finds channel 1's socket empty. It records how many of channel 0's messages had
// been delivered when channel 1's arrived, and stops Run then.
type convoyHandler struct {
	trigger uint64
	send    func()
	ch0     uint64
	at      uint64 // channel 0's count when channel 1's message arrived
	got     bool
	cancel  context.CancelFunc
}

func (h *convoyHandler) Message(ch int, _ uint64, _ []byte, _ int64) {
	switch ch {
	case 0:
		h.ch0++
		if h.ch0 == h.trigger {
			h.send()
		}
	case 1:
		h.at, h.got = h.ch0, true
		h.cancel()
	}
}

func (h *convoyHandler) Event(*Event) {}

// TestDirectNoConvoy: in direct mode, a channel with a backlog keeps the
// receive loop busy; a packet that arrives meanwhile on another channel,
// whose socket the loop had found empty, is delivered within a poll or two
// rather than after the whole backlog. (The readiness marks are refreshed
// between busy polls; without that, channel 1 waits until channel 0's
// socket is empty, unless a poll comes more than pollStall after the last.)
func TestDirectNoConvoy(t *testing.T) {
	const backlog = 40000
	ga, _ := testGroups(t)
	udpc := udp.Config{Mode: udp.Direct, CPU: -1}
	sub, err := NewSubscriber(SubscriberConfig{Channels: 2, GroupA: ga, NewReceiver: udp.Receivers(udpc)})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// A poll that follows the last by more than pollStall marks every
	// socket ready; a long first poll here would hide the convoy.
	sub.stallNs = int64(time.Hour)
	if got := sub.ReceiverStats(0, LineA).RcvBuf; got < backlog*1024 {
		t.Skipf("receive buffer granted %d bytes, too small to hold a backlog of %d datagrams (raise net.core.rmem_max)", got, backlog)
	}
	senders := make([]*udp.Sender, 2)
	for ch := range senders {
		g, err := ChannelGroup(ga, ch)
		if err != nil {
			t.Fatal(err)
		}
		if senders[ch], err = udp.NewSender(udp.Config{Group: g.Addr(), Port: int(g.Port()), CPU: -1}); err != nil {
			t.Fatal(err)
		}
		defer senders[ch].Close()
	}
	now := time.Now()
	s0, s1 := NewSession(0, now), NewSession(1, now)
	b, _ := mold.NewBuilder(1400)
	one := func(s mold.Session, seq uint64) []byte {
		b.Start(s, seq)
		b.Add(make([]byte, 40))
		return append([]byte(nil), b.Finish()...)
	}
	// Channel 0's backlog, queued in its socket before the loop runs.
	batch := make([][]byte, 0, 64)
	for seq := uint64(1); seq <= backlog; seq++ {
		batch = append(batch, one(s0, seq))
		if len(batch) == cap(batch) || seq == backlog {
			if err := senders[0].Send(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := &convoyHandler{trigger: 5000, cancel: cancel, send: func() {
		if err := senders[1].Send([][]byte{one(s1, 1)}); err != nil {
			t.Error(err)
		}
	}}
	sub.Run(ctx, h, nil)
	if !h.got {
		t.Fatalf("channel 1's packet never arrived (channel 0 delivered %d)", h.ch0)
	}
	t.Logf("channel 1's message arrived after %d of channel 0's %d (sent after the %dth)", h.at, backlog, h.trigger)
	if h.at >= backlog/2 {
		t.Errorf("channel 1's message waited for %d of channel 0's backlog of %d: a busy channel starves the others", h.at-h.trigger, backlog)
	}
}
