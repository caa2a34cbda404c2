package fh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/metricsrv"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
)

// testGroup returns an A-line base on a free port in 239.77.0.0/16,
// different for each call so that tests do not hear each other.
func testGroup(t *testing.T) netip.AddrPort {
	t.Helper()
	return testenv.MulticastGroups(t, 77)[0]
}

// TestEmbedded runs a feed handler in process (an embedded NATS server,
// loopback multicast, the synthetic source) and a verifying subscriber
// joined to it, and checks that the subscriber received every message,
// each as the synthetic feed defines it, and the feed handler's summary.
// verifiedSummary is the part of a verifying subscriber's summary the
// end-to-end tests check.
type verifiedSummary struct {
	Received  uint64 `json:"received"`
	Missing   uint64 `json:"missing"`
	Recovered uint64 `json:"recovered"`
	VerifyOK  bool   `json:"verify_ok"`
	VerifyErr string `json:"first_verify_error"`
}

// verifyingSubscriber starts a subscriber on h's channels that verifies
// count synthetic messages (seed, instruments) and recovers over h's NATS
// server. The function it returns waits for the subscriber to end, fails
// the test if it exited non-zero, and returns its summary.
func verifyingSubscriber(t *testing.T, h *FeedHandler, group netip.AddrPort, channels int, seed uint64, instruments int, count uint64) func() verifiedSummary {
	t.Helper()
	var s subapp.Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	s.Channels, s.Group, s.Verify, s.Seed, s.Instruments, s.Expect = channels, group.String(), true, seed, instruments, count
	s.NATSURL, s.Format, s.MetricsAddr = h.NATSURL(), "none", ""
	out := new(bytes.Buffer)
	sub, err := subapp.New(s, zerolog.Nop(), out)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- sub.Run(context.Background()) }()
	return func() verifiedSummary {
		t.Helper()
		if code := <-done; code != 0 {
			t.Errorf("subscriber exit %d: %s", code, out.String())
		}
		var got verifiedSummary
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("subscriber summary: %v: %q", err, out.String())
		}
		return got
	}
}

func TestEmbedded(t *testing.T) {
	t.Run("paced", func(t *testing.T) { testEmbedded(t, 50000, false) })
	// Unpaced, with the source read ahead on a goroutine of its own.
	t.Run("pipeline", func(t *testing.T) { testEmbedded(t, 0, true) })
}

