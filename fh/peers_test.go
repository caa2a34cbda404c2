package fh

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/natstest"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/internal/testenv"
)

// hotHot is a feed handler of a two-line feed sharing the session record
// of a NATS cluster.
func hotHot(t *testing.T, cluster *natstest.Cluster, groups []netip.AddrPort, line, identity string, count uint64, logs *testenv.SyncBuffer) (*FeedHandler, error) {
	t.Helper()
	const channels = 2
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 5, Instruments: 30, Channels: channels, Count: count})
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{
		Source: syn, Channels: channels, GroupA: groups[0], GroupB: groups[1], Line: line, Rate: 20000,
		NATSURL: cluster.URL(), SessionRecord: RecordOn, Identity: func() (string, error) { return identity, nil },
		Log: zerolog.New(logs).With().Str("line", line).Logger(),
	})
}

// Two feed handlers of one feed, line a and line b, share the sessions of
// the record: the second joins the first's, catches up silently and both
// end at the same sequences. A feed handler with other input is refused
// while they run; after both are gone, a new start takes new sessions that
// sort after theirs.
func TestSessionRecordHotHot(t *testing.T) {
	cluster := natstest.StartCluster(t, natstest.ClusterOptions{Quiet: true})
	groups := testenv.MulticastGroups(t, 77, 78)
	var logs testenv.SyncBuffer
	const count = 30000 // 1.5 s at 20,000 msg/s
	a, err := hotHot(t, cluster, groups, "a", "synthetic 5", count, &logs)
	if err != nil {
		t.Fatalf("first feed handler: %v\n%s", err, logs.String())
	}
	defer a.Close()
	if a.rejoin || len(a.sessions) != 2 {
		t.Fatalf("the first feed handler joined (%v) sessions %v; it should have written new ones", a.rejoin, a.sessions)
	}
	type result struct {
		sum Summary
		err error
	}
	aDone := make(chan result, 1)
	go func() { s, err := a.Run(context.Background()); aDone <- result{s, err} }()
	time.Sleep(300 * time.Millisecond)

	b, err := hotHot(t, cluster, groups, "b", "synthetic 5", count, &logs)
	if err != nil {
		t.Fatalf("second feed handler: %v\n%s", err, logs.String())
	}
	defer b.Close()
	if !b.rejoin || !slices.Equal(b.sessions, a.pub.Sessions()) {
		t.Fatalf("the second feed handler took sessions %v (joining %v), the first publishes %v", b.sessions, b.rejoin, a.pub.Sessions())
	}
	if _, err := hotHot(t, cluster, groups, "b", "synthetic 6", count, &logs); err == nil || !strings.Contains(err.Error(), `publishes input "synthetic 5"`) {
		t.Errorf("a feed handler with other input: %v, want a refusal naming the running input", err)
	}
	bSum, err := b.Run(context.Background())
	if err != nil {
		t.Fatalf("second feed handler: %v\n%s", err, logs.String())
	}
	ra := <-aDone
	if ra.err != nil {
		t.Fatalf("first feed handler: %v", ra.err)
	}
	aSum := ra.sum
	t.Logf("first: %d messages, %d packets; second: %d messages, %d of them caught up silently, %d packets",
		aSum.Publisher.Messages, aSum.Publisher.Packets, bSum.Publisher.Messages, bSum.Publisher.CaughtUp, bSum.Publisher.Packets)
	if bSum.Publisher.CaughtUp == 0 || bSum.Publisher.CaughtUp >= bSum.Publisher.Messages {
		t.Errorf("the second feed handler caught up %d of %d messages: want some, not all", bSum.Publisher.CaughtUp, bSum.Publisher.Messages)
	}
	if aSum.Publisher.Messages != bSum.Publisher.Messages {
		t.Errorf("messages: first %d, second %d", aSum.Publisher.Messages, bSum.Publisher.Messages)
	}
	for ch := range 2 {
		if na, nb := a.pub.NextSeq(ch), b.pub.NextSeq(ch); na != nb || na < 2 {
			t.Errorf("channel %d ended at %d on the first, %d on the second", ch, na, nb)
		}
	}
	old := a.pub.Sessions()
	a.Close()
	b.Close()

	c, err := hotHot(t, cluster, groups, "a", "synthetic 6", count, &logs)
	if err != nil {
		t.Fatalf("a cold start after both ended: %v", err)
	}
	defer c.Close()
	for ch, s := range c.sessions {
		if c.rejoin || s.String() <= old[ch].String() {
			t.Errorf("channel %d: cold start took session %s (joining %v), want a new one after %s", ch, s, c.rejoin, old[ch])
		}
	}
}

