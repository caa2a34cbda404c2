package fh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud/udp"
)

// TestWatchCountsForeignPackets: a feed handler counts the packets of
// another session on its own group (a heartbeat and a data packet), and
// none of its own session: the kernel drops those before the watcher sees
// them, its own and another's alike (udp.Config.DropPrefix). It logs the
// other publisher once.
func TestWatchCountsForeignPackets(t *testing.T) {
	group := testGroup(t)
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 3, Instruments: 10, Channels: 1, Count: 2000})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	h, err := New(Config{Source: syn, Channels: 1, GroupA: group, Rate: 10000, Watch: true, NATSListen: "127.0.0.1:0", Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	snd, err := udp.NewSender(udp.Config{Group: group.Addr(), Port: int(group.Port()), CPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	own := h.pub.Sessions()[0]
	other, _ := mold.ParseSession("002SA99999")
	done := make(chan error, 1)
	go func() {
		// Once the feed handler has published its first messages: a
		// heartbeat and a data packet of another session, and a data
		// packet of its own session with other bytes (not counted).
		for h.sink.sent.Load() < 20 { // packets recorded: the run has started publishing
			time.Sleep(5 * time.Millisecond)
		}
		b, _ := mold.NewBuilder(1400)
		b.Start(other, 1)
		b.Add([]byte("another publisher's message"))
		theirs := append([]byte(nil), b.Finish()...)
		b.Start(own, 1)
		b.Add([]byte("not what the feed handler sent"))
		done <- snd.Send([][]byte{mold.Header{Session: other, Seq: 1}.Append(nil), theirs, b.Finish()})
	}()
	if _, err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The loopback copies arrive within the run; allow the watch loop a
	// moment to take the last.
	deadline := time.Now().Add(2 * time.Second)
	for h.ForeignPackets() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// Settle: a wrongly counted own packet would arrive as quickly.
	time.Sleep(100 * time.Millisecond)
	if n := h.ForeignPackets(); n != 2 {
		t.Fatalf("foreign packets %d, want 2 (the other session's heartbeat and data packet)\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "another publisher"); n != 1 {
		t.Errorf("%d log lines name another publisher, want 1:\n%s", n, logs.String())
	}
}
