package recovery

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tickcast/tickcast/mold"
)

func TestServerCollector(t *testing.T) {
	c, st, _ := filledChannel(t, StoreConfig{}, "MX00000001", 1000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}}, ClientConfig{})
	if _, err := e.cli.Retransmit(0, mold.Request{Session: st.session, Seq: 10, Count: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.Retransmit(0, mold.Request{Session: st.session, Seq: 5000, Count: 1}); err == nil {
		t.Fatal("a range past the end was served")
	}
	col := NewServerCollector(e.srv, []*Channel{c})
	want := `
# HELP tickcast_recovery_messages_served_total Messages sent in retransmit replies.
# TYPE tickcast_recovery_messages_served_total counter
tickcast_recovery_messages_served_total 5
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