// Without JetStream (an external server that lacks it), auto keeps the
// single-instance behaviour and on refuses to start, saying why.
func TestSessionRecordWithoutJetStream(t *testing.T) {
	srv, err := natsconn.StartServer(natsconn.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for _, mode := range []string{RecordAuto, RecordOn} {
		syn, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 10, Channels: 1, Count: 10})
		var logs testenv.SyncBuffer
		h, err := New(Config{Source: syn, Channels: 1, GroupA: testGroup(t), NATSURL: srv.ClientURL(), SessionRecord: mode, Log: zerolog.New(&logs)})
		switch {
		case mode == RecordAuto && (err != nil || h.sessions != nil || h.rejoin):
			t.Errorf("auto without JetStream: %v, sessions %v: want a feed handler of its own sessions", err, h.sessions)
		case mode == RecordAuto && !strings.Contains(logs.String(), "no JetStream"):
			t.Errorf("auto without JetStream did not say so:\n%s", logs.String())
		case mode == RecordOn && (err == nil || !strings.Contains(err.Error(), "no JetStream")):
			t.Errorf("on without JetStream: %v, want an error saying the server has no JetStream", err)
		}
		if h != nil {
			h.Close()
		}
	}
}

// A feed handler asked to stop while its peer publishes the same sessions
// leaves them to the peer: no end of session goes out, so a subscriber of
// both lines goes on with the peer's line and receives everything; the
// peer ends the sessions at the end of the input.
func TestStopLeavesSessionsToPeer(t *testing.T) {
	cluster := natstest.StartCluster(t, natstest.ClusterOptions{Quiet: true})
	groups := testenv.MulticastGroups(t, 77, 78)
	var logs testenv.SyncBuffer
	// 4 s at 20,000 msg/s: the second feed handler must join, catch up
	// and be stopped while the first still publishes, and on a loaded
	// host (the race detector, CI) joining alone has taken over a second.
	const count = 80000
	a, err := hotHot(t, cluster, groups, "a", "synthetic 5", count, &logs)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	var s subapp.Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	s.Channels, s.Group, s.GroupB, s.Verify, s.Seed, s.Instruments, s.Expect = 2, groups[0].String(), groups[1].String(), true, 5, 30, count
	s.NATSURL, s.Format, s.MetricsAddr = cluster.URL(), "none", ""
	var out bytes.Buffer
	sub, err := subapp.New(s, zerolog.Nop(), &out)
	if err != nil {
		t.Fatal(err)
	}
	subDone := make(chan int, 1)
	go func() { subDone <- sub.Run(context.Background()) }()
	time.Sleep(100 * time.Millisecond) // subscribed

	aDone := make(chan error, 1)
	go func() { _, err := a.Run(context.Background()); aDone <- err }()
	time.Sleep(200 * time.Millisecond)
	b, err := hotHot(t, cluster, groups, "b", "synthetic 5", count, &logs)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		// Stopped once it has caught up with its peer and publishes: a
		// fixed delay let a slow start (a loaded host) reach the end of
		// the feed before the stop.
		defer stop()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"line":"b"`) && strings.Contains(l, "caught up with the peer") {
					time.Sleep(50 * time.Millisecond)
					return
				}
			}
		}
	}()
	bSum, err := b.Run(ctx)
	if err != nil {
		t.Fatalf("second feed handler: %v", err)
	}
	if !bSum.LeftToPeer || b.pub.Stats().Messages >= count {
		t.Fatalf("the stopped feed handler published %d of %d messages, left to its peer: %v\n%s", b.pub.Stats().Messages, count, bSum.LeftToPeer, logs.String())
	}
	if err := <-aDone; err != nil {
		t.Fatalf("first feed handler: %v", err)
	}
	code := <-subDone
	var got struct {
		Received, Missing, SessionsEnded uint64
		VerifyOK                         bool `json:"verify_ok"`
	}
	if err := json.Unmarshal(bytes.ReplaceAll(out.Bytes(), []byte("sessions_ended"), []byte("sessionsended")), &got); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	t.Logf("the second feed handler published %d messages and left; subscriber: exit %d, %+v", b.pub.Stats().Messages, code, got)
	if code != 0 || !got.VerifyOK || got.Received != count || got.Missing != 0 {
		t.Errorf("subscriber exit %d, %+v: want all %d verified, none missing", code, got, count)
	}
}
