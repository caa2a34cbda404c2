package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestArchiveReplay: a feed handler with --archive (the embedded server's
// JetStream, channel 1 encrypted) records every packet it sends while a
// live subscriber receives them; a subscriber started afterwards with
// --replay-from start receives every message from the archive, opened
// with its key records, verified against the synthetic feed, with nothing
// missing; a replay from one session's message starts there; a replay
// from after the archive's end, and a bad position, are refused with what
// was wrong.
func TestArchiveReplay(t *testing.T) {
	const count = 100_000
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := strconv.Itoa(count)
	dir := t.TempDir()
	live := start(t, ctx, subscriberBin, "--group", ga, "--verify", "--expect", n)
	live.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--archive", "--archive-dir", dir, "--encrypt", "1", "--count", n, "--rate", "100000",
		"--group", ga, "--linger", "60s")
	fh.waitLog(t, `"archiving every packet sent"`, 10*time.Second)
	if code := live.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("live subscriber exit %d: %v", code, live.summary(t))
	}
	fh.waitLog(t, `session ended; serving recovery`, 30*time.Second)
	session := regexp.MustCompile(`"channel":0,"session":"([0-9A-Z]+)"`).FindStringSubmatch(fh.stderr.String())
	if session == nil {
		t.Fatalf("no session of channel 0 in the feed handler's log:\n%s", tail(fh.stderr.String()))
	}

	rep := start(t, ctx, subscriberBin, "--replay-from", "start", "--verify")
	if code := rep.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("replay exit %d\nstderr:\n%s", code, tail(rep.stderr.String()))
	}
	sum := rep.summary(t)
	replay, _ := sum["replay"].(map[string]any)
	if sum["received"] != float64(count) || sum["missing"] != float64(0) || sum["verify_ok"] != true || sum["exit_reason"] != "replay-end" ||
		replay == nil || replay["unverified"] != float64(0) || replay["errors"] != float64(0) {
		t.Fatalf("replay summary: received %v missing %v verify_ok %v exit %v replay %v; want %d received, none missing, verified, replay-end",
			sum["received"], sum["missing"], sum["verify_ok"], sum["exit_reason"], replay, count)
	}

	from := session[1] + ":5000"
	mid := start(t, ctx, subscriberBin, "--replay-from", from, "--join-channels", "0", "--format", "json")
	if code := mid.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("replay from %s exit %d: %v\nstderr:\n%s", from, code, mid.summary(t), tail(mid.stderr.String()))
	}
	first := regexp.MustCompile(`"seq":(\d+)`).FindStringSubmatch(mid.stdout.String())
	if first == nil {
		t.Fatalf("replay from %s printed no message:\n%s", from, tail(mid.stdout.String()))
	}
	if s, _ := strconv.Atoi(first[1]); s > 5000 || s < 5000-400 {
		t.Errorf("replay from %s: first message %d, want the packet holding 5000", from, s)
	}

	late := start(t, ctx, subscriberBin, "--replay-from", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if code := late.wait(t, 30*time.Second); code == 0 || !strings.Contains(late.stderr.String(), "holds records of") {
		t.Errorf("replay from an hour ahead: exit %d, stderr:\n%s\nwant a failure saying what the archive holds", code, tail(late.stderr.String()))
	}
	bad := start(t, ctx, subscriberBin, "--replay-from", "yesterday")
	if code := bad.wait(t, 10*time.Second); code != 2 || !strings.Contains(bad.stderr.String(), "--replay-from") {
		t.Errorf("--replay-from yesterday: exit %d, stderr:\n%s\nwant 2, naming the flag", code, tail(bad.stderr.String()))
	}
	fh.cmd.Process.Kill()
}

// TestArchiveEntitlement: on the embedded server with users, a subscriber
// entitled to channel 0 only replays channel 0's archive, and a replay of
// channel 1 is refused, saying that the server refused the user.
func TestArchiveEntitlement(t *testing.T) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fh := start(t, ctx, feedhandlerBin, "--archive", "--archive-dir", t.TempDir(), "--count", "20000", "--rate", "0", "--group", ga,
		"--linger", "60s", "--nats-users", "fh:fhpw:feedhandler,alice:apw:subscriber:0", "--nats-user", "fh", "--nats-password", "fhpw")
	fh.waitLog(t, `session ended; serving recovery`, 30*time.Second)
	defer fh.cmd.Process.Kill()
	ok := start(t, ctx, subscriberBin, "--nats-user", "alice", "--nats-password", "apw", "--replay-from", "start", "--join-channels", "0")
	if code := ok.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("alice's replay of channel 0: exit %d\n%s", code, tail(ok.stderr.String()))
	}
	if sum := ok.summary(t); sum["received"].(float64) < 1 || sum["missing"] != float64(0) {
		t.Fatalf("alice's replay of channel 0: %v", sum)
	}
	no := start(t, ctx, subscriberBin, "--nats-user", "alice", "--nats-password", "apw", "--replay-from", "start", "--join-channels", "1")
	if code := no.wait(t, 30*time.Second); code == 0 || !strings.Contains(no.stderr.String(), "is it entitled to the channel") {
		t.Fatalf("alice's replay of channel 1: exit %d, want a refusal saying why\n%s", code, tail(no.stderr.String()))
	}
}

// TestArchiveFeedHandlerKilled: a feed handler archiving at 50,000 msg/s
// is killed (SIGKILL) in the middle of its session. A feed handler started
// later on the same archive directory serves the archive: it holds the
// killed session's messages from 1 without a hole, up to within the
// records not yet stored at the kill (at most the record delay and the
// records awaiting acknowledgement), as a live subscriber counted them.
func TestArchiveFeedHandlerKilled(t *testing.T) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	live := start(t, ctx, subscriberBin, "--group", ga, "--channels", "1", "--idle-timeout", "2s")
	live.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--archive", "--archive-dir", dir, "--channels", "1", "--count", "0", "--rate", "50000", "--group", ga)
	fh.waitLog(t, `"publishing"`, 10*time.Second)
	time.Sleep(2 * time.Second)
	fh.cmd.Process.Kill()
	fh.wait(t, 10*time.Second)
	live.wait(t, 30*time.Second)
	got := live.summary(t)["received"].(float64)
	if got < 50_000 {
		t.Fatalf("the live subscriber received %v messages before the kill", got)
	}

	srv := start(t, ctx, feedhandlerBin, "--archive", "--archive-dir", dir, "--channels", "1", "--count", "1", "--rate", "0",
		"--group", ga, "--linger", "60s")
	srv.waitLog(t, `session ended; serving recovery`, 30*time.Second)
	defer srv.cmd.Process.Kill()
	rep := start(t, ctx, subscriberBin, "--replay-from", "start", "--channels", "1")
	rep.wait(t, 60*time.Second)
	sum := rep.summary(t)
	replayed := sum["received"].(float64) - 1 // the serving feed handler's one message
	t.Logf("live subscriber %v messages, archive %v", got, replayed)
	if sum["missing"] != float64(0) || replayed < got-10_000 {
		t.Fatalf("replay of the killed session: %v received (live %v), missing %v; want no hole and at most 200 ms short", replayed, got, sum["missing"])
	}
}
