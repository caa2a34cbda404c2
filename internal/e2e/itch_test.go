package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestITCHSnippetReachesSubscriber publishes the real ITCH snippet as fast
// as possible; a subscriber on every channel sees its provisional
// definitions, quotes and trades, each instrument's definition first.
func TestITCHSnippetReachesSubscriber(t *testing.T) {
	snippet, err := filepath.Abs("../../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50")
	if err != nil {
		t.Fatal(err)
	}
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := start(t, ctx, subscriberBin, "--format", "json", "--recovery=false", "--channels", "4", "--group", ga, "--idle-timeout", "3s")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := start(t, ctx, feedhandlerBin, "--source", "itch:"+snippet, "--rate", "0", "--channels", "4", "--group", ga)
	if code := fh.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	fs := fh.summary(t)
	code := sub.wait(t, 20*time.Second)
	sum := sub.summary(t)
	if code != 0 || sum["exit_reason"] != "end-of-session" || num(t, sum, "missing") != 0 {
		t.Fatalf("subscriber exit %d, summary %v\n%s", code, sum, tail(sub.stderr.String()))
	}
	// The snippet normalizes to 190 provisional definitions, 384 quotes and
	// 6 trades (see feed/itch).
	if num(t, fs, "messages") != 580 || num(t, fs, "unknown_instrument") != 0 {
		t.Fatalf("feedhandler summary %v", fs)
	}
	types := map[string]int{}
	defined := map[float64]bool{}
	lines := strings.Split(strings.TrimSpace(sub.stdout.String()), "\n")
	for _, l := range lines[:len(lines)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		typ, inst := m["type"].(string), m["instrument"].(float64)
		types[typ]++
		flags, _ := m["flags"].(string)
		// A mid-day snippet with no stock directory: every definition is
		// provisional and every quote comes from an incomplete book.
		if typ == "definition" && !strings.Contains(flags, "provisional") {
			t.Errorf("definition of instrument %v not flagged provisional: %q", inst, flags)
		}
		if typ == "quote" && !strings.Contains(flags, "book_incomplete") {
			t.Errorf("quote of instrument %v not flagged book_incomplete: %q", inst, flags)
		}
		if typ == "definition" {
			defined[inst] = true
		} else if !defined[inst] {
			t.Errorf("%s of instrument %v before its definition", typ, inst)
		}
	}
	t.Logf("subscriber saw %v", types)
	if types["definition"] != 190 || types["quote"] != 384 || types["trade"] != 6 || uint64(len(lines)-1) != num(t, sum, "received") {
		t.Errorf("subscriber saw %v in %d lines, summary %v", types, len(lines)-1, sum)
	}
}
