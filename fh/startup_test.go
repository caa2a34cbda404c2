package fh

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/ud/udp"
)

// gate is a source that stops after its first n messages until open is
// closed: the feed handler then sends nothing, not even heartbeats.
type gate struct {
	feed.Source
	n    int
	open chan struct{}
}

func (g *gate) Next(m *feed.Msg) error {
	if g.n == 0 {
		<-g.open
	}
	g.n--
	return g.Source.Next(m)
}

// TestCompetitorFirstAtStartup: a subscriber starts while a feed handler's
// session is under way but silent; recovery names that session before any
// packet arrives, and the first packet the subscriber meets on the channel
// is another publisher's. It holds that session's message, asks recovery
// again, is told the feed handler's session, and follows it: the
// competitor's message is never delivered, nothing is missing, no session
// is reported replaced, and the competitor is reported.
//
// Authentication is off on both sides: with it, the rival's unsealed packet
// is dropped before any session logic (TestForgedPackets, internal/e2e),
// and this defence is for a feed run with --auth=false.
func TestCompetitorFirstAtStartup(t *testing.T) {
	const instruments, count, seed = 20, 4000, 3
	group := testGroup(t)
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: 1, Count: count})
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{Source: syn, n: 1500, open: make(chan struct{})}
	var logs testenv.SyncBuffer
	h, err := New(Config{Source: g, Channels: 1, GroupA: group, NATSListen: "127.0.0.1:0", Linger: 300 * time.Millisecond,
		Log: zerolog.New(&logs), Unsealed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fhDone := make(chan error, 1)
	go func() { _, err := h.Run(context.Background()); fhDone <- err }()
	for h.sink.sent.Load() < 10 { // the session is under way
		time.Sleep(time.Millisecond)
	}

	var s subapp.Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	s.Channels, s.Group, s.Verify, s.Seed, s.Instruments, s.Expect = 1, group.String(), true, seed, instruments, count
	s.NATSURL, s.Format, s.MetricsAddr, s.StaleAfter = h.NATSURL(), "none", "", 2*time.Second
	s.Auth = false
	var out bytes.Buffer
	var subLogs testenv.SyncBuffer
	sub, err := subapp.New(s, zerolog.New(&subLogs).Level(zerolog.DebugLevel), &out)
	if err != nil {
		t.Fatal(err)
	}
	subDone := make(chan int, 1)
	go func() { subDone <- sub.Run(context.Background()) }()
	waitFor(t, &subLogs, `"subscribed"`)
	waitFor(t, &subLogs, "recovery names the channel's session")

	rival, _ := mold.ParseSession("00ZSA99999")
	snd, err := udp.NewSender(udp.Config{Group: group.Addr(), Port: int(group.Port()), CPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	b, _ := mold.NewBuilder(1400)
	b.Start(rival, 1)
	b.Add([]byte("not from the feed"))
	if err := snd.Send([][]byte{b.Finish()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &subLogs, "competing session on the channel's groups")
	close(g.open)
	b.Start(rival, 2)
	b.Add([]byte("not from the feed either"))
	snd.Send([][]byte{b.Finish()})

	if err := <-fhDone; err != nil {
		t.Fatalf("feed handler: %v", err)
	}
	code := <-subDone
	var got struct {
		Received, Missing, Competing, Sessions, SessionsAbrupt uint64
		VerifyOK                                               bool `json:"verify_ok"`
	}
	d := json.NewDecoder(strings.NewReader(strings.ReplaceAll(out.String(), "sessions_abrupt", "sessionsabrupt")))
	if err := d.Decode(&got); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	t.Logf("subscriber: exit %d, %+v", code, got)
	if code != 0 || !got.VerifyOK || got.Received != count || got.Missing != 0 || got.SessionsAbrupt != 0 || got.Sessions != 1 || got.Competing == 0 {
		t.Errorf("subscriber exit %d, %+v: want all %d verified, none missing, one session, none replaced, competing counted\n%s",
			code, got, count, subLogs.String())
	}
	if sess := h.pub.Sessions()[0]; !strings.Contains(subLogs.String(), `"session":"`+sess.String()+`"`) || tickcast.SessionChannel(sess) != 0 {
		t.Errorf("the subscriber never named the feed handler's session %s", sess)
	}
}

// waitFor waits up to 10 s for text in buf.
func waitFor(t *testing.T, buf *testenv.SyncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10 s:\n%s", text, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFirstSessionFlowsWithoutControlPlane: a subscriber whose session
// queries go unanswered (a responder on the session subjects that never
// replies, the feed handler's own recovery paused) still delivers the
// feed handler's session from its first packet: nothing waits in the window
// for the control plane (reordered 0), everything arrives and verifies.
func TestFirstSessionFlowsWithoutControlPlane(t *testing.T) {
	const channels, instruments, count, seed = 2, 30, 6000, 5
	group := testGroup(t)
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: channels, Count: count})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	h, err := New(Config{Source: syn, Channels: channels, GroupA: group, Rate: 10000, NATSListen: "127.0.0.1:0",
		Linger: 300 * time.Millisecond, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.rsrv.Pause()
	mute, err := nats.Connect(h.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	var asked atomic.Int64
	for ch := range channels {
		if _, err := mute.Subscribe(recovery.SessionSubject(h.cfg.FeedName, ch), func(*nats.Msg) { asked.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := mute.Flush(); err != nil {
		t.Fatal(err)
	}

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
	if _, err := h.Run(context.Background()); err != nil {
		t.Fatalf("feed handler: %v\n%s", err, logs.String())
	}
	code := <-subDone
	var got struct {
		Received, Missing, Reordered, Competing, Sessions uint64
		VerifyOK                                          bool `json:"verify_ok"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	t.Logf("subscriber: exit %d, %+v; session queries seen by the mute responder: %d", code, got, asked.Load())
	if asked.Load() == 0 {
		t.Errorf("the subscriber asked no session query: the test did not test the wait")
	}
	if code != 0 || !got.VerifyOK || got.Received != count || got.Missing != 0 || got.Sessions != channels || got.Competing != 0 {
		t.Errorf("subscriber exit %d, %+v: want all %d verified, none missing, %d sessions, none competing", code, got, count, channels)
	}
	if got.Reordered != 0 {
		t.Errorf("%d messages waited in the window: the first session waited for the control plane", got.Reordered)
	}
}
