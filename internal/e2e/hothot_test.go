package e2e

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/natstest"
	"github.com/tickcast/tickcast/mold"
)

// hotHotUsers are the cluster's users in the hot-hot tests.
var hotHotUsers = []natsconn.User{
	{Name: "fh", Password: "fh-secret", Role: natsconn.RoleFeedHandler},
	{Name: "alice", Password: "alice-secret", Role: natsconn.RoleSubscriber},
}

// lineWatch records when each data packet of channel 0 of one line
// arrives, and the last sequence it carries, to measure how delivery went
// on across a kill.
type lineWatch struct {
	mu      sync.Mutex
	packets []linePacket
}

type linePacket struct {
	at          time.Time
	first, last uint64
}

func watchLine(t *testing.T, group string) *lineWatch {
	t.Helper()
	base, err := tickcast.ParseGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := loopback()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenMulticastUDP("udp4", lo, net.UDPAddrFromAddrPort(base))
	if err != nil {
		t.Fatalf("watch %s: %v", base, err)
	}
	c.SetReadBuffer(4 << 20)
	w := &lineWatch{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if p, err := mold.Parse(buf[:n]); err == nil && p.Messages() > 0 {
				w.mu.Lock()
				w.packets = append(w.packets, linePacket{time.Now(), p.Seq, p.Seq + uint64(p.Messages()) - 1})
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return w
}

// highest returns the highest sequence the line carried.
func (w *lineWatch) highest() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var h uint64
	for _, p := range w.packets {
		h = max(h, p.last)
	}
	return h
}

// beyond returns when the line first carried a sequence above seq, and
// whether it did.
func (w *lineWatch) beyond(seq uint64) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.packets {
		if p.last > seq {
			return p.at, true
		}
	}
	return time.Time{}, false
}

// failover returns the time from a kill of the feed handler of line dead
// to the first packet of line alive carrying what dead had not sent (0 when
// alive was ahead already), and the last sequence dead sent.
func failover(t *testing.T, dead, alive *lineWatch, killed time.Time) (time.Duration, uint64) {
	t.Helper()
	last := dead.highest()
	at, ok := alive.beyond(last)
	if !ok {
		t.Fatalf("the surviving line never carried channel 0 past %d, the killed line's last", last)
	}
	return max(0, at.Sub(killed)), last
}

