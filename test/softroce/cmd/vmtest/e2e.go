package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// e2eCommands are the programs the end-to-end run uses, built with -tags
// rdma from ./cmd/NAME and copied into the guest's /tests.
var e2eCommands = []string{"feedhandler", "subscriber"}

// e2eProcs are the end-to-end run's processes as guest-init.sh names them.
var e2eProcs = []string{"sub1", "sub2", "feedhandler"}

// e2eProc is one end-to-end process as the guest reported it.
type e2eProc struct {
	ran     bool
	exit    int
	summary []string // its stdout: the summary line
	log     []string // the tail of its log, when it failed
}

// e2eReport is the end-to-end run as the guest reported it.
type e2eReport struct {
	procs          map[string]*e2eProc
	t0, t1, budget int // guest uptime at the start and end of the run, and its budget (s)
}

func newE2EReport() *e2eReport {
	r := &e2eReport{procs: map[string]*e2eProc{}}
	for _, n := range e2eProcs {
		r.procs[n] = &e2eProc{exit: -1}
	}
	return r
}

// add records one @e2e, @summary or @log line of the guest's report.
func (r *e2eReport) add(line string) {
	f := strings.SplitN(line, " ", 3)
	if len(f) < 2 {
		return
	}
	p := r.procs[f[1]]
	if p == nil {
		return
	}
	rest := ""
	if len(f) == 3 {
		rest = f[2]
	}
	switch f[0] {
	case "@e2e":
		p.ran = true
		if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
			p.exit = n
		}
	case "@summary":
		p.summary = append(p.summary, rest)
	case "@log":
		p.log = append(p.log, rest)
	}
}

// e2eModes is each subscriber's receive mode in the end-to-end run
// (guest-init.sh).
var e2eModes = map[string]string{"sub1": "blocking", "sub2": "direct"}

// subSummary is the part of the subscriber's summary line checked here.
type subSummary struct {
	Role             string  `json:"role"`
	Received         uint64  `json:"received"`
	Expected         uint64  `json:"expected"`
	Packets          uint64  `json:"packets"`
	PacketsA         uint64  `json:"packets_a"`
	Gaps             uint64  `json:"gaps"`
	Missing          uint64  `json:"missing"`
	Requests         uint64  `json:"requests"`
	Recovered        uint64  `json:"recovered"`
	RecoveryFailed   uint64  `json:"recovery_failed"`
	Reordered        uint64  `json:"reordered"`
	Duplicates       uint64  `json:"duplicates"`
	RingFull         uint64  `json:"ring_full"`
	InjectedDropped  uint64  `json:"injected_dropped_datagrams"`
	InjectedMessages uint64  `json:"injected_dropped_messages"`
	Verify           bool    `json:"verify"`
	VerifyOK         bool    `json:"verify_ok"`
	VerifyErrors     uint64  `json:"verify_errors"`
	FirstVerifyError string  `json:"first_verify_error"`
	ElapsedS         float64 `json:"elapsed_s"`
	MsgsPerS         float64 `json:"msgs_per_s"`
	LatencyP50       float64 `json:"latency_p50_us"`
	LatencyP99       float64 `json:"latency_p99_us"`
	RecvToRelP50     float64 `json:"stage_receive_to_release_p50_us"`
	ExitReason       string  `json:"exit_reason"`
	OK               bool    `json:"ok"`
}

// fhSummary is the part of the feed handler's summary line checked here.
type fhSummary struct {
	Role          string  `json:"role"`
	Messages      uint64  `json:"messages"`
	Packets       uint64  `json:"packets"`
	Heartbeats    uint64  `json:"heartbeats"`
	ElapsedS      float64 `json:"elapsed_s"`
	MsgsPerS      float64 `json:"msgs_per_s"`
	MsgsPerPacket float64 `json:"msgs_per_packet"`
	Interrupted   bool    `json:"interrupted"`
	Requests      uint64  `json:"retransmit_requests"`
	Retransmitted uint64  `json:"retransmitted"`
	Snapshots     uint64  `json:"snapshots"`
	Duration      bool    `json:"duration_reached"`
}

// decode parses p's one summary line into v.
func (p *e2eProc) decode(v any) error {
	if len(p.summary) != 1 {
		return fmt.Errorf("%d summary lines on stdout, want 1", len(p.summary))
	}
	return json.Unmarshal([]byte(p.summary[0]), v)
}

