package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// report builds a guest report of an end-to-end run: the feed handler's and
// both subscribers' exit statuses and summary lines.
func report(t *testing.T, fhExit, subExit int, fh, sub1, sub2 string) *e2eReport {
	t.Helper()
	r := newE2EReport()
	for _, l := range []string{
		"@e2e sub1 " + itoa(subExit), "@summary sub1 " + sub1,
		"@e2e sub2 " + itoa(subExit), "@summary sub2 " + sub2,
		"@e2e feedhandler " + itoa(fhExit), "@summary feedhandler " + fh,
	} {
		r.add(l)
	}
	r.t0, r.t1, r.budget = 12, 68, 56
	return r
}

func itoa(n int) string { return strconv.Itoa(n) }

const (
	fhDone    = `{"messages":900000,"packets":87000,"heartbeats":90,"elapsed_s":60,"msgs_per_s":15000,"duration_reached":true}`
	subAll    = `{"received":900000,"missing":0,"verify":true,"verify_ok":true,"packets_a":87010,"exit_reason":"end-of-session"}`
	subAllB   = `{"received":900000,"missing":0,"verify":true,"verify_ok":true,"packets_a":86950,"injected_dropped_datagrams":60,"injected_dropped_messages":700,"recovered":700,"gaps":60,"requests":60,"exit_reason":"end-of-session"}`
	fhCut     = `{"messages":808936,"packets":78603,"heartbeats":17,"elapsed_s":54,"msgs_per_s":14999,"interrupted":true}`
	subCut1   = `{"received":800682,"missing":0,"verify":true,"verify_ok":true,"packets_a":73973,"exit_reason":"signal"}`
	subCut2   = `{"received":801266,"missing":0,"verify":true,"verify_ok":true,"packets_a":73965,"exit_reason":"signal"}`
	subShort  = `{"received":899000,"missing":0,"verify":true,"verify_ok":true,"packets_a":87010,"exit_reason":"end-of-session"}`
	subMissed = `{"received":899000,"missing":1000,"verify":true,"verify_ok":true,"packets_a":87010,"exit_reason":"end-of-session"}`
)

func runner60() *runner {
	return &runner{e2e: true, e2eDuration: time.Minute, e2eRate: 15000, e2eMaxDelay: time.Millisecond,
		e2eLoss: 0.001, timeout: 5 * time.Minute, vmRan: 80 * time.Second}
}

func counters(sent, rcvd int64) map[string][2]int64 {
	return map[string][2]int64{"before": {0, 0}, "after": {15466, 15466}, "e2e": {15466 + sent, 15466 + rcvd}}
}

// A run sized by time passes when each subscriber got exactly what the feed
// handler published and the counters account for it.
func TestCheckE2EByDuration(t *testing.T) {
	r := runner60()
	if p := r.checkE2E(report(t, 0, 0, fhDone, subAll, subAllB), counters(87090, 87010), 15466); len(p) != 0 {
		t.Fatalf("problems in a good run: %q", p)
	}
	p := r.checkE2E(report(t, 0, 0, fhDone, subShort, subAllB), counters(87090, 87010), 15466)
	if !contains(p, "sub1 received 899000 messages, want 900000") {
		t.Fatalf("a subscriber 1,000 short is not reported: %q", p)
	}
	p = r.checkE2E(report(t, 0, 0, fhDone, subMissed, subAllB), counters(87090, 87010), 15466)
	if !contains(p, "sub1: 1000 messages missing") {
		t.Fatalf("missing messages are not reported: %q", p)
	}
}

// When the guest's budget ends the run, the report says so in one line with
// how far each process got, and no follow-on problems of counts that could
// not have been met.
func TestCheckE2ETimeLimit(t *testing.T) {
	r := runner60()
	p := r.checkE2E(report(t, 143, 143, fhCut, subCut1, subCut2), counters(78620, 74046), 15466)
	want := "the guest's time limit ended the run after 56s of its 56s budget: feedhandler published 808936 messages in 54s (14999 msg/s), sub1 received 800682, sub2 received 801266"
	if !contains(p, want) {
		t.Fatalf("no time-limit line %q in %q", want, p)
	}
	for _, x := range p {
		if strings.Contains(x, "rcvd_pkts") || strings.Contains(x, "want 808936") || strings.Contains(x, "interrupted") {
			t.Errorf("follow-on problem reported for a run the limit ended: %q", x)
		}
	}
	// A process killed before it could print says so.
	rep := report(t, 137, 143, "", subCut1, subCut2)
	rep.procs["feedhandler"].summary = nil
	p = r.checkE2E(rep, counters(78620, 74046), 15466)
	if !contains(p, "feedhandler printed no summary (killed)") {
		t.Fatalf("a killed feed handler is not named: %q", p)
	}
}

func contains(problems []string, s string) bool {
	for _, p := range problems {
		if strings.Contains(p, s) {
			return true
		}
	}
	return false
}

func TestGroup(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 15000: "15,000", 1000000: "1,000,000"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}
