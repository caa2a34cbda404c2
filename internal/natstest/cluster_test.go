package natstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tickcast/tickcast/internal/natsconn"
)

// wait bounds each wait of these tests; failover bounds a failover.
const (
	wait     = 5 * time.Second
	failover = 20 * time.Second
	feed     = "tickcast"
)

// users are two feed handlers (A and B lines), a third feed handler and a
// subscriber.
func users(t *testing.T) []natsconn.User {
	t.Helper()
	u, err := natsconn.ParseUsers("fha:pa:feedhandler,fhb:pb:feedhandler,alice:pw:subscriber")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var passwords = map[string]string{"fha": "pa", "fhb": "pb", "alice": "pw"}

// events collects a connection's events.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) log(event string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, fmt.Sprintf("%s: %v", event, err))
}

// permissionErrors returns the permission violations reported so far.
func (e *events) permissionErrors() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.list {
		if strings.Contains(strings.ToLower(s), "permissions violation") {
			out = append(out, s)
		}
	}
	return out
}

// connectAs connects user to url with its inbox prefix, as the programs do.
func connectAs(t *testing.T, url, user string) (*nats.Conn, *events) {
	t.Helper()
	ev := &events{}
	nc, err := natsconn.Connect(natsconn.ConnConfig{URL: url, Name: user, User: user, Password: passwords[user],
		InboxPrefix: natsconn.UserInboxPrefix(user), ReconnectWait: 50 * time.Millisecond}, ev.log)
	if err != nil {
		t.Fatalf("connect %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc, ev
}

func ctxWait(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// openBucket opens (creating) the session bucket with three replicas.
func openBucket(t *testing.T, nc *nats.Conn) jetstream.KeyValue {
	t.Helper()
	kv, err := natsconn.OpenSessionBucket(ctxWait(t, wait), nc, 3)
	if err != nil {
		t.Fatalf("OpenSessionBucket: %v", err)
	}
	return kv
}

func TestSessionRecord(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Feed: feed, Users: users(t)})
	if n := len(c.URLs()); n != DefaultNodes {
		t.Fatalf("%d URLs, want %d", n, DefaultNodes)
	}
	nc, ev := connectAs(t, c.URL(), "fha")
	kv := openBucket(t, nc)
	ctx := ctxWait(t, wait)

	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config; cfg.Replicas != 3 || cfg.MaxMsgsPerSubject != 1 {
		t.Fatalf("bucket has %d replicas and history %d, want 3 and 1", cfg.Replicas, cfg.MaxMsgsPerSubject)
	}

	rev1, err := kv.Create(ctx, feed, []byte("session-1"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := kv.Create(ctx, feed, []byte("session-2")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("second Create: %v, want ErrKeyExists", err)
	}
	e, err := kv.Get(ctx, feed)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if string(e.Value()) != "session-1" || e.Revision() != rev1 {
		t.Fatalf("Get: %q revision %d, want %q revision %d", e.Value(), e.Revision(), "session-1", rev1)
	}
	rev2, err := kv.Update(ctx, feed, []byte("session-2"), rev1)
	if err != nil {
		t.Fatalf("Update at revision %d: %v", rev1, err)
	}
	if _, err := kv.Update(ctx, feed, []byte("session-3"), rev1); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("Update at stale revision %d: %v, want ErrKeyRevisionMismatch", rev1, err)
	}
	if e, err := kv.Get(ctx, feed); err != nil || string(e.Value()) != "session-2" || e.Revision() != rev2 {
		t.Fatalf("Get after updates: %v, %v; want %q revision %d", e, err, "session-2", rev2)
	}
	if v := ev.permissionErrors(); len(v) > 0 {
		t.Fatalf("permission violations: %v", v)
	}

	// A second feed handler (the B line) opens the same bucket.
	ncb, _ := connectAs(t, c.URL(), "fhb")
	if e, err := openBucket(t, ncb).Get(ctx, feed); err != nil || string(e.Value()) != "session-2" {
		t.Fatalf("B line Get: %v, %v; want %q", e, err, "session-2")
	}

	// The feed handlers ask each other for their position: B answers A's
	// request on a session subject, into A's own inbox.
	const position = "tickcast." + feed + ".session.position"
	if _, err := ncb.Subscribe(position, func(m *nats.Msg) { _ = m.Respond([]byte("fhb")) }); err != nil {
		t.Fatal(err)
	}
	if err := ncb.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		m, err := nc.Request(position, nil, wait)
		if errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline) {
			continue // B's interest has not reached A's node yet
		}
		if err != nil || string(m.Data) != "fhb" || !strings.HasPrefix(m.Subject, natsconn.UserInboxPrefix("fha")+".") {
			t.Fatalf("A's request to B: %v, %v", m, err)
		}
		break
	}

	// Only the key named after the feed is granted.
	short := ctxWait(t, time.Second)
	if _, err := kv.Create(short, "otherfeed", []byte("x")); err == nil {
		t.Fatal("Create of another feed's key succeeded")
	}
	if len(ev.permissionErrors()) == 0 {
		t.Fatal("no permission violation reported for another feed's key")
	}
}

