package e2e

import (
	"context"
	"testing"
	"time"
)

// TestArchiveRecovery: a subscriber's line goes silent for half a second,
// far longer than the feed handler's store of 2,000 messages holds. The
// gap, evicted from the store, is answered from the archive (channel 0
// encrypted: the archive's packets are opened and the answer sealed
// again), not by a snapshot: every message arrives, verified, and the
// summaries count them as recovered from the archive.
func TestArchiveRecovery(t *testing.T) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sub := start(t, ctx, subscriberBin, "--group", ga, "--channels", "1", "--silence-line", "A:1s+500ms", "--verify", "--expect", "200000")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--archive", "--archive-dir", t.TempDir(), "--channels", "1", "--encrypt", "0",
		"--store-messages", "2000", "--count", "200000", "--rate", "50000", "--group", ga, "--linger", "3s")
	if code := sub.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("subscriber exit %d: %v\n%s", code, sub.summary(t), tail(sub.stderr.String()))
	}
	fh.wait(t, 30*time.Second)
	s, f := sub.summary(t), fh.summary(t)
	t.Logf("subscriber: silenced %v, recovered %v (archive %v), snapshots %v; feed handler: %v from the archive in %v answers, %v misses",
		s["silenced_messages"], s["recovered"], s["recovered_archive"], s["snapshots"], f["retransmitted_archive"], f["retransmit_archive_answers"], f["retransmit_archive_misses"])
	if s["missing"] != float64(0) || s["verify_ok"] != true || s["snapshots"] != float64(0) ||
		s["recovered_archive"].(float64) < 20_000 || s["recovered_archive"].(float64) > s["recovered"].(float64) {
		t.Fatalf("subscriber: missing %v, verified %v, snapshots %v, recovered %v of which from the archive %v; want the silence (~25,000 messages) recovered from the archive",
			s["missing"], s["verify_ok"], s["snapshots"], s["recovered"], s["recovered_archive"])
	}
	if f["retransmitted_archive"].(float64) < 20_000 {
		t.Fatalf("feed handler: %v messages retransmitted from the archive", f["retransmitted_archive"])
	}
}
