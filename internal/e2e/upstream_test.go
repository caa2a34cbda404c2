package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// snippetMessages is the number of ITCH messages in the real snippet.
const snippetMessages = 1000

// realSnippet returns the path of the real ITCH snippet: the shared copy
// beside the project, else the project's own; it skips the test when
// neither is there.
func realSnippet(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"../../../shared/testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50", "../../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50"} {
		if _, err := os.Stat(p); err == nil {
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	t.Skip("the real ITCH snippet (testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50) is not there")
	return ""
}

// downstream runs a subscriber printing every message of channel 0 of ga
// while publish runs, and returns its messages without their send and
// receive timestamps, which differ from run to run.
func downstream(t *testing.T, ctx context.Context, ga string, publish func()) []map[string]any {
	t.Helper()
	sub := start(t, ctx, subscriberBin, "--format", "json", "--recovery=false", "--channels", "1", "--group", ga, "--idle-timeout", "10s")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	publish()
	code := sub.wait(t, 30*time.Second)
	sum := sub.summary(t)
	if code != 0 || sum["exit_reason"] != "end-of-session" || num(t, sum, "missing") != 0 {
		t.Fatalf("subscriber exit %d, summary %v\n%s", code, sum, tail(sub.stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(sub.stdout.String()), "\n")
	msgs := make([]map[string]any, 0, len(lines)-1)
	for _, l := range lines[:len(lines)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		delete(m, "send_ns")
		delete(m, "recv_ns")
		msgs = append(msgs, m)
	}
	return msgs
}

// fileRun is the subscriber's output of the snippet published from the
// file, nothing lost.
func fileRun(t *testing.T, ctx context.Context, snippet string) []map[string]any {
	ga, _, _ := groups(t)
	return downstream(t, ctx, ga, func() {
		fh := start(t, ctx, feedhandlerBin, "--source", "itch:"+snippet, "--rate", "0", "--channels", "1", "--group", ga)
		if code := fh.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
		}
	})
}

// liveRun is what a run of the feed handler on moldreplay's feed showed.
type liveRun struct {
	msgs   []map[string]any // the subscriber's messages, without timestamps
	log    []map[string]any // the feed handler's log lines
	mr     map[string]any   // moldreplay's summary
	unseen []uint64         // upstream sequences neither line carried, watched apart
}

// logged returns the feed handler's log lines with message msg.
func (r *liveRun) logged(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range r.log {
		if l["message"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// left returns the feed handler's last word on the upstream feed.
func (r *liveRun) left(t *testing.T) map[string]any {
	t.Helper()
	l := r.logged("upstream feed left")
	if len(l) != 1 {
		t.Fatalf("feed handler logged %d \"upstream feed left\" lines", len(l))
	}
	return l[0]
}

// liveOpts vary a live run.
type liveOpts struct {
	mr, fh []string // more flags for moldreplay and the feed handler
	// lateAfter starts the feed handler only once line A carried this
	// sequence (0: before moldreplay starts).
	lateAfter uint64
}

// runLive serves the snippet with moldreplay (line A losing 5% of its
// packets, line B silent for its first half second) to a feed handler on
// --source itch-mold: with re-requests, and a subscriber behind it. Two
// watchers of their own record which upstream messages the lines carried.
func runLive(t *testing.T, ctx context.Context, snippet string, o liveOpts) *liveRun {
	t.Helper()
	ga, _, _ := groups(t)
	ua, ub, _ := groups(t)
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rr := c.LocalAddr().String()
	c.Close()
	wa, wb := watchLine(t, ua), watchLine(t, ub)
	r := &liveRun{}
	r.msgs = downstream(t, ctx, ga, func() {
		args := append([]string{"--itch", snippet, "--group", ua, "--group-b", ub, "--rerequest", rr, "--rate", "1000",
			"--loss-a", "0.05", "--silence-b", "0s:500ms", "--linger", "3s"}, o.mr...)
		var mr *proc
		if o.lateAfter > 0 {
			mr = launch(t, ctx, moldreplayBin, args...)
			for deadline := time.Now().Add(20 * time.Second); wa.highest() < o.lateAfter; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("line A did not reach %d", o.lateAfter)
				}
			}
		}
		fh := start(t, ctx, feedhandlerBin, append([]string{"--source", "itch-mold:" + ua + "," + ub, "--rerequest", rr,
			"--channels", "1", "--group", ga}, o.fh...)...)
		fh.waitLog(t, "joined the upstream feed", 10*time.Second)
		if mr == nil {
			mr = launch(t, ctx, moldreplayBin, args...)
		}
		if code := fh.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
		}
		if code := mr.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("moldreplay exit %d\n%s", code, tail(mr.stderr.String()))
		}
		r.mr = mr.summary(t)
		for _, l := range strings.Split(strings.TrimSpace(fh.stderr.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				r.log = append(r.log, m)
			}
		}
	})
	seen := map[uint64]bool{}
	for _, w := range []*lineWatch{wa, wb} {
		w.mu.Lock()
		for _, p := range w.packets {
			for s := p.first; s <= p.last; s++ {
				seen[s] = true
			}
		}
		w.mu.Unlock()
	}
	for s := uint64(1); s <= snippetMessages; s++ {
		if !seen[s] {
			r.unseen = append(r.unseen, s)
		}
	}
	lines := r.mr["lines"].(map[string]any)
	if a, b := lines["a"].(map[string]any), lines["b"].(map[string]any); num(t, a, "dropped_packets") == 0 || num(t, b, "silenced_packets") == 0 {
		t.Fatalf("moldreplay injected no loss: %v", r.mr)
	}
	return r
}

// TestLiveUpstreamRecovered: what the exchange's lines lose is recovered by
// re-requests, and the subscriber's output equals that of the loss-free
// file run, message for message.
func TestLiveUpstreamRecovered(t *testing.T) {
	r := wantRecovered(t, liveOpts{})
	if len(r.unseen) == 0 {
		t.Fatalf("both lines carried every message: nothing to recover (moldreplay %v)", r.mr)
	}
	if recovered := num(t, r.left(t), "recovered"); recovered < uint64(len(r.unseen)) {
		t.Fatalf("recovered %d, but neither line carried %d", recovered, len(r.unseen))
	}
}

// TestLiveUpstreamLateStart: a feed handler that joins after 300 messages
// asks for everything from sequence 1, in requests of --rerequest-max, then
// goes live: its output equals the file run's.
func TestLiveUpstreamLateStart(t *testing.T) {
	r := wantRecovered(t, liveOpts{lateAfter: 300, fh: []string{"--rerequest-max", "50"}})
	if recovered := num(t, r.left(t), "recovered"); recovered < 300 {
		t.Fatalf("recovered %d messages, joined after 300", recovered)
	}
}

// wantRecovered runs the snippet live with o and checks that nothing was
// lost upstream and that the subscriber saw what it sees from the file.
func wantRecovered(t *testing.T, o liveOpts) *liveRun {
	t.Helper()
	snippet := realSnippet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := fileRun(t, ctx, snippet)
	r := runLive(t, ctx, snippet, o)
	if left := r.left(t); num(t, left, "lost") != 0 || num(t, left, "messages") != snippetMessages {
		t.Fatalf("upstream: %v", left)
	}
	sameMessages(t, r.msgs, want)
	return r
}

// TestLiveUpstreamStartFrom: --start-from skips the replay: the messages
// before it are lost (reason skipped), logged and counted, and none of
// them reaches the subscriber.
func TestLiveUpstreamStartFrom(t *testing.T) {
	snippet := realSnippet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := fileRun(t, ctx, snippet)
	r := runLive(t, ctx, snippet, liveOpts{lateAfter: 300, fh: []string{"--start-from", "501"}})
	left := r.left(t)
	lost := r.logged("upstream lost")
	if num(t, left, "lost") != 500 || num(t, left, "lost_skipped") != 500 || len(lost) != 1 || lost[0]["range"] != "1..500" {
		t.Fatalf("upstream: %v; lost %v", left, lost)
	}
	if num(t, left, "messages") != snippetMessages-500 || len(r.msgs) == 0 || len(r.msgs) >= len(want) {
		t.Fatalf("upstream %v; %d messages downstream, %d from the whole file", left, len(r.msgs), len(want))
	}
}

// sameMessages fails unless got equals want message for message.
func sameMessages(t *testing.T, got, want []map[string]any) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("message %d: got %v, want %v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
}

// TestLiveUpstreamLossFlagged: with the re-request server answering none,
// exactly the messages neither line carried are lost, logged and counted
// as such, and flagged downstream: after each loss every instrument defined
// so far gets a status flagged book-incomplete.
func TestLiveUpstreamLossFlagged(t *testing.T) {
	snippet := realSnippet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runLive(t, ctx, snippet, liveOpts{mr: []string{"--rerequest-off"}})
	wantLost(t, r, "refused")
	if rq := r.mr["rerequest"].(map[string]any); num(t, rq, "unanswered") == 0 {
		t.Errorf("moldreplay was asked nothing: %v", rq)
	}
}

// TestLiveUpstreamGarbageAnswers: a re-request server answering garbage is
// counted and logged, and costs exactly the messages it did not recover.
func TestLiveUpstreamGarbageAnswers(t *testing.T) {
	snippet := realSnippet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runLive(t, ctx, snippet, liveOpts{mr: []string{"--rerequest-garbage"}})
	wantLost(t, r, "refused")
	garbage := num(t, r.mr["rerequest"].(map[string]any), "garbage")
	if bad := num(t, r.left(t), "rerequest_bad_answers"); garbage == 0 || bad != garbage {
		t.Errorf("moldreplay sent %d garbage answers, the feed handler counted %d", garbage, bad)
	}
	dropped := r.logged("upstream datagram dropped")
	if len(dropped) == 0 || !strings.Contains(fmt.Sprint(dropped[0]["error"]), "re-request answer from") {
		t.Errorf("garbage answers not logged with their source: %v", dropped)
	}
}

// wantLost checks that the feed handler lost exactly r.unseen, for reason,
// said so in its log and counters, and flagged it downstream.
func wantLost(t *testing.T, r *liveRun, reason string) {
	t.Helper()
	if len(r.unseen) == 0 {
		t.Fatalf("both lines carried every message: nothing lost to show (moldreplay %v)", r.mr)
	}
	var lost []uint64
	for _, l := range r.logged("upstream lost") {
		if l["reason"] != reason {
			t.Errorf("loss for reason %v, want %s: %v", l["reason"], reason, l)
		}
		var from, to uint64
		if _, err := fmt.Sscanf(fmt.Sprint(l["range"]), "%d..%d", &from, &to); err != nil {
			t.Fatalf("range of %v: %v", l, err)
		}
		for s := from; s <= to; s++ {
			lost = append(lost, s)
		}
	}
	slices.Sort(lost)
	if !slices.Equal(lost, r.unseen) {
		t.Fatalf("logged lost %v, but neither line carried %v", lost, r.unseen)
	}
	left := r.left(t)
	if n := uint64(len(r.unseen)); num(t, left, "lost") != n || num(t, left, "lost_"+reason) != n {
		t.Errorf("upstream counters %v, want %d lost", left, n)
	}
	// Downstream: each loss is a run of statuses flagged book-incomplete,
	// one per instrument defined before it, in instrument order (two losses
	// in a row make two runs).
	defined := map[float64]bool{}
	runs := 0
	for i := 0; i < len(r.msgs); {
		m := r.msgs[i]
		if m["type"] == "definition" {
			defined[m["instrument"].(float64)] = true
		}
		if !lossStatus(m) {
			i++
			continue
		}
		runs++
		flagged := map[float64]bool{}
		for prev := -1.0; i < len(r.msgs) && lossStatus(r.msgs[i]) && r.msgs[i]["instrument"].(float64) > prev; i++ {
			prev = r.msgs[i]["instrument"].(float64)
			flagged[prev] = true
		}
		if !maps.Equal(flagged, defined) {
			t.Errorf("loss %d flagged %d instruments, %d were defined", runs, len(flagged), len(defined))
		}
	}
	ranges := len(r.logged("upstream lost"))
	if runs > ranges {
		t.Errorf("%d losses flagged downstream, %d lost ranges", runs, ranges)
	}
	t.Logf("lost %d messages in %d ranges; %d losses flagged downstream", len(r.unseen), ranges, runs)
	if runs == 0 {
		t.Errorf("no loss flagged downstream; lost %v", r.unseen)
	}
}

// lossStatus reports whether m is a status flagged book-incomplete: how a
// loss upstream shows (docs/wire-format.md).
func lossStatus(m map[string]any) bool {
	return m["type"] == "status" && strings.Contains(m["flags"].(string), "book_incomplete")
}