// checkE2E prints the end-to-end run's summaries and returns its problems.
// counters are rxe0's (sent_pkts, rcvd_pkts) before and after the tests and
// after the end-to-end run; testsSent is the datagrams the tests sent.
//
// A run sized by count must deliver exactly that many messages; a run sized
// by time must deliver to each subscriber exactly what the feed handler
// published. Either way the report says the rate the guest reached and how
// much of the VM's time limit the run used, and when the guest's budget
// ended the run, one line says how far each process got.
func (r *runner) checkE2E(rep *e2eReport, counters map[string][2]int64, testsSent int64) []string {
	bad := &e2eProblems{prefix: "end to end: "}
	r.printE2EHeader()
	fh, subs := readE2ESummaries(rep, bad)
	limited := timeLimited(rep, fh)
	if limited {
		reportTimeLimit(rep, fh, subs, bad)
	}
	want := r.e2eCount
	if fh != nil {
		want = r.checkE2EFeedHandler(fh, limited, bad)
		r.printE2EMargin(fh)
	}
	maxPacketsA, noRecovery := r.checkE2ESubscribers(subs, want, limited, bad)
	for _, n := range e2eProcs[:2] {
		if s := subs[n]; s != nil {
			fmt.Printf("  %s (%s mode): latency p50 %.0f us, p99 %.0f us; receive to release p50 %.0f us\n",
				n, e2eModes[n], s.LatencyP50, s.LatencyP99, s.RecvToRelP50)
		}
	}
	if limited {
		return bad.list // the counters account for a finished run only
	}
	checkE2ECounters(counters, fh, testsSent, maxPacketsA, noRecovery, bad)
	return bad.list
}

// e2eProblems collects an end-to-end run's problems.
type e2eProblems struct {
	prefix string // of every problem: "end to end: ", "two hosts: "
	list   []string
}

// add records one problem, with the prefix.
func (p *e2eProblems) add(format string, args ...any) {
	p.list = append(p.list, p.prefix+fmt.Sprintf(format, args...))
}

// printE2EHeader prints the line that says how the end-to-end run was
// started.
func (r *runner) printE2EHeader() {
	size := fmt.Sprintf("--count %d", r.e2eCount)
	if r.e2eCount == 0 {
		size = fmt.Sprintf("--count 0 --duration %v", r.e2eDuration)
	}
	fmt.Printf("\n=== end to end: feedhandler --transport rdma %s --rate %v --max-delay %v; subscribers sub1 and sub2 --transport rdma --verify, sub2 --inject-loss %v\n",
		size, r.e2eRate, r.e2eMaxDelay, r.e2eLoss)
}

// readE2ESummaries prints each end-to-end process's exit status, summary
// and log tail, and decodes the summaries: the feed handler's (nil when it
// printed none) and the subscribers' by name.
func readE2ESummaries(rep *e2eReport, bad *e2eProblems) (*fhSummary, map[string]*subSummary) {
	subs := map[string]*subSummary{}
	var fh *fhSummary
	for _, n := range e2eProcs {
		p := rep.procs[n]
		if !p.ran {
			bad.add("%s did not run", n)
			continue
		}
		fmt.Printf("  %-11s exit %d\n", n, p.exit)
		for _, l := range p.summary {
			fmt.Printf("    %s\n", l)
		}
		if p.exit != 0 {
			bad.add("%s exited %d", n, p.exit)
		}
		for _, l := range p.log {
			fmt.Printf("         | %s\n", l)
		}
		if n == "feedhandler" {
			var s fhSummary
			if err := p.decode(&s); err != nil {
				bad.add("%s summary: %v", n, err)
				continue
			}
			fh = &s
			continue
		}
		var s subSummary
		if err := p.decode(&s); err != nil {
			bad.add("%s summary: %v", n, err)
			continue
		}
		subs[n] = &s
	}
	return fh, subs
}

// timeLimited reports whether the guest's budget ended the run. Its
// processes then got SIGTERM (exit 143 from timeout, or 137 after the
// SIGKILL that follows), or the feed handler says it was interrupted.
func timeLimited(rep *e2eReport, fh *fhSummary) bool {
	for _, n := range e2eProcs {
		if e := rep.procs[n].exit; e == 124 || e == 137 || e == 143 {
			return true
		}
	}
	return fh != nil && fh.Interrupted
}

