package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSHM: a feed handler with --shm writes every packet to its
// shared-memory rings beside multicast. A subscriber with --transport shm
// on the same host and one on the multicast groups both receive every
// message, sealed (one channel encrypted) and verified. The feed handler
// is then killed and another started on the same rings: the shm
// subscriber follows the new session. A second writer on a ring in use is
// refused, naming the ring.
func TestSHM(t *testing.T) {
	ga, _, _ := groups(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	local := start(t, ctx, subscriberBin, "--transport", "shm", "--shm-dir", dir, "--channels", "2", "--verify", "--expect", "200000")
	udp := start(t, ctx, subscriberBin, "--group", ga, "--channels", "2", "--verify", "--expect", "200000", "--metrics-addr", "127.0.0.1:0")
	local.waitLog(t, `"subscribed"`, 10*time.Second)
	udp.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--shm", "--shm-dir", dir, "--group", ga, "--channels", "2", "--encrypt", "1", "--count", "200000", "--rate", "100000")
	for name, p := range map[string]*proc{"shm": local, "udp": udp} {
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("%s subscriber exit %d: %v\n%s", name, code, p.summary(t), tail(p.stderr.String()))
		}
		s := p.summary(t)
		t.Logf("%s: received %v, missing %v, latency p50 %v µs", name, s["received"], s["missing"], s["latency_p50_us"])
		if num(t, s, "received") != 200_000 || num(t, s, "missing") != 0 || s["verify_ok"] != true || num(t, s, "unauthenticated") != 0 {
			t.Fatalf("%s subscriber: %v; want every message, verified, each seal opened", name, s)
		}
	}
	fh.wait(t, 30*time.Second)
	for ch := range 2 {
		if _, err := os.Stat(filepath.Join(dir, "tickcast-tickcast-"+string(rune('0'+ch)))); err != nil {
			t.Errorf("ring of channel %d: %v", ch, err)
		}
	}

	// A restart: the first feed handler is killed mid-session, a second
	// takes the rings over with a new session.
	follow := start(t, ctx, subscriberBin, "--transport", "shm", "--shm-dir", dir, "--channels", "1", "--idle-timeout", "10s")
	follow.waitLog(t, `"subscribed"`, 10*time.Second)
	first := start(t, ctx, feedhandlerBin, "--shm", "--shm-dir", dir, "--group", ga, "--channels", "1", "--count", "0", "--rate", "20000")
	first.waitLog(t, `"publishing"`, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	second := start(t, ctx, feedhandlerBin, "--shm", "--shm-dir", dir, "--group", ga, "--channels", "1", "--count", "1000", "--rate", "20000",
		"--nats-listen", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	if code := second.wait(t, 20*time.Second); code == 0 || !strings.Contains(second.stderr.String(), "tickcast-tickcast-0") {
		t.Fatalf("a second writer on a ring in use: exit %d, want a refusal naming the ring:\n%s", code, tail(second.stderr.String()))
	}
	first.cmd.Process.Kill()
	first.wait(t, 10*time.Second)
	third := start(t, ctx, feedhandlerBin, "--shm", "--shm-dir", dir, "--group", ga, "--channels", "1", "--count", "20000", "--rate", "20000")
	if code := third.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feed handler after the restart: exit %d\n%s", code, tail(third.stderr.String()))
	}
	if code := follow.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("following subscriber exit %d: %v\n%s", code, follow.summary(t), tail(follow.stderr.String()))
	}
	s := follow.summary(t)
	t.Logf("across the restart: received %v, sessions %v, missing %v", s["received"], s["sessions"], s["missing"])
	if num(t, s, "sessions") != 2 || num(t, s, "received") < 20_000 || num(t, s, "missing") != 0 {
		t.Fatalf("across the restart: %v; want both sessions, the second whole", s)
	}
}
