package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/natstest"
)

// TestArchiveCluster runs the archive on a three-node NATS cluster, as a
// firm that outgrows one machine deploys it: a feed handler records to an
// R3 stream (--nats-url, channel 1 encrypted) with a store of 2,000
// messages. A subscriber whose line goes silent for 500 ms recovers the
// evicted gap from the archive; a subscriber started 40% into the feed
// replays it and joins the live multicast; and the day exported to a file
// from the cluster replays with no NATS. Each gets every message,
// verified, none missing.
func TestArchiveCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a cluster run of about 15 s")
	}
	const count = 300_000 // 6 s at 50,000 msg/s
	n := strconv.Itoa(count)
	cluster := natstest.StartCluster(t, natstest.ClusterOptions{Quiet: true})
	url := cluster.URL()
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	sub := func(args ...string) *proc {
		return launch(t, ctx, subscriberBin, append([]string{"--nats-url", url, "--metrics-addr", "127.0.0.1:0", "--group", ga,
			"--channels", "2", "--verify", "--expect", n}, args...)...)
	}
	silent := sub("--silence-line", "A:1s+500ms")
	silent.waitLog(t, `"subscribed"`, 15*time.Second)
	fh := launch(t, ctx, feedhandlerBin, "--nats-url", url, "--metrics-addr", "127.0.0.1:0", "--archive", "--channels", "2", "--encrypt", "1",
		"--store-messages", "2000", "--count", n, "--rate", "50000", "--group", ga, "--linger", "2s", "--heartbeat", "60s")
	defer fh.cmd.Process.Kill()
	fh.waitLog(t, `"replicas":3`, 15*time.Second)
	time.Sleep(2400 * time.Millisecond) // 40% of the feed
	late := sub("--replay-from", "start", "--replay-to", "live")

	for name, p := range map[string]*proc{"silenced": silent, "late": late} {
		if code := p.wait(t, 90*time.Second); code != 0 {
			t.Fatalf("%s subscriber exit %d: %v\n%s", name, code, p.summary(t), tail(p.stderr.String()))
		}
	}
	s := silent.summary(t)
	t.Logf("silenced: received %v, recovered %v (archive %v), snapshots %v", s["received"], s["recovered"], s["recovered_archive"], s["snapshots"])
	if num(t, s, "received") != count || num(t, s, "missing") != 0 || s["verify_ok"] != true || num(t, s, "snapshots") != 0 ||
		num(t, s, "recovered_archive") < 10_000 {
		t.Fatalf("silenced subscriber: %v; want every message, the silence recovered from the archive", s)
	}
	l := late.summary(t)
	checkMerged(t, l, count, 2)
	if l["verify_ok"] != true {
		t.Fatalf("late subscriber: not verified: %v", l)
	}
	fh.waitLog(t, `session ended; serving recovery`, 30*time.Second)

	file := filepath.Join(t.TempDir(), "day.tca")
	ex := launch(t, ctx, tickarchiveBin, "export", "--nats-url", url, "--from", "start", "--format", "archive", "-o", file)
	if code := ex.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("tickarchive export from the cluster: exit %d\n%s", code, tail(ex.stderr.String()))
	}
	rep := launch(t, ctx, subscriberBin, "--metrics-addr", "127.0.0.1:0", "--nats-url", "nats://127.0.0.1:1", "--channels", "2",
		"--replay-file", file, "--replay-from", "start", "--verify")
	if code := rep.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("replay of the exported file: exit %d\n%s", code, tail(rep.stderr.String()))
	}
	if r := rep.summary(t); num(t, r, "received") != count || num(t, r, "missing") != 0 || r["verify_ok"] != true {
		t.Fatalf("replay of the exported file: %v", r)
	}
}
