package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func num(t *testing.T, m map[string]any, k string) uint64 {
	t.Helper()
	v, ok := m[k].(float64)
	if !ok {
		t.Fatalf("summary has no number %q: %v", k, m)
	}
	return uint64(v)
}

// TestTwoSubscribersVerify is the acceptance run: two verifying
// subscribers (in each receive mode) receive every message of a 500k msg/s feed
// in order (2,000,000 messages; 200,000 with -short).
func TestTwoSubscribersVerify(t *testing.T) { eachMode(t, testTwoSubscribersVerify) }

func testTwoSubscribersVerify(t *testing.T, mode string) {
	count := 2_000_000
	if testing.Short() {
		count = 200_000
	}
	ga, gb, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := strconv.Itoa(count)
	subs := []*proc{
		start(t, ctx, subscriberBin, "--mode", mode, "--verify", "--expect", n, "--group", ga),
		start(t, ctx, subscriberBin, "--mode", mode, "--verify", "--expect", n, "--group", ga, "--group-b", gb),
	}
	for _, s := range subs {
		s.waitLog(t, `"subscribed"`, 10*time.Second) // joined before the first packet
	}
	fh := start(t, ctx, feedhandlerBin, "--count", n, "--rate", "500000", "--group", ga, "--group-b", gb)
	if code := fh.wait(t, 45*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	fs := fh.summary(t)
	t.Logf("feedhandler: %.0f msg/s, %d packets, %.1f msgs/packet", fs["msgs_per_s"], num(t, fs, "packets"), fs["msgs_per_packet"])
	for i, s := range subs {
		code := s.wait(t, 15*time.Second)
		sum := s.summary(t)
		t.Logf("subscriber %d: received %d, missing %d, kernel drops %d, mallocs/msg %v, verify_ok %v",
			i, num(t, sum, "received"), num(t, sum, "missing"), num(t, sum, "kernel_drops"), sum["mallocs_per_msg"], sum["verify_ok"])
		if code != 0 || num(t, sum, "received") != uint64(count) || sum["verify_ok"] != true || num(t, sum, "missing") != 0 {
			t.Fatalf("subscriber %d: exit %d, summary %v\n%s", i, code, sum, tail(s.stderr.String()))
		}
		// One allocation per packet would show as about 0.06 per message
		// here (16 messages per packet), one per message as 1. What a
		// run allocates once, or per gap or recovery answer (events on a
		// loaded machine, where the A and B lines drift apart), stays far
		// below 0.01. The hot paths' own zero is pinned by testenv.NoAllocs
		// tests (TestPublishPollAllocs).
		if sum["mallocs_per_msg"].(float64) > 0.01 {
			t.Fatalf("subscriber %d allocates %v per message", i, sum["mallocs_per_msg"])
		}
	}
}

// TestKernelDropsAreGaps makes the kernel drop datagrams and checks that
// every drop shows up as a gap, in each receive mode. The subscriber has a
// tiny receive buffer and recovery disabled, and is stopped (SIGSTOP) while
// the feed handler sends its whole burst as fast as it can: each of its
// sockets' buffers holds a few dozen datagrams and the kernel drops the
// rest. It is
// resumed while the feed handler lingers, repeating each end of session.
// Then datagrams received plus datagrams the kernel reports dropped equal
// the datagrams sent (up to the repeated ends of session), messages
// received plus messages in gaps equal the messages sent, and the summary
// reports the loss.
func TestKernelDropsAreGaps(t *testing.T) { eachMode(t, testKernelDropsAreGaps) }

func testKernelDropsAreGaps(t *testing.T, mode string) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const count = 100_000
	sub := start(t, ctx, subscriberBin, "--mode", mode, "--rcvbuf", "32768", "--idle-timeout", "5s", "--group", ga, "--recovery=false")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	if err := sub.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := sub.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	// The feed handler lingers, repeating each end of session every
	// heartbeat (100 ms), so that the subscriber, whose socket buffers were
	// full when the session ended, still learns where each session ended:
	// then every message is either received or reported missing, exactly.
	// The repeats make the datagram count a range: the subscriber stops at
	// the first end of session it sees on every channel, and what was sent
	// after that reaches no socket of its.
	const linger, repeatsMax = "1s", 4 * (10 + 1)
	fh := start(t, ctx, feedhandlerBin, "--count", strconv.Itoa(count), "--rate", "0", "--group", ga, "--linger", linger)
	fh.waitLog(t, "session ended", 30*time.Second)
	resume()
	if code := fh.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	sub.wait(t, 20*time.Second)
	fs, ss := fh.summary(t), sub.summary(t)
	sent := num(t, fs, "packets") + num(t, fs, "heartbeats") + 4 // + the first end of session per channel
	// kernel_drops is the kernel's count at exit (/proc/net/udp): it
	// includes drops after the last datagram received.
	got, drops := num(t, ss, "packets"), num(t, ss, "kernel_drops")
	received, missing := num(t, ss, "received"), num(t, ss, "missing")
	t.Logf("sent %d datagrams before the repeated ends of session (%.0f msg/s); received %d, kernel dropped %d; %d messages received, %d missing in %d gaps; exit reason %v",
		sent, fs["msgs_per_s"], got, drops, received, missing, num(t, ss, "gaps"), ss["exit_reason"])
	if drops == 0 {
		t.Fatalf("the kernel dropped nothing although the subscriber was stopped for the whole burst of %d datagrams: summary %v", sent, ss)
	}
	if got+drops < sent || got+drops > sent+repeatsMax {
		t.Fatalf("received %d + dropped %d, want %d to %d (sent, plus at most %d repeated ends of session): a datagram went unaccounted",
			got, drops, sent, sent+repeatsMax, repeatsMax)
	}
	if received+missing != count {
		t.Fatalf("received %d + missing %d != published %d: a message was lost silently", received, missing, count)
	}
	if missing == 0 || num(t, ss, "gaps") == 0 {
		t.Fatalf("kernel drops %d but missing %d in %d gaps", drops, missing, num(t, ss, "gaps"))
	}
	if ss["ok"] != false {
		t.Fatalf("summary with missing messages says ok")
	}
}

