package natsconn

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestServerConfigClusterErrors(t *testing.T) {
	users, err := ParseUsers("fh:pw:feedhandler")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{JetStream: true}, "ServerConfig.StoreDir: required with JetStream"},
		{ServerConfig{StoreDir: t.TempDir()}, "ServerConfig.StoreDir: set without JetStream"},
		{ServerConfig{Name: "a b"}, "ServerConfig.Name"},
		{ServerConfig{Cluster: &ClusterConfig{Name: "a.b"}}, "ServerConfig.Cluster.Name"},
		{ServerConfig{Cluster: &ClusterConfig{Host: "a b"}}, "ServerConfig.Cluster.Host"},
		{ServerConfig{Cluster: &ClusterConfig{Port: 70000}}, "ServerConfig.Cluster.Port"},
		{ServerConfig{Cluster: &ClusterConfig{Routes: []string{"nats-route://127.0.0.1:1", "http://127.0.0.1:2"}}}, "ServerConfig.Cluster.Routes[1]"},
		{ServerConfig{Cluster: &ClusterConfig{Routes: []string{"nats-route://127.0.0.1"}}}, "ServerConfig.Cluster.Routes[0]"},
		{ServerConfig{Users: users, Cluster: &ClusterConfig{Host: "0.0.0.0"}}, "ServerConfig.Cluster.Password: required"},
		{ServerConfig{Token: "t", Cluster: &ClusterConfig{Host: "192.0.2.1"}}, "ServerConfig.Cluster.Password: required"},
	} {
		s, err := StartServer(tc.cfg)
		if err == nil {
			s.Shutdown()
			t.Errorf("%+v: started, want error %q", tc.cfg, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %q, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestServerConfigDefaultName(t *testing.T) {
	if got, want := (ServerConfig{Port: 4222}).withDefaults().Name, "tickcast-127.0.0.1-4222"; got != want {
		t.Errorf("with Port: Name %q, want %q", got, want)
	}
	c := ServerConfig{Host: "::1", Cluster: &ClusterConfig{Port: 6222}}.withDefaults()
	if got, want := c.Name, "tickcast-127.0.0.1-6222"; got != want {
		t.Errorf("with Cluster.Port: Name %q, want %q", got, want)
	}
	if got, want := (ServerConfig{Host: "::1", Port: 4222}).withDefaults().Name, "tickcast-__1-4222"; got != want {
		t.Errorf("IPv6: Name %q, want %q", got, want)
	}
	a, b := ServerConfig{}.withDefaults().Name, ServerConfig{}.withDefaults().Name
	if a == b || !strings.HasPrefix(a, "tickcast-") {
		t.Errorf("without ports: names %q and %q, want two different tickcast-... names", a, b)
	}
	s := startServer(t, ServerConfig{Name: "node-a"})
	if s.Name() != "node-a" {
		t.Errorf("Name() %q, want node-a", s.Name())
	}
	if u := s.ClusterURL(); u != "" {
		t.Errorf("ClusterURL() %q without a cluster, want none", u)
	}
	if l := s.MetaLeader(); l != "" {
		t.Errorf("MetaLeader() %q without JetStream, want none", l)
	}
}

// waitPeers waits until s has routes to exactly want.
func waitPeers(t *testing.T, s *Server, want ...string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !slices.Equal(s.Peers(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s has routes to %v, want %v", s.Name(), s.Peers(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClusterRouteCredentials(t *testing.T) {
	a := startServer(t, ServerConfig{Name: "a", Cluster: &ClusterConfig{Password: "route-secret"}})
	if !strings.HasPrefix(a.ClusterURL(), "nats-route://127.0.0.1:") {
		t.Fatalf("ClusterURL() %q", a.ClusterURL())
	}
	startServer(t, ServerConfig{Name: "b", Cluster: &ClusterConfig{Password: "route-secret", Routes: []string{a.ClusterURL()}}})
	waitPeers(t, a, "b")

	// A node with another password is refused, and so is one without.
	startServer(t, ServerConfig{Name: "c", Cluster: &ClusterConfig{Password: "wrong", Routes: []string{a.ClusterURL()}}})
	startServer(t, ServerConfig{Name: "d", Cluster: &ClusterConfig{Routes: []string{a.ClusterURL()}}})
	time.Sleep(quiet)
	waitPeers(t, a, "b")
}

func TestStandaloneJetStream(t *testing.T) {
	users, err := ParseUsers("fh:pw:feedhandler")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, ServerConfig{Name: "solo", Users: users, JetStream: true, StoreDir: t.TempDir()})
	if l := s.MetaLeader(); l != "solo" {
		t.Fatalf("MetaLeader() %q, want solo", l)
	}
	nc, _ := connect(t, ConnConfig{URL: s.ClientURL(), User: "fh", Password: "pw", InboxPrefix: UserInboxPrefix("fh")})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := OpenSessionBucket(ctx, nc, 0); err == nil {
		t.Fatal("OpenSessionBucket with 0 replicas succeeded")
	}
	kv, err := OpenSessionBucket(ctx, nc, 1)
	if err != nil {
		t.Fatalf("OpenSessionBucket: %v", err)
	}
	rev, err := kv.Create(ctx, DefaultFeed, []byte("s1"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	// Opening again finds the bucket and its record.
	kv, err = OpenSessionBucket(ctx, nc, 1)
	if err != nil {
		t.Fatalf("OpenSessionBucket again: %v", err)
	}
	if _, err := kv.Update(ctx, DefaultFeed, []byte("s2"), rev+1); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("Update at a future revision: %v, want ErrKeyRevisionMismatch", err)
	}
	if e, err := kv.Get(ctx, DefaultFeed); err != nil || string(e.Value()) != "s1" || e.Revision() != rev {
		t.Fatalf("Get: %v, %v; want s1 revision %d", e, err, rev)
	}
}
