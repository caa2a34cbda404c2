package natsconn

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// authServer runs a server with a feed handler "fh" and subscribers "alice"
// and "bob" on feed "tickcast".
func authServer(t *testing.T) *Server {
	t.Helper()
	users, err := ParseUsers("fh:fh-secret:feedhandler,alice:pw1:subscriber,bob:pw:2:subscriber")
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, ServerConfig{Users: users})
}

func connectAs(t *testing.T, s *Server, user, password string) (*nats.Conn, *recorder) {
	t.Helper()
	cfg := ConnConfig{URL: s.ClientURL(), Name: user, User: user, Password: password}
	if user != "fh" {
		cfg.InboxPrefix = UserInboxPrefix(user)
	}
	return connect(t, cfg)
}

// respond answers every request on subject with parts data parts and a
// final marker, as the recovery server does.
func respond(t *testing.T, fh *nats.Conn, subject string, parts int) {
	t.Helper()
	// A requester may stop reading after the first part (nats.go's Request
	// does) and end the test, whose clean-up closes fh while this handler is
	// still answering: a publish refused by a closed connection is that
	// ending, not a fault. Any other publish error is.
	check := func(what string, err error) {
		if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("%s: %v", what, err)
		}
	}
	_, err := fh.Subscribe(subject, func(m *nats.Msg) {
		for i := 1; i <= parts; i++ {
			r := nats.NewMsg(m.Reply)
			r.Header.Set("Tickcast-Part", strconv.Itoa(i))
			r.Data = []byte("part " + strconv.Itoa(i) + " of " + string(m.Data))
			check("reply", fh.PublishMsg(r))
		}
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Tickcast-Final", strconv.Itoa(parts))
		check("final", fh.PublishMsg(r))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Flush(); err != nil {
		t.Fatal(err)
	}
}

// request sends a request on subject and reads parts data parts and the
// final marker from the reply inbox.
func request(t *testing.T, nc *nats.Conn, subject, payload string, parts int) string {
	t.Helper()
	inbox := nc.NewInbox()
	sub := subscribeSync(t, nc, inbox)
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, []byte(payload)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= parts; i++ {
		m := expectMsg(t, sub, "part "+strconv.Itoa(i)+" of "+payload)
		if got := m.Header.Get("Tickcast-Part"); got != strconv.Itoa(i) {
			t.Fatalf("part header %q, want %d", got, i)
		}
	}
	m := expectMsg(t, sub, "")
	if got := m.Header.Get("Tickcast-Final"); got != strconv.Itoa(parts) {
		t.Fatalf("final header %q, want %d", got, parts)
	}
	return inbox
}

func TestSubscriberRequestsFeedHandlerReplies(t *testing.T) {
	s := authServer(t)
	fh, _ := connectAs(t, s, "fh", "fh-secret")
	alice, arec := connectAs(t, s, "alice", "pw1")
	respond(t, fh, "tickcast.tickcast.retransmit.>", 3)
	respond(t, fh, "tickcast.tickcast.snapshot.>", 5)

	inbox := request(t, alice, "tickcast.tickcast.retransmit.0", "gap", 3)
	if !strings.HasPrefix(inbox, "_INBOX_alice.") {
		t.Errorf("inbox %q not under alice's prefix", inbox)
	}
	request(t, alice, "tickcast.tickcast.snapshot.7", "snap", 5)
	// The request helper of nats.go works too (it takes the first part).
	m, err := alice.Request("tickcast.tickcast.retransmit.1", []byte("one"), wait)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if string(m.Data) != "part 1 of one" {
		t.Errorf("Request reply %q", m.Data)
	}
	select {
	case e := <-arec.ch:
		if e.name == EventError {
			t.Errorf("alice got an error: %v", e.err)
		}
	default:
	}
}

func TestSubscriberCannotPublishLive(t *testing.T) {
	s := authServer(t)
	fh, _ := connectAs(t, s, "fh", "fh-secret")
	alice, arec := connectAs(t, s, "alice", "pw1")
	bob, _ := connectAs(t, s, "bob", "pw:2")
	live := subscribeSync(t, bob, "tickcast.tickcast.live.>")

	if err := alice.Publish("tickcast.tickcast.live.0", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	err := arec.waitFor(EventError, isPermViolation)
	if !strings.Contains(err.Error(), "tickcast.tickcast.live.0") {
		t.Errorf("violation does not name the subject: %v", err)
	}
	// The feed handler's publish arrives, and it is the first thing bob sees.
	if err := fh.Publish("tickcast.tickcast.live.0", []byte("real")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, live, "real")
	expectNone(t, live)

	// Nor may a subscriber publish anything else, such as a reply subject.
	if err := alice.Publish("_INBOX_bob.x.y", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	arec.waitFor(EventError, isPermViolation)
}

func TestSubscriberCannotReadAnotherInbox(t *testing.T) {
	s := authServer(t)
	fh, _ := connectAs(t, s, "fh", "fh-secret")
	alice, _ := connectAs(t, s, "alice", "pw1")
	bob, brec := connectAs(t, s, "bob", "pw:2")
	respond(t, fh, "tickcast.tickcast.retransmit.>", 2)

	spy, err := bob.SubscribeSync("_INBOX_alice.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}
	err = brec.waitFor(EventError, isPermViolation)
	if !strings.Contains(err.Error(), "_INBOX_alice.>") {
		t.Errorf("violation does not name the subject: %v", err)
	}
	// The same holds for the default inbox prefix and for everything.
	everything, err := bob.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	brec.waitFor(EventError, isPermViolation)

	request(t, alice, "tickcast.tickcast.retransmit.0", "mine", 2)
	expectNone(t, spy)
	expectNone(t, everything)
}

func TestFeedHandlerRepliesOnlyToRequests(t *testing.T) {
	s := authServer(t)
	fh, frec := connectAs(t, s, "fh", "fh-secret")
	alice, _ := connectAs(t, s, "alice", "pw1")
	inbox := subscribeSync(t, alice, UserInboxPrefix("alice")+".>")

	// An unsolicited message to alice's inbox is refused.
	if err := fh.Publish(UserInboxPrefix("alice")+".x.1", []byte("unsolicited")); err != nil {
		t.Fatal(err)
	}
	frec.waitFor(EventError, isPermViolation)
	expectNone(t, inbox)
	// The feed handler may not subscribe to live data or inboxes either.
	if _, err := fh.SubscribeSync("tickcast.tickcast.live.>"); err != nil {
		t.Fatal(err)
	}
	frec.waitFor(EventError, isPermViolation)
	// Nor publish on another feed's subjects.
	if err := fh.Publish("tickcast.other.live.0", nil); err != nil {
		t.Fatal(err)
	}
	frec.waitFor(EventError, isPermViolation)
}

func TestSubscriberNeedsItsInboxPrefix(t *testing.T) {
	s := authServer(t)
	fh, _ := connectAs(t, s, "fh", "fh-secret")
	respond(t, fh, "tickcast.tickcast.retransmit.>", 1)
	// alice with the default prefix cannot read her replies.
	nc, rec := connect(t, ConnConfig{URL: s.ClientURL(), User: "alice", Password: "pw1"})
	_, err := nc.Request("tickcast.tickcast.retransmit.0", []byte("x"), 500*time.Millisecond)
	if err == nil {
		t.Fatal("request with the default inbox prefix got a reply")
	}
	rec.waitFor(EventError, isPermViolation)
}

func TestAuthFailures(t *testing.T) {
	s := authServer(t)
	for _, tc := range []struct{ name, user, pass string }{
		{"wrong password", "alice", "nope"},
		{"unknown user", "mallory", "pw1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			nc, err := Connect(ConnConfig{URL: s.ClientURL(), User: tc.user, Password: tc.pass}, nil)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("error %v is not nats.ErrAuthorization", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v to fail", d)
			}
		})
	}
	t.Run("anonymous", func(t *testing.T) {
		nc, err := Connect(ConnConfig{URL: s.ClientURL()}, nil)
		if err == nil {
			nc.Close()
			t.Fatal("connected")
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("error %v is not nats.ErrAuthorization", err)
		}
	})
}

func TestToken(t *testing.T) {
	s := startServer(t, ServerConfig{Token: "s3cret"})
	a, _ := connect(t, ConnConfig{URL: s.ClientURL(), Token: "s3cret"})
	b, _ := connect(t, ConnConfig{URL: s.ClientURL(), Token: "s3cret"})
	sub := subscribeSync(t, b, "anything.goes")
	if err := a.Publish("anything.goes", []byte("tok")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, sub, "tok")
	for _, tok := range []string{"wrong", ""} {
		nc, err := Connect(ConnConfig{URL: s.ClientURL(), Token: tok}, nil)
		if err == nil {
			nc.Close()
			t.Fatalf("token %q connected", tok)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("token %q: error %v is not nats.ErrAuthorization", tok, err)
		}
	}
}

// TestRepairSubjects: the feed handler may publish repairs and hear them
// (queue-group members learn each other's repairs there); subscribers hear
// them and may not publish any.
func TestRepairSubjects(t *testing.T) {
	s := authServer(t)
	fh, _ := connectAs(t, s, "fh", "fh-secret")
	alice, arec := connectAs(t, s, "alice", "pw1")
	bob, brec := connectAs(t, s, "bob", "pw:2")
	heard := subscribeSync(t, bob, "tickcast.tickcast.repair.*")
	peer := subscribeSync(t, fh, "tickcast.tickcast.repair.*")

	if err := alice.Publish("tickcast.tickcast.repair.0", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	arec.waitFor(EventError, isPermViolation)
	if err := fh.Publish("tickcast.tickcast.repair.0", []byte("repair")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, heard, "repair")
	expectNone(t, heard)
	expectMsg(t, peer, "repair")
	select {
	case e := <-brec.ch:
		if e.name == EventError {
			t.Errorf("bob got an error: %v", e.err)
		}
	default:
	}
}

// TestEntitledChannels: a subscriber entitled to channel 1 only receives
// channel 1's live data and repairs and asks for its retransmissions; the
// server refuses it the same on channel 0. Key requests go to every
// channel (the feed handler answers them by entitlement).
func TestEntitledChannels(t *testing.T) {
	users, err := ParseUsers("fh:fh-secret:feedhandler,carol:pw:subscriber:1")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, ServerConfig{Users: users})
	fh, _ := connectAs(t, s, "fh", "fh-secret")
	carol, crec := connectAs(t, s, "carol", "pw")
	respond(t, fh, "tickcast.tickcast.retransmit.>", 1)
	respond(t, fh, "tickcast.tickcast.keys.>", 1)

	request(t, carol, "tickcast.tickcast.retransmit.1", "gap", 1)
	request(t, carol, "tickcast.tickcast.keys.0", "", 1)
	live1 := subscribeSync(t, carol, "tickcast.tickcast.live.1")
	repair1 := subscribeSync(t, carol, "tickcast.tickcast.repair.1")
	select {
	case e := <-crec.ch:
		if e.name == EventError {
			t.Fatalf("carol refused on her own channel: %v", e.err)
		}
	default:
	}
	for _, subj := range []string{"tickcast.tickcast.live.1", "tickcast.tickcast.repair.1"} {
		if err := fh.Publish(subj, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	expectMsg(t, live1, "one")
	expectMsg(t, repair1, "one")

	for _, subj := range []string{"tickcast.tickcast.live.0", "tickcast.tickcast.repair.0", "tickcast.tickcast.live.>", "tickcast.tickcast.repair.*"} {
		if _, err := carol.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		err := crec.waitFor(EventError, isPermViolation)
		if !strings.Contains(err.Error(), subj) {
			t.Errorf("subscribe %s: violation %v does not name it", subj, err)
		}
	}
	for _, subj := range []string{"tickcast.tickcast.retransmit.0", "tickcast.tickcast.snapshot.0", "tickcast.tickcast.session.0", "tickcast.tickcast.demand.0"} {
		if err := carol.PublishRequest(subj, carol.NewInbox(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		err := crec.waitFor(EventError, isPermViolation)
		if !strings.Contains(err.Error(), subj) {
			t.Errorf("publish %s: violation %v does not name it", subj, err)
		}
	}
}

// TestSetUsers: a reload of the users disconnects a user who is gone, and
// narrows another's entitlement at once; the others stay connected.
func TestSetUsers(t *testing.T) {
	users, err := ParseUsers("fh:fh-secret:feedhandler,alice:pw1:subscriber,bob:pw:subscriber")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, ServerConfig{Users: users})
	fh, frec := connectAs(t, s, "fh", "fh-secret")
	alice, arec := connectAs(t, s, "alice", "pw1")
	bob, _ := connectAs(t, s, "bob", "pw")

	narrowed, err := ParseUsers("fh:fh-secret:feedhandler,alice:pw1:subscriber:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetUsers(narrowed); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for bob.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("bob, no longer a user, still connected 5s after the reload")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !alice.IsConnected() || !fh.IsConnected() {
		t.Fatal("a user still in the file was disconnected")
	}
	live1 := subscribeSync(t, alice, "tickcast.tickcast.live.1")
	if _, err := alice.SubscribeSync("tickcast.tickcast.live.0"); err != nil {
		t.Fatal(err)
	}
	if err := arec.waitFor(EventError, isPermViolation); !strings.Contains(err.Error(), "live.0") {
		t.Errorf("violation %v does not name live.0", err)
	}
	if err := fh.Publish("tickcast.tickcast.live.1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, live1, "one")
	select {
	case e := <-frec.ch:
		if e.name == EventError {
			t.Errorf("the feed handler got an error: %v", e.err)
		}
	default:
	}
	if err := s.SetUsers(nil); err == nil {
		t.Error("SetUsers(nil) accepted")
	}
	if err := startServer(t, ServerConfig{}).SetUsers(narrowed); err == nil {
		t.Error("SetUsers on a server started without users accepted")
	}
}