// TestSubscriberIdleTimeout: with no feed, the subscriber exits by itself.
func TestSubscriberIdleTimeout(t *testing.T) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start0 := time.Now()
	sub := start(t, ctx, subscriberBin, "--idle-timeout", "500ms", "--group", ga)
	code := sub.wait(t, 10*time.Second)
	sum := sub.summary(t)
	if code != 1 || sum["exit_reason"] != "idle-timeout" || num(t, sum, "received") != 0 {
		t.Fatalf("exit %d, summary %v", code, sum)
	}
	if time.Since(start0) < 500*time.Millisecond {
		t.Fatalf("exited before the idle timeout")
	}
}

// TestSubscriberJSONOutputAndSymbolJoin: --format json prints one parseable
// line per message, and --symbols joins only the channel of that symbol and
// prints only that symbol's messages: exactly those the synthetic feed's
// definition puts on it, the rest of the channel counted as filtered.
func TestSubscriberJSONOutputAndSymbolJoin(t *testing.T) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const count = 4000
	// Seed 1's first instrument is "AAAB" (see feed.Synthetic); which channel
	// it lands on is the subscriber's business.
	sub := start(t, ctx, subscriberBin, "--format", "json", "--symbols", "AAAB", "--group", ga, "--verify", "--idle-timeout", "3s")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--count", strconv.Itoa(count), "--rate", "50000", "--group", ga)
	if code := fh.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	code := sub.wait(t, 20*time.Second)
	lines := strings.Split(strings.TrimSpace(sub.stdout.String()), "\n")
	sum := sub.summary(t)
	chans := sum["channels"].([]any)
	if code != 0 || len(chans) != 1 || sum["exit_reason"] != "end-of-session" {
		t.Fatalf("exit %d, summary %v", code, sum)
	}
	ch := int(chans[0].(float64))
	want := symbolSeqs(t, synthetic(t, count), []string{"AAAB"})
	if ch != want.channels[0] || len(want.channels) != 1 {
		t.Fatalf("joined channel %d, want the channel of AAAB: %v", ch, want.channels)
	}
	var got []uint64
	for _, l := range lines[:len(lines)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if m["channel"] != float64(ch) {
			t.Fatalf("line %q: want channel %d", l, ch)
		}
		got = append(got, uint64(m["seq"].(float64)))
	}
	if !slices.Equal(got, want.seqs[ch]) {
		t.Fatalf("printed the messages of sequences %v, want those of AAAB: %v", got, want.seqs[ch])
	}
	if num(t, sum, "received") != want.wanted || num(t, sum, "filtered") != want.others || num(t, sum, "missing") != 0 {
		t.Fatalf("received %d, filtered %d, missing %d; want %d, %d, 0",
			num(t, sum, "received"), num(t, sum, "filtered"), num(t, sum, "missing"), want.wanted, want.others)
	}
}
