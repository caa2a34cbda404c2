package e2e

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/natsconn"
)

// TestLiveOverNATS: subscribers that take the feed from the feed handler's
// live NATS subjects instead of multicast (--transport nats). One receives
// every message, verified; the other, with 5% of its datagrams dropped by
// the injector and recovery off, reports missing exactly the messages
// inside the dropped datagrams.
//
// The test runs its own NATS server, which both programs are pointed at, so
// that the subscribers' subscriptions are in place before the feed handler
// publishes its first datagram (with the feed handler's embedded server they
// could only connect once it is up, and miss the start). The feed handler
// publishes the live subjects always (--nats-live-always): on demand, it
// would learn of the subscribers only from their next demand, up to a
// second into the run, and the lossy subscriber, which recovers nothing,
// would miss the start on top of the injected losses. The full subscriber
// checks the demand too: its receivers' demands reach the feed handler.
//
// With -short (the race run, where every program is several times slower)
// it publishes 50,000 messages at 25,000 msg/s instead of 200,000 at
// 100,000: faster, the feed handler's queue to NATS overflowed there and
// its dropped datagrams were missing on top of the injected ones.
func TestLiveOverNATS(t *testing.T) {
	count, rate := 200_000, 100_000
	if testing.Short() {
		count, rate = 50_000, 25_000
	}
	host, portStr, _ := net.SplitHostPort(natsAddr(t))
	port, _ := strconv.Atoi(portStr)
	srv, err := natsconn.StartServer(natsconn.ServerConfig{Host: host, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()

	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := start(t, ctx, subscriberBin, "--nats-url", url, "--transport", "nats", "--group", ga,
		"--verify", "--expect", strconv.Itoa(count))
	lossy := start(t, ctx, subscriberBin, "--nats-url", url, "--transport", "nats", "--group", ga,
		"--recovery=false", "--verify", "--inject-loss", "0.05", "--inject-seed", "7", "--idle-timeout", "3s")
	full.waitLog(t, `"subscribed"`, 10*time.Second)
	lossy.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--nats-url", url, "--nats-live-always", "--count", strconv.Itoa(count), "--rate", strconv.Itoa(rate), "--group", ga)
	if code := fh.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	fs := fh.summary(t)
	if d := num(t, fs, "live_dropped"); d != 0 {
		t.Fatalf("the feed handler dropped %d datagrams from its full queue to NATS: the comparison needs a rate this machine sustains", d)
	}
	if num(t, fs, "live_skipped") != 0 || num(t, fs, "live_demands") == 0 {
		t.Fatalf("--nats-live-always: live_skipped %d, live_demands %d; want none skipped, the subscribers' demands heard", num(t, fs, "live_skipped"), num(t, fs, "live_demands"))
	}

	code := full.wait(t, 20*time.Second)
	s := full.summary(t)
	t.Logf("nats subscriber: exit %d, %d received in %d packets, %d missing, %d gaps, %d NATS slow-consumer drops, ring full %d, verify_ok %v, %.3f mallocs/msg",
		code, num(t, s, "received"), num(t, s, "packets"), num(t, s, "missing"), num(t, s, "gaps"),
		num(t, s, "kernel_drops"), num(t, s, "ring_full"), s["verify_ok"], s["mallocs_per_msg"])
	if code != 0 || num(t, s, "received") != uint64(count) || num(t, s, "missing") != 0 || s["verify_ok"] != true {
		t.Fatalf("exit %d: %v\nstderr:\n%s", code, s, tail(full.stderr.String()))
	}
	if !strings.Contains(full.stderr.String(), `"transport":"nats"`) {
		t.Fatalf("the subscriber did not log its transport as nats:\n%s", tail(full.stderr.String()))
	}

	lossy.wait(t, 20*time.Second)
	s = lossy.summary(t)
	missing, dropped := num(t, s, "missing"), num(t, s, "injected_dropped_messages")
	t.Logf("lossy nats subscriber: injector dropped %d datagrams holding %d messages; %d received, %d missing in %d lost ranges, %d NATS slow-consumer drops, verify_ok %v",
		num(t, s, "injected_dropped_datagrams"), dropped, num(t, s, "received"), missing, num(t, s, "lost_ranges"),
		num(t, s, "kernel_drops"), s["verify_ok"])
	if num(t, s, "kernel_drops") != 0 {
		t.Fatalf("NATS dropped %d messages for a slow consumer too; the comparison needs a rate this machine sustains", num(t, s, "kernel_drops"))
	}
	if dropped == 0 || missing != dropped {
		t.Fatalf("missing %d, injector dropped %d messages", missing, dropped)
	}
	if num(t, s, "received")+missing != uint64(count) || s["verify_ok"] != true {
		t.Fatalf("received %d + missing %d != %d, or verification failed: %v", num(t, s, "received"), missing, count, s)
	}
}

// TestLiveOverNATSRefusesGroupB: a B line is multicast only, so --group-b
// with --transport nats is a settings error that names the setting.
func TestLiveOverNATSRefusesGroupB(t *testing.T) {
	ga, gb, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub := start(t, ctx, subscriberBin, "--transport", "nats", "--group", ga, "--group-b", gb)
	code := sub.wait(t, 10*time.Second)
	if code != 2 || !strings.Contains(sub.stderr.String(), "group-b") {
		t.Fatalf("exit %d, want 2 with an error naming group-b:\n%s", code, sub.stderr.String())
	}
	bad := start(t, ctx, subscriberBin, "--transport", "carrier-pigeon", "--group", ga)
	if code := bad.wait(t, 10*time.Second); code != 2 || !strings.Contains(bad.stderr.String(), "transport") {
		t.Fatalf("exit %d, want 2 with an error naming transport:\n%s", code, bad.stderr.String())
	}
}