// reportTimeLimit prints and records the one problem of a run the guest's
// budget ended: how far each process got.
func reportTimeLimit(rep *e2eReport, fh *fhSummary, subs map[string]*subSummary, bad *e2eProblems) {
	got := []string{}
	if fh != nil {
		got = append(got, fmt.Sprintf("feedhandler published %d messages in %.0fs (%.0f msg/s)", fh.Messages, fh.ElapsedS, fh.MsgsPerS))
	} else {
		got = append(got, "feedhandler printed no summary (killed)")
	}
	for _, n := range e2eProcs[:2] {
		if s := subs[n]; s != nil {
			got = append(got, fmt.Sprintf("%s received %d", n, s.Received))
		} else {
			got = append(got, n+" printed no summary (killed)")
		}
	}
	line := fmt.Sprintf("the guest's time limit ended the run after %ds of its %ds budget: %s", rep.t1-rep.t0, rep.budget, strings.Join(got, ", "))
	fmt.Println("  " + line)
	bad.add("%s", line)
}

// checkE2EFeedHandler prints and checks the feed handler's summary and
// returns the messages each subscriber must receive: -e2e-count, or in a
// run sized by time what the feed handler published.
func (r *runner) checkE2EFeedHandler(fh *fhSummary, limited bool, bad *e2eProblems) (want uint64) {
	want = r.e2eCount
	if r.e2eCount == 0 {
		want = fh.Messages
		if !fh.Duration && !fh.Interrupted {
			bad.add("feedhandler ended before its --duration %v (%d messages)", r.e2eDuration, fh.Messages)
		}
		if fh.Messages == 0 {
			bad.add("feedhandler published nothing")
		}
	}
	fmt.Printf("  feedhandler: %d messages in %d packets (%.1f per packet) + %d heartbeats in %.2fs (%.0f msg/s); recovery: %d requests, %d messages retransmitted\n",
		fh.Messages, fh.Packets, fh.MsgsPerPacket, fh.Heartbeats, fh.ElapsedS, fh.MsgsPerS, fh.Requests, fh.Retransmitted)
	// A run the time limit ended has one problem, said above; the
	// counts that follow could not have been met.
	if fh.Messages != want && !limited {
		bad.add("feedhandler published %d messages, want %d", fh.Messages, want)
	}
	if fh.Interrupted && !limited {
		bad.add("feedhandler was interrupted")
	}
	return want
}

// printE2EMargin prints the figures a person needs to judge the margin: the
// rate the guest reached and how much of the VM's time limit the run used.
func (r *runner) printE2EMargin(fh *fhSummary) {
	limitUse := r.vmRan.Seconds() / r.timeout.Seconds()
	fmt.Printf("end to end: %s messages at %s msg/s (asked %s), %.0f s; the VM ran %.0f s, %.0f%% of its %v limit (margin %.1fx)\n",
		group(fh.Messages), group(uint64(fh.MsgsPerS+0.5)), group(uint64(r.e2eRate)), fh.ElapsedS,
		r.vmRan.Seconds(), 100*limitUse, r.timeout, 1/max(limitUse, 1e-9))
	if limitUse > 0.5 {
		fmt.Printf("end to end: WARNING: less than 2x margin to the VM's time limit; use a shorter -e2e-duration or a longer -timeout\n")
	}
}

// checkE2ESubscribers prints and checks each subscriber's summary against
// want. It returns the most datagrams one subscriber took from rxe0, and
// whether some subscriber took every data packet from rxe0 (it saw no gap
// and made no recovery request).
func (r *runner) checkE2ESubscribers(subs map[string]*subSummary, want uint64, limited bool, bad *e2eProblems) (maxPacketsA uint64, noRecovery bool) {
	for _, n := range e2eProcs[:2] {
		s := subs[n]
		if s == nil {
			continue
		}
		fmt.Printf("  %s: received %d of %d, missing %d, verify_ok %v; %d packets (%d dropped on purpose: %d messages), %d gaps, %d recovery requests, %d recovered, %d duplicates; %.2fs (%.0f msg/s), exit reason %s\n",
			n, s.Received, want, s.Missing, s.VerifyOK, s.PacketsA, s.InjectedDropped, s.InjectedMessages, s.Gaps, s.Requests, s.Recovered, s.Duplicates, s.ElapsedS, s.MsgsPerS, s.ExitReason)
		if s.Received != want && !limited {
			bad.add("%s received %d messages, want %d", n, s.Received, want)
		}
		if s.Missing != 0 {
			bad.add("%s: %d messages missing", n, s.Missing)
		}
		if !s.Verify || !s.VerifyOK {
			bad.add("%s: verify %v, verify_ok %v (%d errors, first: %s)", n, s.Verify, s.VerifyOK, s.VerifyErrors, s.FirstVerifyError)
		}
		// Every message dropped on purpose had to come from recovery
		// (there is no B line) for the count to be met.
		if s.Recovered < s.InjectedMessages {
			bad.add("%s recovered %d messages, fewer than the %d it dropped on purpose", n, s.Recovered, s.InjectedMessages)
		}
		if n == "sub2" && r.e2eLoss > 0 && float64(want) >= 100/r.e2eLoss && s.InjectedMessages == 0 {
			bad.add("%s dropped nothing on purpose with --inject-loss %v: recovery was not exercised", n, r.e2eLoss)
		}
		maxPacketsA = max(maxPacketsA, s.PacketsA+s.InjectedDropped)
		if s.Requests == 0 && s.Gaps == 0 {
			noRecovery = true
		}
	}
	return maxPacketsA, noRecovery
}