// TestHotHotFailover: feed handler A publishes line A and feed handler B
// line B of the same sessions, sharing the session record and recovery on a
// three-node NATS cluster with authentication. A is killed mid-stream, then
// restarted and rejoins; then B is killed. Every verifying subscriber ends
// with nothing missing, one of them recovering injected losses throughout.
func TestHotHotFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the hot-hot failover run takes about 15 s")
	}
	cluster := natstest.StartCluster(t, natstest.ClusterOptions{Users: hotHotUsers, Quiet: true})
	// Line B on a port of its own, so that each line's watcher (bound to
	// the port on every address) hears only its line.
	ga, _, _ := groups(t)
	_, gb, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const count = 240_000 // 12 s at 20,000 msg/s
	fhArgs := func(line string) []string {
		return []string{"--nats-url", cluster.URL(), "--nats-user", "fh", "--nats-password", "fh-secret",
			"--session-record", "on", "--line", line, "--group", ga, "--group-b", gb,
			"--count", strconv.Itoa(count), "--rate", "20000", "--metrics-addr", "127.0.0.1:0", "--linger", "3s"}
	}
	subArgs := func(extra ...string) []string {
		return append([]string{"--nats-url", cluster.URL(), "--nats-user", "alice", "--nats-password", "alice-secret",
			"--verify", "--group", ga, "--group-b", gb, "--expect", strconv.Itoa(count), "--idle-timeout", "10s",
			"--metrics-addr", "127.0.0.1:0"}, extra...)
	}
	plain := launch(t, ctx, subscriberBin, subArgs()...)
	lossy := launch(t, ctx, subscriberBin, subArgs("--inject-loss", "0.02", "--inject-seed", "3")...)
	plain.waitLog(t, `"subscribed"`, 10*time.Second)
	lossy.waitLog(t, `"subscribed"`, 10*time.Second)
	lineA, lineB := watchLine(t, ga), watchLine(t, gb)

	a := launch(t, ctx, feedhandlerBin, fhArgs("a")...)
	a.waitLog(t, `"publishing"`, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	b := launch(t, ctx, feedhandlerBin, fhArgs("b")...)
	b.waitLog(t, "caught up with the peer", 10*time.Second)

	time.Sleep(2 * time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedA := time.Now()
	a.wait(t, 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	toB, lastA := failover(t, lineA, lineB, killedA)
	t.Logf("A killed: line A's last on channel 0 was %d; line B carried what followed %v after the kill", lastA, toB.Round(time.Microsecond))

	time.Sleep(2 * time.Second)
	a2 := launch(t, ctx, feedhandlerBin, fhArgs("a")...)
	a2.waitLog(t, "caught up with the peer", 10*time.Second)
	time.Sleep(2 * time.Second)
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedB := time.Now()
	b.wait(t, 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	toA, lastB := failover(t, lineB, lineA, killedB)
	t.Logf("B killed: line B's last on channel 0 was %d; line A (restarted) carried what followed %v after the kill", lastB, toA.Round(time.Microsecond))

	if code := a2.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("restarted feed handler A exit %d\n%s", code, tail(a2.stderr.String()))
	}
	fa := a2.summary(t)
	t.Logf("restarted A: %d messages, %d caught up silently", num(t, fa, "messages"), num(t, fa, "caught_up"))
	if num(t, fa, "caught_up") == 0 || num(t, fa, "messages") != count {
		t.Errorf("restarted A published %d messages, %d caught up: want %d in all, some caught up", num(t, fa, "messages"), num(t, fa, "caught_up"), count)
	}
	for name, sub := range map[string]*proc{"plain": plain, "lossy": lossy} {
		code := sub.wait(t, 30*time.Second)
		s := sub.summary(t)
		t.Logf("%s subscriber: exit %d, received %d, missing %d, wins A %d, B %d, recovered %d, requests %d, injected %d messages; B killed %v before its end",
			name, code, num(t, s, "received"), num(t, s, "missing"), num(t, s, "wins_a"), num(t, s, "wins_b"),
			num(t, s, "recovered"), num(t, s, "requests"), num(t, s, "injected_dropped_messages"), time.Since(killedB).Round(time.Millisecond))
		if code != 0 || num(t, s, "missing") != 0 || num(t, s, "received") != count || s["verify_ok"] != true {
			t.Errorf("%s subscriber: exit %d, received %d, missing %d, verify_ok %v; want all %d, none missing\n%s",
				name, code, num(t, s, "received"), num(t, s, "missing"), s["verify_ok"], count, tail(sub.stderr.String()))
		}
		if num(t, s, "wins_a") == 0 || num(t, s, "wins_b") == 0 {
			t.Errorf("%s subscriber: wins A %d, B %d: both lines should have delivered", name, num(t, s, "wins_a"), num(t, s, "wins_b"))
		}
		if name == "lossy" && (num(t, s, "injected_dropped_messages") == 0 || num(t, s, "recovered") == 0) {
			t.Errorf("lossy subscriber: injected %d, recovered %d: want losses recovered", num(t, s, "injected_dropped_messages"), num(t, s, "recovered"))
		}
	}
	if strings.Contains(a2.stderr.String(), `"session replaced`) {
		t.Errorf("the restarted feed handler started new sessions")
	}
}

// busiestNode returns the running node of the cluster with the most client
// connections.
func busiestNode(c *natstest.Cluster) int {
	best, most := -1, -1
	for i := range c.URLs() {
		if n := c.Node(i); n != nil && n.NumClients() > most {
			best, most = i, n.NumClients()
		}
	}
	return best
}

// TestNATSNodeKilled: a feed handler and a subscriber with injected loss on
// line A alone, so that every loss needs recovery, on a three-node
// cluster. The node with the most clients is killed mid-run, restarted, and
// then the busiest node again is killed: the clients fail over, requests in
// flight are asked again within their deadline, and recovered + missing =
// injected with nothing missing.
func TestNATSNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the NATS node failover run takes about 12 s")
	}
	cluster := natstest.StartCluster(t, natstest.ClusterOptions{Users: hotHotUsers, Quiet: true})
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const count = 160_000 // 8 s at 20,000 msg/s
	sub := launch(t, ctx, subscriberBin, "--nats-url", cluster.URL(), "--nats-user", "alice", "--nats-password", "alice-secret",
		"--verify", "--group", ga, "--expect", strconv.Itoa(count), "--idle-timeout", "10s", "--metrics-addr", "127.0.0.1:0",
		"--inject-loss", "0.01", "--inject-seed", "11")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := launch(t, ctx, feedhandlerBin, "--nats-url", cluster.URL(), "--nats-user", "fh", "--nats-password", "fh-secret",
		"--session-record", "on", "--group", ga, "--count", strconv.Itoa(count), "--rate", "20000",
		"--metrics-addr", "127.0.0.1:0", "--linger", "3s")
	fh.waitLog(t, `"publishing"`, 10*time.Second)

	time.Sleep(2 * time.Second)
	first := busiestNode(cluster)
	t.Logf("killing node %d (%d clients)", first, cluster.Node(first).NumClients())
	cluster.Kill(first)
	time.Sleep(1500 * time.Millisecond)
	cluster.Restart(first)
	second := busiestNode(cluster)
	t.Logf("node %d back; killing node %d (%d clients)", first, second, cluster.Node(second).NumClients())
	cluster.Kill(second)

	if code := fh.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	code := sub.wait(t, 30*time.Second)
	s := sub.summary(t)
	received, missing, recovered, injected := num(t, s, "received"), num(t, s, "missing"), num(t, s, "recovered"), num(t, s, "injected_dropped_messages")
	t.Logf("subscriber: exit %d, received %d, missing %d, recovered %d, injected %d, requests %d (failed %d), kernel drops %d",
		code, received, missing, recovered, injected, num(t, s, "requests"), num(t, s, "recovery_failed"), num(t, s, "kernel_drops"))
	if num(t, s, "kernel_drops") != 0 {
		t.Fatalf("the kernel dropped %d datagrams too; the accounting needs a rate this machine sustains", num(t, s, "kernel_drops"))
	}
	if injected == 0 || recovered+missing != injected {
		t.Errorf("recovered %d + missing %d != injected %d", recovered, missing, injected)
	}
	if code != 0 || missing != 0 || received != count || s["verify_ok"] != true {
		t.Errorf("exit %d, received %d, missing %d, verify_ok %v: want all %d\n%s", code, received, missing, s["verify_ok"], count, tail(sub.stderr.String()))
	}
}
