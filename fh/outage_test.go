package fh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/subapp"
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
		NATSListen: "127.0.0.1:0", Linger: 300 * time.Millisecond, Log: zerolog.New(&logs),
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

	var s subapp.Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	s.Channels, s.Group, s.Verify, s.Seed, s.Instruments, s.Expect = channels, group.String(), true, seed, instruments, count
	s.NATSURL, s.Format, s.MetricsAddr = h.NATSURL(), "none", ""
	var out bytes.Buffer
	sub, err := subapp.New(s, zerolog.Nop(), &out)
	if err != nil {
		t.Fatal(err)
	}
	subDone := make(chan int, 1)
	go func() { subDone <- sub.Run(context.Background()) }()
	go func() {
		time.Sleep(500 * time.Millisecond)
		on.Store(true)
		time.Sleep(400 * time.Millisecond)
		on.Store(false)
	}()
	if _, err := h.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	if code := <-subDone; code != 0 {
		t.Errorf("subscriber exit %d: %s", code, out.String())
	}
	var got struct {
		Received  uint64 `json:"received"`
		Missing   uint64 `json:"missing"`
		Recovered uint64 `json:"recovered"`
		VerifyOK  bool   `json:"verify_ok"`
		VerifyErr string `json:"first_verify_error"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("subscriber summary: %v: %q", err, out.String())
	}
	t.Logf("sends failed for %d datagrams; subscriber %+v", failed.Load(), got)
	if failed.Load() == 0 {
		t.Fatalf("the outage failed no send: the run ended before it?")
	}
	if got.Received != count || got.Missing != 0 || !got.VerifyOK || got.Recovered == 0 {
		t.Errorf("subscriber got %+v, want %d messages verified, none missing, the outage recovered", got, count)
	}
}
