package natsconn

import (
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// wait bounds every wait in these tests.
const wait = 5 * time.Second

// quiet is how long a test listens to show that nothing arrives.
const quiet = 300 * time.Millisecond

func startServer(t *testing.T, cfg ServerConfig) *Server {
	t.Helper()
	s, err := StartServer(cfg)
	if err != nil {
		t.Fatalf("StartServer: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

type event struct {
	name string
	err  error
}

// recorder collects a connection's events.
type recorder struct {
	t  *testing.T
	ch chan event
}

func newRecorder(t *testing.T) *recorder { return &recorder{t: t, ch: make(chan event, 1000)} }

func (r *recorder) log(name string, err error) {
	select {
	case r.ch <- event{name, err}:
	default:
	}
}

// waitFor waits for an event of that name whose error satisfies match (nil
// matches any) and returns its error.
func (r *recorder) waitFor(name string, match func(error) bool) error {
	r.t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case e := <-r.ch:
			r.t.Logf("event %s: %v", e.name, e.err)
			if e.name == name && (match == nil || match(e.err)) {
				return e.err
			}
		case <-timer.C:
			r.t.Fatalf("no %q event within %v", name, wait)
			return nil
		}
	}
}

func isPermViolation(err error) bool { return errors.Is(err, nats.ErrPermissionViolation) }

func connect(t *testing.T, cfg ConnConfig) (*nats.Conn, *recorder) {
	t.Helper()
	rec := newRecorder(t)
	nc, err := Connect(cfg, rec.log)
	if err != nil {
		t.Fatalf("Connect(%s): %v", cfg.Name, err)
	}
	t.Cleanup(nc.Close)
	return nc, rec
}

func subscribeSync(t *testing.T, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatalf("subscribe %s: %v", subject, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return sub
}

func expectMsg(t *testing.T, sub *nats.Subscription, want string) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(wait)
	if err != nil {
		t.Fatalf("%s: no message: %v", sub.Subject, err)
	}
	if string(m.Data) != want {
		t.Fatalf("%s: got %q, want %q", sub.Subject, m.Data, want)
	}
	return m
}

func expectNone(t *testing.T, sub *nats.Subscription) {
	t.Helper()
	if m, err := sub.NextMsg(quiet); err == nil {
		t.Fatalf("%s: unexpected message on %s: %q", sub.Subject, m.Subject, m.Data)
	} else if !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("%s: %v", sub.Subject, err)
	}
}

func portOf(t *testing.T, s *Server) int {
	t.Helper()
	u, err := url.Parse(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
