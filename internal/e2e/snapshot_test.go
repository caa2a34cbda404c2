package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLateJoinFromSnapshot: a subscriber that joins a running feed loads
// each channel's snapshot instead of replaying the session, then receives
// every later message in order, verified; with the snapshot sequences, the
// messages it received account for the whole feed and nothing is missing.
func TestLateJoinFromSnapshot(t *testing.T) { eachMode(t, testLateJoinFromSnapshot) }

func testLateJoinFromSnapshot(t *testing.T, mode string) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const count = 600_000
	fh := start(t, ctx, feedhandlerBin, "--count", "600000", "--rate", "100000", "--group", ga, "--linger", "1s")
	fh.waitLog(t, `"publishing"`, 10*time.Second)
	time.Sleep(2 * time.Second) // about 200,000 messages in: 50,000 per channel
	// One subscriber whose window holds the missing prefix (the prefix is a
	// gap, answered by the snapshot), one whose window does not (a late join:
	// live messages wait for the snapshot).
	subs := map[string]*proc{
		"window 131072": start(t, ctx, subscriberBin, "--mode", mode, "--verify", "--group", ga),
		"window 4096":   start(t, ctx, subscriberBin, "--mode", mode, "--verify", "--group", ga, "--window", "4096"),
	}
	if code := fh.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	for name, sub := range subs {
		code := sub.wait(t, 20*time.Second)
		s := sub.summary(t)
		// The snapshot sequence of each channel, from the subscriber's log.
		var snapSeqs uint64
		sc := bufio.NewScanner(strings.NewReader(sub.stderr.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["message"] == "snapshot loaded; stream resumes after it" {
				snapSeqs += uint64(m["snapshot_seq"].(float64))
			}
		}
		t.Logf("%s: %d snapshots (%d state messages) reflecting %d messages, then %d received; missing %d, instrument gaps %d",
			name, num(t, s, "snapshots"), num(t, s, "snapshot_messages"), snapSeqs, num(t, s, "received"), num(t, s, "missing"), num(t, s, "instrument_gaps"))
		if code != 0 || s["verify_ok"] != true || num(t, s, "missing") != 0 || num(t, s, "snapshots") != 4 {
			t.Fatalf("%s: exit %d: %v", name, code, s)
		}
		if snapSeqs+num(t, s, "received") != count {
			t.Fatalf("%s: snapshots reflect %d messages and %d were received after them: %d, want %d", name, snapSeqs, num(t, s, "received"), snapSeqs+num(t, s, "received"), count)
		}
		if num(t, s, "instrument_gaps") != 0 || num(t, s, "snapshot_messages") == 0 {
			t.Fatalf("%s: per-instrument sequences did not continue from the snapshot: %v", name, s)
		}
	}
}

// TestGracefulStopRecoversLostTail: the subscriber loses everything after
// the first 800 ms of a run (the last packets, every end of session and every
// repeat of it). It notices the silence, asks recovery for what follows, and
// gets the tail and the end of the session while the feed handler lingers.
func TestGracefulStopRecoversLostTail(t *testing.T) { eachMode(t, testGracefulStopRecoversLostTail) }

func testGracefulStopRecoversLostTail(t *testing.T, mode string) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const count = 150_000
	sub := start(t, ctx, subscriberBin, "--mode", mode, "--verify", "--group", ga, "--silence-line", "A:800ms")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--count", "150000", "--rate", "100000", "--group", ga, "--linger", "5s")
	code := sub.wait(t, 30*time.Second)
	s := sub.summary(t)
	t.Logf("subscriber: received %d, silenced %d datagrams (%d messages), recovered %d, missing %d, exit reason %v",
		num(t, s, "received"), num(t, s, "silenced_datagrams"), num(t, s, "silenced_messages"), num(t, s, "recovered"), num(t, s, "missing"), s["exit_reason"])
	if code != 0 || num(t, s, "received") != count || num(t, s, "missing") != 0 || s["verify_ok"] != true {
		t.Fatalf("exit %d: %v", code, s)
	}
	if num(t, s, "silenced_messages") == 0 || num(t, s, "recovered") < num(t, s, "silenced_messages") || s["exit_reason"] != "end-of-session" {
		t.Fatalf("the tail was not lost and recovered as the test means: %v", s)
	}
	if code := fh.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
}
