package fh

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
)

// outageSender fails every Send while its feed handler's outage is on, as
// an RDMA sender does while its port is down (the packets are stored, not
// sent).
type outageSender struct {
	ud.Sender
	on     *atomic.Bool
	failed *atomic.Uint64
}

var errOutage = errors.New("test outage: port not active")

func (s *outageSender) Send(d [][]byte) error {
	if s.on.Load() {
		s.failed.Add(uint64(len(d)))
		return errOutage
	}
	return s.Sender.Send(d)
}

// TestSendOutageRecovered: the feed handler's senders fail for 400 ms in
// the middle of a run, as they do while an RDMA port is down and the
// endpoint waits to be rebuilt. The publisher goes on, the packets go to
// the retransmission store, and a verifying subscriber gets every message
// once, in order, the outage recovered over NATS.
func TestSendOutageRecovered(t *testing.T) {
	const channels, instruments, count, seed = 4, 200, 60000, 11
	group := testGroup(t)
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: channels, Count: count})
	if err != nil {
		t.Fatal(err)
	}
	var on atomic.Bool
	var failed atomic.Uint64
	var logs testenv.SyncBuffer
	h, err := New(Config{
		Source: syn, Channels: channels, GroupA: group, Rate: 40000, MaxDelay: time.Millisecond,
		// Small packets, so that a send fails on a full packet too, not only
		// at a flush.
		MaxDatagram: 256,
		NATSListen:  "127.0.0.1:0", Linger: 300 * time.Millisecond, Log: zerolog.New(&logs),
		wrapSender: func(next ud.NewSenderFunc) ud.NewSenderFunc {
			return func(id tickcast.LineID) (ud.Sender, error) {
				s, err := next(id)
				if err != nil {
					return nil, err
				}
				return &outageSender{Sender: s, on: &on, failed: &failed}, nil
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	wait := verifyingSubscriber(t, h, group, channels, seed, instruments, count)
	go func() {
		time.Sleep(500 * time.Millisecond)
		on.Store(true)
		time.Sleep(400 * time.Millisecond)
		on.Store(false)
	}()
	if _, err := h.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	got := wait()
	t.Logf("sends failed for %d datagrams; subscriber %+v", failed.Load(), got)
	if failed.Load() == 0 {
		t.Fatalf("the outage failed no send: the run ended before it?")
	}
	if got.Received != count || got.Missing != 0 || !got.VerifyOK || got.Recovered == 0 {
		t.Errorf("subscriber got %+v, want %d messages verified, none missing, the outage recovered", got, count)
	}
}