func TestSessionRecordFailover(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Feed: feed, Users: users(t)})
	nc, _ := connectAs(t, c.URL(), "fha")
	kv := openBucket(t, nc)
	rev, err := kv.Create(ctxWait(t, wait), feed, []byte("before"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}

	killed := c.NodeOf(nc.ConnectedUrl())
	if killed < 0 {
		t.Fatalf("connected to %q, not a node of %v", nc.ConnectedUrl(), c.URLs())
	}
	c.Kill(killed)

	// Within the bound, the client reconnects elsewhere, reads the record
	// and updates it at the revision it read.
	deadline := time.Now().Add(failover)
	var last error
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no Get and Update within %v of killing node %d: %v", failover, killed, last)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		e, err := kv.Get(ctx, feed)
		if err == nil && (e.Revision() != rev || string(e.Value()) != "before") {
			cancel()
			t.Fatalf("Get: %q revision %d, want %q revision %d", e.Value(), e.Revision(), "before", rev)
		}
		if err == nil {
			rev, err = kv.Update(ctx, feed, []byte("after"), e.Revision())
		}
		cancel()
		if err == nil {
			break
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	if now := c.NodeOf(nc.ConnectedUrl()); now == killed || now < 0 {
		t.Fatalf("connected to node %d (%s) after killing node %d", now, nc.ConnectedUrl(), killed)
	}

	// The killed node, restarted, has the update (from the others).
	c.Restart(killed)
	only, _ := connectAs(t, c.URLs()[killed], "fhb")
	kvOnly := openBucket(t, only)
	deadline = time.Now().Add(failover)
	for {
		e, err := kvOnly.Get(ctxWait(t, time.Second), feed)
		if err == nil && string(e.Value()) == "after" && e.Revision() == rev {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node %d: Get %v, %v; want %q revision %d", killed, e, err, "after", rev)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSubscriberCannotWriteRecord(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Feed: feed, Users: users(t), Quiet: true})
	fh, _ := connectAs(t, c.URL(), "fha")
	kv := openBucket(t, fh)
	rev, err := kv.Create(ctxWait(t, wait), feed, []byte("session-1"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}

	alice, ev := connectAs(t, c.URL(), "alice")
	js, err := jetstream.New(alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(ctxWait(t, time.Second), natsconn.SessionBucket); err == nil {
		t.Error("subscriber looked the session bucket up")
	}
	if _, err := js.Publish(ctxWait(t, time.Second), "$KV."+natsconn.SessionBucket+"."+feed, []byte("forged")); err == nil {
		t.Error("subscriber wrote the session record")
	}
	if err := alice.Publish("$KV."+natsconn.SessionBucket+"."+feed, []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if err := alice.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(ev.permissionErrors()) == 0 {
		t.Error("no permission violation reported to the subscriber")
	}
	e, err := kv.Get(ctxWait(t, wait), feed)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if string(e.Value()) != "session-1" || e.Revision() != rev {
		t.Fatalf("record is %q revision %d, want %q revision %d", e.Value(), e.Revision(), "session-1", rev)
	}
}

func TestQueueGroupRequestReply(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Feed: feed, Users: users(t)})
	const subject = "tickcast." + feed + ".retransmit.0"
	// The A line on node 0 and the B line on node 1 serve one queue group.
	var mu sync.Mutex
	served := map[string]int{}
	for i, name := range []string{"fha", "fhb"} {
		// Without reconnecting, a responder is gone with its node.
		nc, err := nats.Connect(c.URLs()[i], nats.UserInfo(name, passwords[name]),
			nats.CustomInboxPrefix(natsconn.UserInboxPrefix(name)), nats.NoReconnect())
		if err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		t.Cleanup(nc.Close)
		_, err = nc.QueueSubscribe(subject, "recovery", func(m *nats.Msg) {
			mu.Lock()
			served[name]++
			mu.Unlock()
			if err := m.Respond([]byte(name)); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				t.Errorf("%s respond: %v", name, err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	alice, _ := connectAs(t, c.URLs()[2], "alice")
	inbox := alice.NewInbox()
	sub, err := alice.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	// Both members' interest has to reach node 2 before the first request.
	deadline := time.Now().Add(wait)
	for c.Node(2).Interest(subject) == false {
		if time.Now().After(deadline) {
			t.Fatal("node 2 sees no interest in " + subject)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// ask sends n requests, each with its own reply subject, and checks
	// that each is answered exactly once, by one of want.
	ask := func(round string, n int, want ...string) {
		t.Helper()
		for i := range n {
			if err := alice.PublishRequest(subject, fmt.Sprintf("%s.%s%d", inbox, round, i), nil); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]int{}
		for range n {
			m, err := sub.NextMsg(wait)
			if err != nil {
				t.Fatalf("%s: %d of %d answers: %v", round, len(got), n, err)
			}
			if !strings.Contains(strings.Join(want, " "), string(m.Data)) {
				t.Fatalf("%s: answered by %q, want one of %v", round, m.Data, want)
			}
			got[m.Subject]++
		}
		if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
			t.Fatalf("%s: extra answer on %s from %q", round, m.Subject, m.Data)
		}
		for subj, k := range got {
			if k != 1 {
				t.Fatalf("%s: %s answered %d times", round, subj, k)
			}
		}
		if len(got) != n {
			t.Fatalf("%s: %d requests answered, want %d", round, len(got), n)
		}
	}
	ask("both", 40, "fha", "fhb")

	c.Kill(0)
	c.WaitReady()
	ask("one", 20, "fhb")
	mu.Lock()
	defer mu.Unlock()
	if served["fha"]+served["fhb"] != 60 {
		t.Fatalf("served %v, want 60 in all", served)
	}
}
