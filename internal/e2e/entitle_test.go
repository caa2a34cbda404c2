package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tickcast/tickcast"
)

// TestEntitlements: a users file gives alice channels 0 and 1 and bob
// channels 2 and 3 of a 4-channel feed. Alice receives her channels,
// verified; bob, joining channel 0 by number or by a symbol it carries,
// fails at start with an error naming him and the channel. The feed
// handler's key audit holds every reply, and its usage report gives one
// line per day, user and channel. Then alice's entitlement to channel 1 is
// withdrawn (the file edited, SIGHUP): from the next rotation on she is
// refused channel 1's keys, and her subscriber says so.
func TestEntitlements(t *testing.T) {
	const count = 750_000 // 15 s at 50,000 msg/s
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	audit := filepath.Join(dir, "audit.jsonl")
	write := func(alice string) {
		body := "# the feed's users\nfh:fhpw:feedhandler\nalice:apw:subscriber:" + alice + "\nbob:bpw:subscriber:2-3\n"
		if err := os.WriteFile(users, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("0-1")
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fh := start(t, ctx, feedhandlerBin, "--nats-users", "@"+users, "--nats-user", "fh", "--nats-password", "fhpw",
		"--key-audit", audit, "--key-rotation", "2s", "--count", strconv.Itoa(count), "--rate", "50000", "--group", ga, "--linger", "1s")
	fh.waitLog(t, `"embedded NATS server listening"`, 10*time.Second)

	alice := start(t, ctx, subscriberBin, "--nats-user", "alice", "--nats-password", "apw", "--group", ga,
		"--join-channels", "0,1", "--verify", "--idle-timeout", "3s")
	alice.waitLog(t, `"subscribed"`, 10*time.Second)

	bob := start(t, ctx, subscriberBin, "--nats-user", "bob", "--nats-password", "bpw", "--group", ga, "--join-channels", "0,2")
	if code := bob.wait(t, 10*time.Second); code == 0 {
		t.Errorf("bob joining channel 0: exit 0")
	}
	if err := bob.stderr.String(); !strings.Contains(err, "user bob is not entitled to channel 0 (its channels: 2-3)") {
		t.Errorf("bob's error does not name him and channel 0:\n%s", tail(err))
	}
	sym := ""
	for c := 'A'; c <= 'Z' && sym == ""; c++ {
		if ch, _ := tickcast.ChannelsOf([]string{"AAA" + string(c)}, 4); ch[0] == 0 {
			sym = "AAA" + string(c)
		}
	}
	bobSym := start(t, ctx, subscriberBin, "--nats-user", "bob", "--nats-password", "bpw", "--group", ga, "--symbols", sym)
	if code := bobSym.wait(t, 10*time.Second); code == 0 {
		t.Errorf("bob asking for %s: exit 0", sym)
	}
	if err := bobSym.stderr.String(); !strings.Contains(err, "user bob is not entitled to channel 0") || !strings.Contains(err, "--symbols are on channels [0]") {
		t.Errorf("bob's error for --symbols %s does not name him, the channel and the symbols' channels:\n%s", sym, tail(err))
	}

	// A bad file is refused, and the users stay as they were.
	write("9-1")
	if err := fh.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	fh.waitLog(t, `SIGHUP: users not reloaded`, 5*time.Second)
	if e := fh.stderr.String(); !strings.Contains(e, `range \"9-1\" ends before it starts`) {
		t.Errorf("the reload's error does not say what is wrong:\n%s", tail(e))
	}

	// Withdraw channel 1 from alice.
	time.Sleep(2 * time.Second)
	write("0")
	if err := fh.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	fh.waitLog(t, `SIGHUP: users reloaded`, 5*time.Second)
	alice.waitLog(t, `keys refused`, 10*time.Second)

	if code := fh.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	aliceCode := alice.wait(t, 20*time.Second)
	as := alice.summary(t)
	t.Logf("alice: exit %d, received %d, missing %d, unauthenticated %d, no_key %d, keys_refused %v, verify_ok %v, ok %v", aliceCode,
		num(t, as, "received"), num(t, as, "missing"), num(t, as, "unauthenticated"), num(t, as, "no_key"), as["keys_refused"], as["verify_ok"], as["ok"])
	if num(t, as, "received") == 0 || as["verify_ok"] != true {
		t.Errorf("alice: %v\n%s", as, tail(alice.stderr.String()))
	}
	// Channel 1's packets stopped opening at a rotation after the reload:
	// they count as unauthenticated, the summary names the channel, and
	// the run is not ok.
	if num(t, as, "unauthenticated") == 0 || fmt.Sprint(as["keys_refused"]) != "[1]" || as["ok"] != false || aliceCode != 1 {
		t.Errorf("alice, after her entitlement to channel 1 was withdrawn: exit %d, %v", aliceCode, as)
	}

	out, err := exec.CommandContext(ctx, feedhandlerBin, "--usage-report", audit).Output()
	if err != nil {
		t.Fatalf("--usage-report: %v", err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil {
		t.Fatalf("usage report %q: %v", out, err)
	}
	t.Logf("usage report:\n%s", out)
	if strings.Join(rows[0], ",") != "day,user,channel,first_key,last_key,keys,sessions,replies,refused" {
		t.Errorf("header %v", rows[0])
	}
	got := map[string][]string{}
	for _, r := range rows[1:] {
		got[r[1]+"/"+r[2]] = r
	}
	for _, k := range []string{"alice/0", "alice/1", "bob/0"} {
		if got[k] == nil {
			t.Errorf("no line for %s", k)
		}
	}
	if r := got["alice/0"]; r != nil && (atoi(t, r[5]) < 3 || r[7] == "0" || r[8] != "0") {
		t.Errorf("alice's channel 0: %v: want several keys (2 s rotations over the run), replies, no refusal", r)
	}
	if r := got["alice/1"]; r != nil && (r[8] == "0" || atoi(t, r[5]) < 2) {
		t.Errorf("alice's channel 1: %v: want keys before the withdrawal and refusals after", r)
	}
	if r := got["bob/0"]; r != nil && (r[5] != "0" || r[8] == "0") {
		t.Errorf("bob's channel 0: %v: want no key and refusals", r)
	}
	if len(got) != 3 && !(len(got) == 4 && got["bob/2"] != nil) {
		t.Errorf("report lines %v: want alice/0, alice/1, bob/0 (and bob/2, asked for at once with 0)", got)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestKeyRotationUnderLoss: keys rotating every second through a
// 1,000,000-message verified run at 200,000 msg/s (five rotations and
// more), with 5% of the datagrams dropped on purpose and recovered. Every
// message is delivered and verified, none is missing, and no packet fails
// to open: each next key was held before its epoch, and a packet sealed
// just before a rotation still opened after it.
func TestKeyRotationUnderLoss(t *testing.T) {
	const count = 1_000_000
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n := strconv.Itoa(count)
	sub := start(t, ctx, subscriberBin, "--group", ga, "--inject-loss", "0.05", "--inject-seed", "7", "--verify", "--expect", n, "--idle-timeout", "5s")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--key-rotation", "1s", "--count", n, "--rate", "200000", "--group", ga, "--linger", "3s")
	if code := fh.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	code := sub.wait(t, 30*time.Second)
	s := sub.summary(t)
	t.Logf("subscriber: exit %d in %.1fs, received %d, missing %d, recovered %d (injected drops %d messages), unauthenticated %d, no_key %d, verify_ok %v",
		code, s["elapsed_s"], num(t, s, "received"), num(t, s, "missing"), num(t, s, "recovered"), num(t, s, "injected_dropped_messages"),
		num(t, s, "unauthenticated"), num(t, s, "no_key"), s["verify_ok"])
	if code != 0 || num(t, s, "received") != count || num(t, s, "missing") != 0 || s["verify_ok"] != true {
		t.Errorf("exit %d: %v\n%s", code, s, tail(sub.stderr.String()))
	}
	if inj, rec := num(t, s, "injected_dropped_messages"), num(t, s, "recovered"); inj < count/40 || rec < inj {
		t.Errorf("recovered %d messages of %d dropped on purpose", rec, inj)
	}
	if u, k := num(t, s, "unauthenticated"), num(t, s, "no_key"); u != 0 || k != 0 {
		t.Errorf("packets that did not open across the rotations: unauthenticated %d, no_key %d", u, k)
	}
}
