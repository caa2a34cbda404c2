package fh

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/internal/testenv"
)

// startSubscriber starts a subscriber (internal/subapp, as cmd/subscriber
// runs it) on transport ("udp" or "nats") that verifies count synthetic
// messages and recovers over the NATS server at url. The function it
// returns waits for it to end, fails the test if it exited non-zero, and
// returns its summary.
func startSubscriber(t *testing.T, url, transport string, group netip.AddrPort, channels int, seed uint64, instruments int, count uint64) func() verifiedSummary {
	t.Helper()
	var s subapp.Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	s.Channels, s.Group, s.Verify, s.Seed, s.Instruments, s.Expect = channels, group.String(), true, seed, instruments, count
	s.NATSURL, s.Format, s.MetricsAddr, s.Transport = url, "none", "", transport
	out := new(bytes.Buffer)
	logs := new(testenv.SyncBuffer) // written by NATS callbacks too
	sub, err := subapp.New(s, zerolog.New(logs).Level(zerolog.WarnLevel), out)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- sub.Run(context.Background()) }()
	return func() verifiedSummary {
		t.Helper()
		var code int
		select {
		case code = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the %s subscriber did not end", transport)
		}
		if code != 0 {
			t.Errorf("%s subscriber exit %d: %s\n%s", transport, code, out.String(), logs.String())
		}
		var got verifiedSummary
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s subscriber summary: %v: %q", transport, err, out.String())
		}
		return got
	}
}

// TestLiveOnDemandExternalNATS: with an external NATS server, whose
// subscriptions the feed handler cannot see, the live NATS feed is
// published only on demand.
//
// First a feed handler whose only subscriber takes multicast publishes
// nothing live: every datagram is skipped, none published, and no demand
// arrives. Then a subscriber that takes the live NATS subjects
// (--transport nats) joins a feed handler that has been publishing for a
// while: its receivers announce demand, the feed handler turns the live
// feed on, and the subscriber receives every message, verified, having
// recovered the start it missed as a gap.
func TestLiveOnDemandExternalNATS(t *testing.T) {
	ext, err := natsconn.StartServer(natsconn.ServerConfig{Host: "127.0.0.1", Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Shutdown()
	const channels, instruments, seed = 3, 40, 11
	// Each subtest's feed handler is closed at its end: two on one server,
	// with one feed name, would both answer its recovery requests.
	newFH := func(t *testing.T, count uint64, rate float64, logs *testenv.SyncBuffer) (*FeedHandler, netip.AddrPort) {
		t.Helper()
		group := testGroup(t)
		syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: channels, Count: count})
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(Config{
			Source: syn, Channels: channels, GroupA: group, Rate: rate,
			NATSURL: ext.ClientURL(), NATSLive: true, Linger: 2 * time.Second,
			Log: zerolog.New(logs),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h, group
	}

	t.Run("no live consumer", func(t *testing.T) {
		const count = 3000
		var logs testenv.SyncBuffer
		h, group := newFH(t, count, 50000, &logs)
		wait := startSubscriber(t, h.NATSURL(), "udp", group, channels, seed, instruments, count)
		sum, err := h.Run(context.Background())
		if err != nil {
			t.Fatalf("Run: %v\n%s", err, logs.String())
		}
		if got := wait(); got.Received != count || got.Missing != 0 || !got.VerifyOK {
			t.Errorf("multicast subscriber got %+v, want %d messages verified, none missing", got, count)
		}
		r := sum.Recovery
		if r.LivePublished != 0 || r.LiveSkipped == 0 || r.LiveDemands != 0 || r.LiveDropped != 0 {
			t.Fatalf("live feed with no live consumer: published %d, skipped %d, demands %d, dropped %d; want 0 published, every datagram skipped",
				r.LivePublished, r.LiveSkipped, r.LiveDemands, r.LiveDropped)
		}
		if f := sum.Fields(); f["live_published"] != uint64(0) || f["live_demands"] != uint64(0) || f["live_skipped"] != r.LiveSkipped {
			t.Errorf("summary fields: live_published %v, live_skipped %v, live_demands %v", f["live_published"], f["live_skipped"], f["live_demands"])
		}
	})

	t.Run("live consumer joins", func(t *testing.T) {
		const count = 20000
		var logs testenv.SyncBuffer
		h, group := newFH(t, count, 20000, &logs)
		type result struct {
			sum Summary
			err error
		}
		ran := make(chan result, 1)
		go func() {
			sum, err := h.Run(context.Background())
			ran <- result{sum, err}
		}()
		// Join once the feed handler has skipped some datagrams: nobody
		// wanted them yet.
		deadline := time.Now().Add(10 * time.Second)
		for h.rsrv.Stats().LiveSkipped < 10 {
			if time.Now().After(deadline) {
				t.Fatalf("the feed handler skipped no datagram: %+v", h.rsrv.Stats())
			}
			time.Sleep(time.Millisecond)
		}
		wait := startSubscriber(t, h.NATSURL(), "nats", group, channels, seed, instruments, count)
		got := wait()
		var res result
		select {
		case res = <-ran:
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return")
		}
		if res.err != nil {
			t.Fatalf("Run: %v\n%s", res.err, logs.String())
		}
		r := res.sum.Recovery
		t.Logf("live subscriber: %+v; feed handler: live published %d, skipped %d, dropped %d, demands %d",
			got, r.LivePublished, r.LiveSkipped, r.LiveDropped, r.LiveDemands)
		if got.Received != count || got.Missing != 0 || !got.VerifyOK {
			t.Fatalf("live subscriber got %+v, want %d messages verified, none missing", got, count)
		}
		if got.Recovered == 0 {
			t.Errorf("the live subscriber recovered nothing, but joined after %d datagrams were skipped", r.LiveSkipped)
		}
		if r.LiveDemands < channels || r.LivePublished == 0 || r.LiveSkipped < 10 {
			t.Errorf("live published %d, skipped %d, demands %d: want a demand per channel at least, datagrams published after it, skipped before",
				r.LivePublished, r.LiveSkipped, r.LiveDemands)
		}
		if !strings.Contains(logs.String(), "live feed on: demand") {
			t.Errorf("no \"live feed on\" log line:\n%s", logs.String())
		}
	})
}
