package tickprom

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
)

// filledStore returns a recovery store holding messages 1..n of a
// synthetic channel's session.
func filledStore(t *testing.T, session mold.Session, n int) *recovery.Channel {
	t.Helper()
	store, err := recovery.NewChannel(recovery.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 50, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mold.NewBuilder(1400)
	if err != nil {
		t.Fatal(err)
	}
	var m feed.Msg
	buf := make([]byte, 512)
	for seq := 1; seq <= n; {
		b.Start(session, uint64(seq))
		for ; seq <= n && b.Count() < 20; seq++ {
			if err := src.Next(&m); err != nil {
				t.Fatal(err)
			}
			l, err := m.Encode(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !b.Add(buf[:l]) {
				break
			}
		}
		if err := store.OnPacket(session, b.FirstSeq(), b.Finish()); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// TestRecoveryServerCollector serves one retransmit and rejects one, then
// checks the server's and the store's metrics.
func TestRecoveryServerCollector(t *testing.T) {
	session, err := mold.ParseSession("MX00000001")
	if err != nil {
		t.Fatal(err)
	}
	store := filledStore(t, session, 1000)
	ns, err := natsconn.StartServer(natsconn.ServerConfig{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	connect := func(name string) *nats.Conn {
		nc, err := natsconn.Connect(natsconn.ConnConfig{URL: ns.ClientURL(), Name: name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	srv, err := recovery.NewServer(connect("feedhandler"), recovery.ServerConfig{Channels: []*recovery.Channel{store}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cli, err := recovery.NewClient(connect("subscriber"), recovery.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cli.Close)
	if _, err := cli.Retransmit(0, mold.Request{Session: session, Seq: 10, Count: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Retransmit(0, mold.Request{Session: session, Seq: 5000, Count: 1}); err == nil {
		t.Fatal("a range past the end was served")
	}
	// Two requests for one range that ask for a repair: one repair, then a
	// pointer to it (each answered by one message: the pointer).
	asker := connect("asker")
	for i := range 2 {
		m, err := asker.RequestMsg(&nats.Msg{Subject: recovery.RetransmitSubject(recovery.DefaultFeed, 0),
			Data:   mold.Request{Session: session, Seq: 20, Count: 5}.Append(nil),
			Header: nats.Header{recovery.HeaderAnswer: []string{recovery.AnswerRepair}}}, 5*time.Second)
		if err != nil || m.Header.Get(recovery.HeaderRepair) == "" {
			t.Fatalf("repair request %d: %v, headers %v", i, err, m.Header)
		}
	}
	col := NewRecoveryServerCollector(srv, []*recovery.Channel{store})
	want := `
# HELP tickcast_recovery_messages_served_total Messages sent in retransmit replies and repairs.
# TYPE tickcast_recovery_messages_served_total counter
tickcast_recovery_messages_served_total 10
# HELP tickcast_recovery_answers_total Retransmit requests answered with messages: inline replies, and repairs (each counted once, however many requests it answers).
# TYPE tickcast_recovery_answers_total counter
tickcast_recovery_answers_total 2
# HELP tickcast_recovery_repairs_total Repairs published on the repair subjects, heard by every subscriber of the feed.
# TYPE tickcast_recovery_repairs_total counter
tickcast_recovery_repairs_total 1
# HELP tickcast_recovery_requests_suppressed_total Retransmit requests answered with a pointer to a repair of the same range published within the repair window.
# TYPE tickcast_recovery_requests_suppressed_total counter
tickcast_recovery_requests_suppressed_total 1
# HELP tickcast_recovery_rejected_total Retransmit and snapshot requests answered with an error, by reason.
# TYPE tickcast_recovery_rejected_total counter
tickcast_recovery_rejected_total{reason="bad-request"} 0
tickcast_recovery_rejected_total{reason="not-yet"} 1
tickcast_recovery_rejected_total{reason="rate-limited"} 0
tickcast_recovery_rejected_total{reason="too-many"} 0
tickcast_recovery_rejected_total{reason="too-old"} 0
tickcast_recovery_rejected_total{reason="unknown-channel"} 0
tickcast_recovery_rejected_total{reason="unknown-session"} 0
# HELP tickcast_recovery_store_oldest_sequence Oldest sequence number the channel's store can retransmit (the next one when empty).
# TYPE tickcast_recovery_store_oldest_sequence gauge
tickcast_recovery_store_oldest_sequence{channel="0"} 1
# HELP tickcast_recovery_store_next_sequence Sequence number of the channel's next message.
# TYPE tickcast_recovery_store_next_sequence gauge
tickcast_recovery_store_next_sequence{channel="0"} 1001
# HELP tickcast_recovery_store_messages Messages the channel's retransmission store holds.
# TYPE tickcast_recovery_store_messages gauge
tickcast_recovery_store_messages{channel="0"} 1000
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "tickcast_recovery_messages_served_total",
		"tickcast_recovery_answers_total", "tickcast_recovery_repairs_total", "tickcast_recovery_requests_suppressed_total",
		"tickcast_recovery_rejected_total", "tickcast_recovery_store_oldest_sequence", "tickcast_recovery_store_next_sequence",
		"tickcast_recovery_store_messages"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(col)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