func testEmbedded(t *testing.T, rate float64, pipeline bool) {
	const channels, instruments, count, seed = 3, 40, 3000, 7
	group := testGroup(t)
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: channels, Count: count})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer // written by NATS callbacks too
	h, err := New(Config{
		Source: syn, Channels: channels, GroupA: group, Rate: rate, Pipeline: pipeline,
		NATSListen: "127.0.0.1:0", Linger: 200 * time.Millisecond,
		Log: zerolog.New(&logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	wait := verifyingSubscriber(t, h, group, channels, seed, instruments, count)
	sum, err := h.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	got := wait()
	if got.Received != count || got.Missing != 0 || !got.VerifyOK {
		t.Errorf("subscriber got %+v, want %d messages verified, none missing", got, count)
	}
	if sum.Publisher.Messages != count || sum.Interrupted || sum.DurationReached {
		t.Errorf("summary %+v, want %d messages, not interrupted", sum, count)
	}
	if f := sum.Fields(); f["messages"] != uint64(count) || f["role"] != "feedhandler" {
		t.Errorf("summary fields %v", f)
	}
	if n := strings.Count(logs.String(), `"channel open"`); n != channels {
		t.Errorf("%d \"channel open\" log lines, want %d", n, channels)
	}
	if h.StoreErrors() != 0 {
		t.Errorf("%d store errors", h.StoreErrors())
	}
}

// TestBadConfig: New refuses a bad Config with a *ConfigError naming the
// field, before it starts anything.
func TestBadConfig(t *testing.T) {
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 10, Channels: 4, Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field string
		set   func(*Config)
		want  string
	}{
		{"Source", func(c *Config) { c.Source = nil }, "needs a source"},
		{"Channels", func(c *Config) { c.Channels = 1297 }, "1297"},
		{"Transport", func(c *Config) { c.Transport = "ipx" }, `"ipx": want udp or rdma`},
		{"Interface", func(c *Config) { c.Interface = netip.MustParseAddr("::1") }, "IPv4"},
		{"TTL", func(c *Config) { c.TTL = 256 }, "0..255"},
		{"MaxDatagram", func(c *Config) { c.MaxDatagram = 40 }, "40"},
		{"SendBatch", func(c *Config) { c.SendBatch = 2000 }, "1..1024"},
		{"Rate", func(c *Config) { c.Rate = -1 }, "negative"},
		{"Speed", func(c *Config) { c.Speed = -1 }, "negative"},
		{"Speed", func(c *Config) { c.Speed, c.Rate = 1, 5000 }, "cannot be combined with Rate"},
		{"StoreBytes", func(c *Config) { c.StoreBytes = 100 }, "65535"},
		{"FeedName", func(c *Config) { c.FeedName = "a.b" }, "a.b"},
		{"NATSListen", func(c *Config) { c.NATSListen = "4222" }, "host:port"},
		{"NATSUsers", func(c *Config) {
			c.NATSURL, c.NATSUsers = "nats://127.0.0.1:1", []natsconn.User{{Name: "a", Password: "b"}}
		}, "embedded"},
		{"MetricsAddr", func(c *Config) { c.MetricsAddr = "9464" }, "9464"},
		{"Line", func(c *Config) { c.Line = "c" }, "want a, b or both"},
		{"Line", func(c *Config) { c.Line = "b" }, "needs GroupB"},
		{"SessionRecord", func(c *Config) { c.SessionRecord = "yes" }, "want auto, on or off"},
		{"SessionRecord", func(c *Config) { c.SessionRecord = RecordOn }, "JetStream"},
		{"PeerTimeout", func(c *Config) { c.PeerTimeout = -time.Second }, "negative"},
		{"Pipeline", func(c *Config) { c.Pipeline, c.Rate = true, 1000 }, "unpaced runs only"},
	}
	for _, c := range cases {
		cfg := Config{Source: syn, NATSListen: "127.0.0.1:0"}
		c.set(&cfg)
		h, err := New(cfg)
		if h != nil {
			h.Close()
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "Config."+c.field) {
			t.Errorf("%s: got %v, want a *ConfigError for %s saying %q", c.field, err, c.field, c.want)
		}
	}
}

// TestControlStoreError: a heartbeat or end of session the store refuses
// (record is the publisher's OnControl) is counted and logged, and the
// datagram still goes on the live feed's path.
func TestControlStoreError(t *testing.T) {
	store, err := recovery.NewChannel(recovery.StoreConfig{MaxMessages: 16, MaxBytes: 65535})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	k := packetSink{stores: []*recovery.Channel{store}, log: zerolog.New(&logs)}
	session, err := mold.ParseSession("CTRLTEST01")
	if err != nil {
		t.Fatal(err)
	}
	// A new session must start at sequence 1: a heartbeat announcing 5 as
	// the next sequence of a session the store never saw breaks the stream.
	k.record(0, session, 5, mold.AppendHeartbeat(nil, session, 5))
	if k.errors.Load() != 1 || !strings.Contains(logs.String(), `"retransmission store"`) {
		t.Errorf("refused heartbeat: %d errors counted, log %q", k.errors.Load(), logs.String())
	}
	// One that starts the session is taken.
	k.record(0, session, 1, mold.AppendHeartbeat(nil, session, 1))
	if k.errors.Load() != 1 {
		t.Errorf("after a good heartbeat %d errors counted, want still 1", k.errors.Load())
	}
}

// TestHealth: the health check says starting before Run, healthy while it
// publishes, and names NATS once the connection to it is gone.
func TestHealth(t *testing.T) {
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 3, Instruments: 10, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Source: syn, Channels: 1, GroupA: testGroup(t), Rate: 1000,
		NATSListen: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	url := "http://" + h.MetricsAddr() + metricsrv.HealthPath
	expect := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := metricsrv.CheckHealth(url, time.Second)
			got := "healthy"
			if err != nil {
				got = err.Error()
			}
			if strings.Contains(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: health %q, want %q", what, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	expect("before Run", "starting")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	expect("publishing", "healthy")
	h.srv.Shutdown() // the embedded NATS server goes away
	expect("without NATS", "not connected to NATS")
	cancel()
	<-done
}

// TestLingerOnStop: with LingerOnStop, a stopped Run ends its session and
// keeps serving recovery (healthy, lingering) until Abort; without it, a
// stop ends Run at once.
func TestLingerOnStop(t *testing.T) {
	for _, onStop := range []bool{true, false} {
		syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 3, Instruments: 10, Channels: 1})
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(Config{Source: syn, Channels: 1, GroupA: testGroup(t), Rate: 5000, Linger: time.Minute, LingerOnStop: onStop,
			NATSListen: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan Summary, 1)
		go func() {
			sum, _ := h.Run(ctx)
			done <- sum
		}()
		for h.sink.sent.Load() < 20 { // packets recorded: the run has started publishing
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if !onStop {
			select {
			case sum := <-done:
				if !sum.Interrupted {
					t.Errorf("without LingerOnStop: summary %+v, want interrupted", sum)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("without LingerOnStop: Run still running 10s after its context was cancelled")
			}
			h.Close()
			continue
		}
		for h.health.phase.Load() != phaseLingering {
			time.Sleep(5 * time.Millisecond)
		}
		if err := metricsrv.CheckHealth("http://"+h.MetricsAddr()+metricsrv.HealthPath, time.Second); err != nil {
			t.Errorf("lingering after a stop: %v, want healthy", err)
		}
		select {
		case <-done:
			t.Fatal("with LingerOnStop: Run returned before the linger ended or Abort")
		case <-time.After(200 * time.Millisecond):
		}
		h.Abort()
		select {
		case sum := <-done:
			if !sum.Interrupted {
				t.Errorf("with LingerOnStop: summary %+v, want interrupted", sum)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("with LingerOnStop: Run still running 10s after Abort")
		}
		h.Close()
	}
}
