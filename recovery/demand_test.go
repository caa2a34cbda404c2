package recovery

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tickcast/tickcast/internal/natsconn"
)

// liveAll gives Live n datagrams of channel ch and waits until the queue
// has drained.
func liveAll(t *testing.T, srv *Server, ch, n int, pkt []byte) {
	t.Helper()
	for range n {
		srv.Live(ch, pkt)
	}
	if !srv.FlushLive(natsWait) {
		t.Fatalf("the live queue did not drain: %+v", srv.Stats())
	}
}

// received counts the datagrams waiting on sub, each of which must be pkt.
func received(t *testing.T, sub *nats.Subscription, pkt []byte) int {
	t.Helper()
	n := 0
	for {
		m, err := sub.NextMsg(100 * time.Millisecond)
		if err != nil {
			return n
		}
		if !bytes.Equal(m.Data, pkt) {
			t.Fatalf("live datagram %q, want %q", m.Data, pkt)
		}
		n++
	}
}

// TestLiveOnDemand: without LiveInterest (an external NATS server, whose
// subscriptions the feed handler does not see) a channel's live feed is
// off, even with a subscriber, until a demand message arrives; a demand
// request is answered with the lease, and the feed is on once the answer
// is in; the lease lapses without a new demand; demands of one channel do
// not turn on another; a demand for a channel the feed does not have is
// refused.
func TestLiveOnDemand(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{})
	srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
	cliConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "subscriber"})
	const lease = time.Second
	srv := newServer(t, srvConn, ServerConfig{Channels: []*Channel{newTestChannel(t, StoreConfig{}), newTestChannel(t, StoreConfig{})},
		LiveLease: lease})
	sub, err := cliConn.SubscribeSync(LiveSubject(DefaultFeed, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := cliConn.Flush(); err != nil {
		t.Fatal(err)
	}
	pkt := []byte("not parsed by Live")

	// A subscriber alone is not demand.
	liveAll(t, srv, 0, 100, pkt)
	if s := srv.Stats(); s.LivePublished != 0 || s.LiveSkipped != 100 || s.LiveDemands != 0 {
		t.Fatalf("no demand: stats %+v, want 0 published, 100 skipped", s)
	}
	if n := received(t, sub, pkt); n != 0 {
		t.Fatalf("no demand: %d live datagrams received", n)
	}

	// A demand request is answered with the lease; from the answer on,
	// channel 0's datagrams are published, channel 1's are not.
	m, err := cliConn.Request(DemandSubject(DefaultFeed, 0), nil, natsWait)
	if err != nil {
		t.Fatalf("demand request: %v", err)
	}
	if got := m.Header.Get(HeaderLease); got != strconv.FormatInt(lease.Milliseconds(), 10) || m.Header.Get(HeaderError) != "" {
		t.Fatalf("demand answer: headers %v, want %s %d", m.Header, HeaderLease, lease.Milliseconds())
	}
	for range 50 {
		srv.Live(0, pkt)
		srv.Live(1, pkt)
	}
	if !srv.FlushLive(natsWait) {
		t.Fatalf("the live queue did not drain: %+v", srv.Stats())
	}
	s := srv.Stats()
	if s.LiveDemands != 1 || s.LiveSkipped != 150 || s.LivePublished != 50 {
		t.Fatalf("after one demand of channel 0: stats %+v, want 1 demand, 150 skipped, 50 published", s)
	}
	if n := received(t, sub, pkt); n != 50 {
		t.Fatalf("after the demand: %d live datagrams received, want 50", n)
	}

	// Without another demand, the lease lapses.
	deadline := time.Now().Add(natsWait)
	for {
		before := srv.Stats().LiveSkipped
		srv.Live(0, pkt)
		if srv.Stats().LiveSkipped > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease of %v never lapsed: %+v", lease, srv.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.FlushLive(natsWait)
	published := srv.Stats().LivePublished
	liveAll(t, srv, 0, 10, pkt)
	if s := srv.Stats(); s.LivePublished != published {
		t.Fatalf("published %d after the lease lapsed", s.LivePublished-published)
	}

	// A demand published without a reply subject turns the feed on too.
	if err := cliConn.Publish(DemandSubject(DefaultFeed, 1), nil); err != nil {
		t.Fatal(err)
	}
	for srv.Stats().LiveDemands < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the published demand never arrived: %+v", srv.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	liveAll(t, srv, 1, 10, pkt)
	if s := srv.Stats(); s.LivePublished != published+10 {
		t.Fatalf("after a published demand of channel 1: %d published, want %d", s.LivePublished, published+10)
	}

	// A channel the feed does not have is refused, and counted.
	m, err = cliConn.Request(DemandSubject(DefaultFeed, 7), nil, natsWait)
	if err != nil || m.Header.Get(HeaderError) != string(CodeUnknownChannel) {
		t.Fatalf("demand of channel 7: %v, headers %v, want %s", err, m.Header, CodeUnknownChannel)
	}
	if s := srv.Stats(); s.LiveDemands != 3 || s.Rejected[CodeUnknownChannel] != 1 {
		t.Fatalf("stats %+v, want 3 demands, 1 unknown-channel", s)
	}
}

// TestLiveModes: LiveAlways publishes every datagram without any demand,
// and answers demands; LiveOff publishes none whatever the demand or the
// interest, and does not listen to demands.
func TestLiveModes(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{})
	for _, c := range []struct {
		mode               LiveMode
		published, skipped uint64
		answered           bool
	}{{LiveAlways, 20, 0, true}, {LiveOff, 0, 20, false}} {
		t.Run(c.mode.String(), func(t *testing.T) {
			srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
			cliConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "subscriber"})
			srv := newServer(t, srvConn, ServerConfig{Channels: []*Channel{newTestChannel(t, StoreConfig{})}, Live: c.mode,
				LiveInterest: func(string) bool { return true }})
			m, err := cliConn.Request(DemandSubject(DefaultFeed, 0), nil, natsWait)
			if answered := err == nil && m.Header.Get(HeaderLease) != ""; answered != c.answered {
				t.Fatalf("demand answered %v (%v), want %v", answered, err, c.answered)
			}
			liveAll(t, srv, 0, 20, []byte("x"))
			if s := srv.Stats(); s.LivePublished != c.published || s.LiveSkipped != c.skipped {
				t.Fatalf("stats %+v, want %d published, %d skipped", s, c.published, c.skipped)
			}
		})
	}
}

// TestLiveSkipAllocs: a datagram nobody wants costs Live no allocation.
func TestLiveSkipAllocs(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{})
	srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
	srv := newServer(t, srvConn, ServerConfig{Channels: []*Channel{newTestChannel(t, StoreConfig{})}})
	pkt := make([]byte, 1400)
	if a := testing.AllocsPerRun(1000, func() { srv.Live(0, pkt) }); a != 0 {
		t.Fatalf("Live allocates %.2f times a skipped datagram", a)
	}
	if s := srv.Stats(); s.LivePublished != 0 || s.LiveSkipped < 1000 {
		t.Fatalf("stats %+v, want every datagram skipped", s)
	}
}
