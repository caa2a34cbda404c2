package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The faults run's defaults: 150,000 messages at 10,000 msg/s take 15 s,
// long enough for a link flap 4 s in and a device removal about 6 s later,
// with one subscriber on the guest's two CPUs.
const (
	defaultFaultsCount = 150000
	defaultFaultsRate  = 10000
)

// faultsReport is what the guest reports of the faults run (guest-init.sh,
// "faults end to end").
type faultsReport struct {
	ran     bool
	steps   []faultStep
	rc      map[string]int
	summary map[string][]string
	log     map[string][]string
	tail    map[string][]string
}

type faultStep struct {
	name   string
	uptime float64
	clock  string // the guest's wall clock, to match the programs' logs
	rc     string // "" when the step has none
}

func newFaultsReport() *faultsReport {
	return &faultsReport{rc: map[string]int{}, summary: map[string][]string{}, log: map[string][]string{}, tail: map[string][]string{}}
}

// add records one @fstep, @frc, @fsummary or @flog line.
func (f *faultsReport) add(line string) {
	kind, rest, _ := strings.Cut(line, " ")
	name, rest, _ := strings.Cut(rest, " ")
	switch kind {
	case "@fstep":
		f.ran = true
		fs := strings.Fields(rest)
		st := faultStep{name: name}
		if len(fs) > 0 {
			st.uptime, _ = strconv.ParseFloat(fs[0], 64)
		}
		if len(fs) > 1 {
			st.clock = fs[1]
		}
		if len(fs) > 2 {
			st.rc = fs[2]
		}
		f.steps = append(f.steps, st)
	case "@frc":
		n, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil {
			n = -1
		}
		f.rc[name] = n
	case "@fsummary":
		f.summary[name] = append(f.summary[name], rest)
	case "@flog":
		f.log[name] = append(f.log[name], rest)
	case "@ftail":
		f.tail[name] = append(f.tail[name], rest)
	}
}

// faultLog is the part of a program's JSON log line about an RDMA event or
// rebuild that is checked here.
type faultLog struct {
	Message string `json:"message"`
	Event   string `json:"event"`
	Cause   string `json:"cause"`
	Outage  string `json:"outage"`
	Role    string `json:"role"`
}

// checkFaults prints the faults run and returns its problems. The
// subscriber must get every message (--expect), in order, verified, with
// none missing, after a link flap and a device removal: the interruptions
// reach it as gaps, which it recovers over NATS (recovered > 0). Both
// programs must have observed the port going down and the device removal,
// and rebuilt their endpoints after each (at least two "rdma endpoint
// rebuilt" lines each); the outage of every rebuild is printed as the time
// to recovery.
func (r *runner) checkFaults(f *faultsReport) []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, "faults: "+fmt.Sprintf(format, args...)) }
	fmt.Printf("\n=== faults end to end: %d messages at %d msg/s; link flap, then rxe0 removed and added back\n", r.faultsCount, r.faultsRate)
	if !f.ran {
		return []string{"faults: the run did not happen (no @fstep in the guest's report)"}
	}
	var t0 float64
	for i, st := range f.steps {
		if i == 0 {
			t0 = st.uptime
		}
		rc := ""
		if st.rc != "" {
			rc = " (exit " + st.rc + ")"
			if st.rc != "0" {
				add("step %s exited %s", st.name, st.rc)
			}
		}
		fmt.Printf("  %+6.2fs %s %s%s\n", st.uptime-t0, st.clock, st.name, rc)
	}
	if d, ok := stepGap(f.steps, "delete", "deleted"); ok {
		fmt.Printf("  rdma link delete rxe0 took %.2fs\n", d)
		if d > 5 {
			add("rdma link delete rxe0 took %.2fs, more than 5s", d)
		}
	} else {
		add("no delete/deleted steps")
	}
	for _, n := range []string{"fsub", "ffh"} {
		rc, ok := f.rc[n]
		if !ok {
			add("%s: no exit status", n)
		} else if rc != 0 {
			add("%s exited %d", n, rc)
		}
		events := map[string]int{}
		var outages []string
		for _, l := range f.log[n] {
			var fl faultLog
			if json.Unmarshal([]byte(l), &fl) != nil {
				continue
			}
			switch fl.Message {
			case "rdma event":
				events[fl.Event]++
			case "rdma endpoint rebuilt":
				outages = append(outages, fl.Cause+" "+roundDuration(fl.Outage))
			}
		}
		fmt.Printf("  %s: events %v; rebuilt after: %s\n", n, events, strings.Join(outages, ", "))
		if events["port_down"] == 0 || events["device_removal"] == 0 {
			add("%s did not observe both port_down and device_removal (events %v)", n, events)
		}
		if len(outages) < 2 {
			add("%s rebuilt %d time(s), want at least 2 (after the flap and after the removal)", n, len(outages))
		}
		if rc, ok := f.rc[n]; !ok || rc != 0 {
			for _, l := range f.tail[n] {
				fmt.Printf("         | %s\n", l)
			}
		}
	}
	var s subSummary
	if len(f.summary["fsub"]) != 1 || json.Unmarshal([]byte(f.summary["fsub"][0]), &s) != nil {
		add("fsub: %d summary lines, want 1 JSON line", len(f.summary["fsub"]))
		return bad
	}
	fmt.Printf("  fsub: received %d of %d, missing %d, verify_ok %v; %d gaps, %d recovery requests, %d recovered; %.2fs, exit reason %s\n",
		s.Received, r.faultsCount, s.Missing, s.VerifyOK, s.Gaps, s.Requests, s.Recovered, s.ElapsedS, s.ExitReason)
	if s.Received != r.faultsCount || s.Missing != 0 {
		add("fsub received %d of %d messages, %d missing", s.Received, r.faultsCount, s.Missing)
	}
	if !s.Verify || !s.VerifyOK {
		add("fsub: verify %v, verify_ok %v (%d errors, first: %s)", s.Verify, s.VerifyOK, s.VerifyErrors, s.FirstVerifyError)
	}
	if s.Gaps == 0 || s.Recovered == 0 {
		add("fsub saw %d gaps and recovered %d messages: the faults did not interrupt the stream", s.Gaps, s.Recovered)
	}
	return bad
}

// stepGap returns the time between the first steps named from and to.
func stepGap(steps []faultStep, from, to string) (float64, bool) {
	a, b := -1.0, -1.0
	for _, st := range steps {
		if st.name == from && a < 0 {
			a = st.uptime
		}
		if st.name == to && b < 0 {
			b = st.uptime
		}
	}
	return b - a, a >= 0 && b >= 0
}

func roundDuration(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return d.Round(time.Millisecond).String()
}