// checkE2ECounters prints and checks rxe0's counters over a finished
// end-to-end run. rxe counts sent_pkts once per packet it transmits, and
// rcvd_pkts once per packet that arrives (here: the multicast copy looped
// back on veth0), before it hands a multicast packet to each attached QP.
// So two subscribers on one device do not double rcvd_pkts (the tests'
// TestTwoReceivers shows rcvd == sent), and in this closed VM nothing else
// uses rxe0:
//
//	sent >= the feed handler's data packets + heartbeats (its end of
//	        session datagrams come on top and are not counted);
//	rcvd >= the most datagrams one subscriber took from rxe0 (each of
//	        them arrived, and was counted, once);
//	rcvd >= the feed handler's data packets, when a subscriber saw no
//	        gap (then none was lost before rxe0 received it);
//	rcvd <= sent (a count per receiving QP would be twice that).
//
// Recovery goes over NATS on the loopback, not rxe0.
func checkE2ECounters(counters map[string][2]int64, fh *fhSummary, testsSent int64, maxPacketsA uint64, noRecovery bool, bad *e2eProblems) {
	after, oka := counters["after"]
	end, oke := counters["e2e"]
	before := counters["before"]
	if !oka || !oke || fh == nil {
		if !oke {
			bad.add("rxe0 hw_counters not reported after the run")
		}
		return
	}
	ds, dr := end[0]-after[0], end[1]-after[1]
	fhSent := int64(fh.Packets + fh.Heartbeats)
	fmt.Printf("  rxe0 hw_counters over the run: sent_pkts +%d, rcvd_pkts +%d; feed handler: %d data packets + %d heartbeats = %d datagrams; most a subscriber took: %d\n",
		ds, dr, fh.Packets, fh.Heartbeats, fhSent, maxPacketsA)
	fmt.Printf("  rxe0 hw_counters in all: sent_pkts %d -> %d (+%d), rcvd_pkts %d -> %d (+%d); tests %d + feed handler %d = %d datagrams\n",
		before[0], end[0], end[0]-before[0], before[1], end[1], end[1]-before[1], testsSent, fhSent, testsSent+fhSent)
	if ds < fhSent {
		bad.add("rxe0 sent_pkts rose by %d, less than the feed handler's %d datagrams", ds, fhSent)
	}
	if end[0]-before[0] < testsSent+fhSent {
		bad.add("rxe0 sent_pkts rose by %d in all, less than the %d datagrams the tests and the feed handler sent", end[0]-before[0], testsSent+fhSent)
	}
	if dr < int64(maxPacketsA) {
		bad.add("rxe0 rcvd_pkts rose by %d, less than the %d datagrams a subscriber received", dr, maxPacketsA)
	}
	if noRecovery {
		if dr < int64(fh.Packets) {
			bad.add("rxe0 rcvd_pkts rose by %d, less than the feed handler's %d data packets, all of which a subscriber received", dr, fh.Packets)
		}
		if end[1]-before[1] < testsSent+int64(fh.Packets) {
			bad.add("rxe0 rcvd_pkts rose by %d in all, less than the tests' %d datagrams and the feed handler's %d data packets",
				end[1]-before[1], testsSent, fh.Packets)
		}
	}
	if dr > ds {
		bad.add("rxe0 rcvd_pkts rose by %d, more than sent_pkts (%d): not one count per packet", dr, ds)
	}
}

// group writes n with thousands separators: 1,000,000.
func group(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
