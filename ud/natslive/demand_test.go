package natslive

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/recovery"
)

// TestDemandSubject: the demand subject derived from a live subject is the
// one the feed handler listens to (recovery.DemandSubject); a subject of
// another form has none.
func TestDemandSubject(t *testing.T) {
	for _, c := range []struct{ live, want string }{
		{recovery.LiveSubject("tickcast", 0), recovery.DemandSubject("tickcast", 0)},
		{recovery.LiveSubject("f-1", 12), recovery.DemandSubject("f-1", 12)},
		{"tickcast.f.live.x", ""},
		{"tickcast.f.live.", ""},
		{"tickcast.f.repair.1", ""},
		{"other.f.live.1", ""},
		{"tickcast.f.live.1.more", ""},
		{"quotes", ""},
	} {
		if got := DemandSubject(c.live); got != c.want {
			t.Errorf("DemandSubject(%q) = %q, want %q", c.live, got, c.want)
		}
	}
}

// waitDemands waits until the receiver has sent at least sent demands, of
// which at least answered were answered.
func waitDemands(t *testing.T, r *Receiver, sent, answered uint64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		s, a := r.Demands()
		if s >= sent && a >= answered {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("demands sent %d, answered %d; want at least %d and %d", s, a, sent, answered)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDemandAnnounced: the receiver announces its demand on the derived
// subject as a request, goes on while nobody answers (the feed handler
// starts later), counts the answers once somebody does, and stops at
// Close.
func TestDemandAnnounced(t *testing.T) {
	rc, fh := startNATS(t)
	r := newReceiver(t, rc, Config{DemandEvery: 20 * time.Millisecond})
	if r.Demand() != "tickcast.test.demand.0" {
		t.Fatalf("Demand() = %q", r.Demand())
	}
	waitDemands(t, r, 3, 0)
	if _, a := r.Demands(); a != 0 {
		t.Fatalf("%d demands answered before anyone listened", a)
	}
	heard := make(chan *nats.Msg, 1000)
	sub, err := fh.Subscribe("tickcast.test.demand.*", func(m *nats.Msg) {
		heard <- m
		m.RespondMsg(&nats.Msg{Header: nats.Header{recovery.HeaderLease: []string{"100"}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := fh.Flush(); err != nil {
		t.Fatal(err)
	}
	s0, _ := r.Demands()
	waitDemands(t, r, s0+2, 2)
	m := <-heard
	if m.Subject != "tickcast.test.demand.0" || m.Reply == "" || len(m.Data) != 0 {
		t.Fatalf("demand on %q, reply %q, %d bytes: want a request on tickcast.test.demand.0 with no payload", m.Subject, m.Reply, len(m.Data))
	}
	r.Close()
	s1, _ := r.Demands()
	time.Sleep(100 * time.Millisecond) // five intervals
	if s2, _ := r.Demands(); s2 != s1 {
		t.Fatalf("%d demands sent after Close", s2-s1)
	}
}

// TestNoDemand: DemandEvery -1, or a subject that is not a feed handler's
// live subject, announces no demand.
func TestNoDemand(t *testing.T) {
	rc, fh := startNATS(t)
	heard, err := fh.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Flush(); err != nil {
		t.Fatal(err)
	}
	off := newReceiver(t, rc, Config{DemandEvery: -1})
	other, err := NewReceiver(rc, "quotes", Config{DemandEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if off.Demand() != "" || other.Demand() != "" {
		t.Fatalf("demand subjects %q and %q, want none", off.Demand(), other.Demand())
	}
	if m, err := heard.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a message on %q", m.Subject)
	}
	// An explicit demand subject is used as given.
	named := newReceiver(t, rc, Config{DemandSubject: "quotes.demand", DemandEvery: time.Hour})
	if m, err := heard.NextMsg(wait); err != nil || m.Subject != "quotes.demand" || named.Demand() != "quotes.demand" {
		t.Fatalf("explicit demand subject: %v, %v", m, err)
	}
}
