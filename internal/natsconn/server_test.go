package natsconn

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPubSubLoopback(t *testing.T) {
	s := startServer(t, ServerConfig{})
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("ClientURL = %q", s.ClientURL())
	}
	sub, _ := connect(t, ConnConfig{URL: s.ClientURL(), Name: "sub"})
	pub, _ := connect(t, ConnConfig{URL: s.ClientURL(), Name: "pub"})
	if n := s.NumClients(); n != 2 {
		t.Errorf("NumClients = %d, want 2", n)
	}
	ss := subscribeSync(t, sub, "tickcast.tickcast.live.0")
	if err := pub.Publish("tickcast.tickcast.live.0", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, ss, "hello")
	if got := pub.MaxPayload(); got != DefaultMaxPayload {
		t.Errorf("MaxPayload = %d, want %d", got, DefaultMaxPayload)
	}
}

func TestServerMaxPayload(t *testing.T) {
	s := startServer(t, ServerConfig{MaxPayload: 128 << 10})
	nc, _ := connect(t, ConnConfig{URL: s.ClientURL()})
	if got := nc.MaxPayload(); got != 128<<10 {
		t.Errorf("MaxPayload = %d, want %d", got, 128<<10)
	}
}

func TestServerShutdownTwice(t *testing.T) {
	s, err := StartServer(ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.Shutdown()
}

func TestServerPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	start := time.Now()
	var (
		mu     sync.Mutex
		logged []string
	)
	_, err = StartServer(ServerConfig{Port: port, Log: func(level, msg string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, level+": "+msg)
	}})
	if err == nil {
		t.Fatal("StartServer on a busy port succeeded")
	}
	if !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("error does not name the port: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to fail", d)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("error: %v; log: %q", err, logged)
}

func TestServerLog(t *testing.T) {
	ch := make(chan string, 100)
	startServer(t, ServerConfig{Log: func(level, msg string) {
		select {
		case ch <- level + ": " + msg:
		default:
		}
	}})
	select {
	case m := <-ch:
		if !strings.HasPrefix(m, "info: ") {
			t.Errorf("first log line %q", m)
		}
	case <-time.After(wait):
		t.Fatal("nothing logged")
	}
}

func TestServerConfigValidation(t *testing.T) {
	fh := User{Name: "fh", Password: "x", Role: RoleFeedHandler}
	for _, tc := range []struct {
		name  string
		cfg   ServerConfig
		field string
	}{
		{"port", ServerConfig{Port: 70000}, "ServerConfig.Port"},
		{"negative port", ServerConfig{Port: -1}, "ServerConfig.Port"},
		{"feed with dot", ServerConfig{Feed: "a.b"}, "ServerConfig.Feed"},
		{"feed wildcard", ServerConfig{Feed: "*"}, "ServerConfig.Feed"},
		{"small payload", ServerConfig{MaxPayload: 1000}, "ServerConfig.MaxPayload"},
		{"huge payload", ServerConfig{MaxPayload: 1 << 30}, "ServerConfig.MaxPayload"},
		{"host", ServerConfig{Host: "a b"}, "ServerConfig.Host"},
		{"token and users", ServerConfig{Token: "t", Users: []User{fh}}, "ServerConfig.Token"},
		{"user without role", ServerConfig{Users: []User{{Name: "a", Password: "p"}}}, "ServerConfig.Users[0]"},
		{"user without secret", ServerConfig{Users: []User{fh, {Name: "a", Role: RoleSubscriber}}}, "ServerConfig.Users[1]"},
		{"password and nkey", ServerConfig{Users: []User{{Name: "a", Password: "p", NKey: "UX", Role: RoleSubscriber}}}, "ServerConfig.Users[0]"},
		{"bad nkey", ServerConfig{Users: []User{{Name: "a", NKey: "SUABC", Role: RoleSubscriber}}}, "ServerConfig.Users[0]"},
		{"bad name", ServerConfig{Users: []User{{Name: "a.b", Password: "p", Role: RoleSubscriber}}}, "ServerConfig.Users[0]"},
		{"duplicate", ServerConfig{Users: []User{fh, fh}}, "ServerConfig.Users[1]"},
		{"tls no cert", ServerConfig{TLS: &TLSFiles{Key: "k"}}, "ServerConfig.TLS.Cert"},
		{"tls no key", ServerConfig{TLS: &TLSFiles{Cert: "c"}}, "ServerConfig.TLS.Key"},
		{"tls missing files", ServerConfig{TLS: &TLSFiles{Cert: "/nonexistent/c", Key: "/nonexistent/k"}}, "ServerConfig.TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := StartServer(tc.cfg)
			if err == nil {
				s.Shutdown()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}
