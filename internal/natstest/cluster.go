// Package natstest is test support: it starts a real NATS cluster of
// embedded servers ([natsconn.StartServer]) with JetStream, on loopback, for
// tests of the session record and of recovery across nodes. It is meant
// for tests only.
package natstest

import (
	"fmt"
	"github.com/tickcast/tickcast/internal/testenv"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/natsconn"
)

// DefaultNodes is the cluster size when ClusterOptions.Nodes is 0.
const DefaultNodes = 3

// readyTimeout bounds how long StartCluster and Restart wait for the
// cluster to form.
const readyTimeout = 15 * time.Second

// ClusterOptions configures StartCluster; the zero value is a three-node
// cluster without users.
type ClusterOptions struct {
	// Nodes is the number of servers; default DefaultNodes.
	Nodes int
	// Feed is the feed name that scopes the users' permissions; default
	// natsconn.DefaultFeed.
	Feed string
	// Users, when any, are the only clients let in, with their roles'
	// permissions, on every node.
	Users []natsconn.User
	// Quiet, when true, keeps the servers' warnings and errors out of the
	// test log.
	Quiet bool
}

// Cluster is a running cluster; the test's clean-up shuts it down.
type Cluster struct {
	t    testing.TB
	cfgs []natsconn.ServerConfig
	urls []string

	mu    sync.Mutex
	nodes []*natsconn.Server // nil while a node is down
	done  bool               // the test has ended: log nothing
}

// StartCluster starts the nodes of a cluster on free loopback ports, with
// JetStream (each node's store under t.TempDir()) and routes from every node
// to every other, and waits until the cluster is ready (see WaitReady). It
// fails the test if the cluster does
// not form within 15 s.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	n := opts.Nodes
	if n == 0 {
		n = DefaultNodes
	}
	if n < 1 {
		t.Fatalf("natstest: ClusterOptions.Nodes %d: want at least 1", n)
	}
	ports := testenv.FreePorts(t, 2*n)
	c := &Cluster{t: t, nodes: make([]*natsconn.Server, n)}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats-route://" + net.JoinHostPort(natsconn.DefaultHost, strconv.Itoa(ports[n+i]))
		c.urls = append(c.urls, "nats://"+net.JoinHostPort(natsconn.DefaultHost, strconv.Itoa(ports[i])))
	}
	dir := t.TempDir()
	for i := range n {
		cfg := natsconn.ServerConfig{
			Name:      "n" + strconv.Itoa(i),
			Host:      natsconn.DefaultHost,
			Port:      ports[i],
			Feed:      opts.Feed,
			Users:     opts.Users,
			JetStream: true,
			StoreDir:  filepath.Join(dir, "n"+strconv.Itoa(i)),
			Cluster: &natsconn.ClusterConfig{
				Name:   "tickcast-test",
				Host:   natsconn.DefaultHost,
				Port:   ports[n+i],
				Routes: slices.Concat(routes[:i], routes[i+1:]),
			},
		}
		if !opts.Quiet {
			cfg.Log = func(level, msg string) { c.log(i, level, msg) }
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	t.Cleanup(c.shutdown)
	for i := range n {
		c.start(i)
	}
	c.WaitReady()
	return c
}

// log passes a node's warnings and errors to the test log.
func (c *Cluster) log(node int, level, msg string) {
	if level == "info" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		c.t.Logf("nats n%d %s: %s", node, level, msg)
	}
}

// start starts node i, failing the test if it does not start.
func (c *Cluster) start(i int) {
	c.t.Helper()
	s, err := natsconn.StartServer(c.cfgs[i])
	if err != nil {
		c.t.Fatalf("natstest: node %d: %v", i, err)
	}
	c.mu.Lock()
	c.nodes[i] = s
	c.mu.Unlock()
}

// shutdown stops every node that runs.
func (c *Cluster) shutdown() {
	c.mu.Lock()
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	for _, s := range nodes {
		if s != nil {
			s.Shutdown()
		}
	}
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
}

// URLs returns the client URLs of the nodes, down ones included, in node
// order.
func (c *Cluster) URLs() []string { return slices.Clone(c.urls) }

// URL returns every node's client URL, comma-separated, as
// natsconn.ConnConfig.URL and the programs' --nats-url accept.
func (c *Cluster) URL() string { return strings.Join(c.urls, ",") }

// Node returns the server of node i, nil while it is down.
func (c *Cluster) Node(i int) *natsconn.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// NodeOf returns the index of the node whose client URL is url (as
// nats.Conn.ConnectedUrl reports it), or -1.
func (c *Cluster) NodeOf(url string) int { return slices.Index(c.urls, url) }

// Kill shuts node i down, closing its clients' connections. Killing a node
// that is down does nothing.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
	}
}

// Restart starts node i again, on the same ports and with the same store,
// and waits until the cluster has formed again. Restarting a node that
// runs does nothing.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Node(i) != nil {
		return
	}
	c.start(i)
	c.WaitReady()
}

// WaitReady waits until every running node has routes to every other
// running node and knows the JetStream meta leader, and the leader has
// heard from JetStream on every running node, failing the test after
// 15 s with what was missing.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		missing := c.notReady()
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: cluster not ready after %v: %s", readyTimeout, missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notReady says what keeps the cluster from being ready, "" when nothing.
func (c *Cluster) notReady() string {
	c.mu.Lock()
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	var names []string
	for _, s := range nodes {
		if s != nil {
			names = append(names, s.Name())
		}
	}
	slices.Sort(names)
	for i, s := range nodes {
		if s == nil {
			continue
		}
		want := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == s.Name() })
		if got := s.Peers(); !slices.Equal(got, want) {
			return fmt.Sprintf("node %d has routes to %v, want %v", i, got, want)
		}
		l := s.MetaLeader()
		if !slices.Contains(names, l) {
			return fmt.Sprintf("node %d knows no running JetStream meta leader (%q)", i, l)
		}
		if l != s.Name() {
			continue
		}
		if got := s.JetStreamPeers(); !slices.Equal(got, names) {
			return fmt.Sprintf("meta leader %s sees JetStream on %v, want %v", l, got, names)
		}
	}
	return ""
}
