package seqgap

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
)

var update = flag.Bool("update", false, "rewrite the expected output of the scenario files")

// The scenario files under testdata/ are sequences of commands, each followed
// by the output it must produce:
//
//	config window=8 lost-after=10ms gap-delay=0 recovery=on stale-after=300ms
//	packet A S1 1 3      data packet on line A of session S1: messages 1..3
//	heartbeat B S1 9     heartbeat (next sequence 9)
//	eos A S1 9           end of session (next sequence 9)
//	tick 5ms             the clock moves to 5ms and Tick runs
//	recover S1 4 2       recovery delivers messages 4..5
//	giveup S1 4 5        recovery gives up on 4..5
//	resync S1 10         a snapshot covers everything before 10
//	ended S1 9           recovery says the session ended (next sequence 9)
//	retry S1 4 5         the request for 4..5 failed in transit
//	----
//	release 1..3 A       consecutive releases from one line, coalesced
//	gap 4..5 A           and every event, in the order emitted
//
// A blank line ends the output. Messages carry "m<seq>" so the runner checks
// that every released message is the one its sequence number says.

type scenario struct {
	t     *testing.T
	tr    *Tracker
	now   int64
	out   []string
	relFr uint64
	relTo uint64
	relLn int
	reqs  []Range
}

func lineName(l int) string {
	switch l {
	case 0:
		return "A"
	case 1:
		return "B"
	}
	return "R"
}

func (s *scenario) flushRel() {
	if s.relFr == 0 {
		return
	}
	if s.relFr == s.relTo {
		s.out = append(s.out, fmt.Sprintf("release %d %s", s.relFr, lineName(s.relLn)))
	} else {
		s.out = append(s.out, fmt.Sprintf("release %d..%d %s", s.relFr, s.relTo, lineName(s.relLn)))
	}
	s.relFr = 0
}

func (s *scenario) Release(seq uint64, msg []byte, line int, recvNs int64) {
	if want := fmt.Sprintf("m%d", seq); string(msg) != want {
		s.t.Fatalf("released %q as seq %d", msg, seq)
	}
	if s.relFr != 0 && seq == s.relTo+1 && line == s.relLn {
		s.relTo = seq
		return
	}
	s.flushRel()
	s.relFr, s.relTo, s.relLn = seq, seq, line
}

func (s *scenario) Event(ev *Event) {
	s.flushRel()
	var str string
	switch ev.Kind {
	case EventSessionStart:
		str = fmt.Sprintf("session-start %s %s", ev.Session, lineName(ev.Line))
	case EventSessionEnd, EventSessionAbrupt:
		str = fmt.Sprintf("%s %s last=%d", ev.Kind, ev.Session, ev.LastSeq)
	case EventGap:
		str = fmt.Sprintf("gap %s %s", ev.Range, lineName(ev.Line))
	case EventRequest:
		str = fmt.Sprintf("request %s", ev.Range)
	case EventLost:
		str = fmt.Sprintf("lost %s %s", ev.Range, ev.Reason)
	default:
		str = ev.Kind.String()
	}
	s.out = append(s.out, str)
}

func (s *scenario) Request(session mold.Session, r Range) { s.reqs = append(s.reqs, r) }

func (s *scenario) packet(session string, seq uint64, count uint16, msgs int) mold.Packet {
	sess, err := mold.ParseSession(session)
	if err != nil {
		s.t.Fatal(err)
	}
	b, _ := mold.NewBuilder(65000)
	b.Start(sess, seq)
	for i := 0; i < msgs; i++ {
		b.Add([]byte(fmt.Sprintf("m%d", seq+uint64(i))))
	}
	pkt := append([]byte{}, b.Finish()...)
	if count == 0 || count == mold.EndOfSession {
		pkt = mold.Header{Session: sess, Seq: seq, Count: count}.Append(nil)
	}
	p, err := mold.Parse(pkt)
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

func (s *scenario) run(cmd string) {
	f := strings.Fields(cmd)
	u := func(i int) uint64 {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			s.t.Fatalf("%q: argument %d: %v", cmd, i, err)
		}
		return v
	}
	line := func() int {
		if f[1] == "B" {
			return 1
		}
		return 0
	}
	switch f[0] {
	case "config":
		var cfg Config
		recovery := false
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			d, _ := time.ParseDuration(v)
			n, _ := strconv.Atoi(v)
			switch k {
			case "window":
				cfg.Window = n
			case "slot":
				cfg.SlotSize = n
			case "lost-after":
				cfg.LostAfter = d
			case "gap-delay":
				cfg.GapDelay = d
			case "stale-after":
				cfg.StaleAfter = d
			case "max-gaps":
				cfg.MaxGaps = n
			case "recovery":
				recovery = v == "on"
			default:
				s.t.Fatalf("unknown config %q", k)
			}
		}
		var rec Recovery
		if recovery {
			rec = s
		}
		tr, err := New(cfg, rec)
		if err != nil {
			s.t.Fatal(err)
		}
		s.tr, s.now = tr, 0
	case "packet":
		n := u(4)
		s.tr.Packet(line(), s.packet(f[2], u(3), uint16(n), int(n)), s.now, s.now, s)
	case "heartbeat":
		s.tr.Packet(line(), s.packet(f[2], u(3), 0, 0), s.now, s.now, s)
	case "eos":
		s.tr.Packet(line(), s.packet(f[2], u(3), mold.EndOfSession, 0), s.now, s.now, s)
	case "tick":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			s.t.Fatal(err)
		}
		s.now = int64(d)
		s.tr.Tick(s.now, s)
	case "recover":
		n := u(3)
		sess, _ := mold.ParseSession(f[1])
		s.tr.Recovered(sess, s.packet(f[1], u(2), uint16(n), int(n)), s.now, s)
	case "giveup":
		sess, _ := mold.ParseSession(f[1])
		s.tr.GiveUp(sess, Range{u(2), u(3)}, s.now)
	case "ended":
		sess, _ := mold.ParseSession(f[1])
		s.tr.EndOfSession(sess, u(2), s.now, s)
	case "retry":
		sess, _ := mold.ParseSession(f[1])
		s.tr.Retry(sess, Range{u(2), u(3)})
	case "resync":
		sess, _ := mold.ParseSession(f[1])
		s.tr.Resync(sess, u(2), s.now, s)
	case "stats":
		st := s.tr.Stats()
		s.out = append(s.out, fmt.Sprintf("released=%d lost=%d dup-msgs=%d dup-packets=%d held=%d recovered=%d overflow=%d wins=%d/%d requests=%d",
			st.Released, st.Lost, st.DupMessages, st.DupPackets, st.Held, st.Recovered, st.Overflow, st.WinsPerLine[0], st.WinsPerLine[1], st.Requests))
	default:
		s.t.Fatalf("unknown command %q", cmd)
	}
	s.flushRel()
}

func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) < 10 {
		t.Fatalf("%d scenario files, expected at least 10", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s := &scenario{t: t}
			var rewritten strings.Builder
			sc := bufio.NewScanner(strings.NewReader(string(raw)))
			lineNo := 0
			for sc.Scan() {
				lineNo++
				l := sc.Text()
				if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
					rewritten.WriteString(l + "\n")
					continue
				}
				cmd := l
				rewritten.WriteString(cmd + "\n")
				// Expected output: after "----" up to a blank line.
				var want []string
				if !sc.Scan() {
					t.Fatalf("line %d: %q has no ---- block", lineNo, cmd)
				}
				lineNo++
				if sc.Text() != "----" {
					t.Fatalf("line %d: want ----, got %q", lineNo, sc.Text())
				}
				for sc.Scan() {
					lineNo++
					if strings.TrimSpace(sc.Text()) == "" {
						break
					}
					want = append(want, sc.Text())
				}
				s.out = nil
				s.run(cmd)
				rewritten.WriteString("----\n")
				for _, o := range s.out {
					rewritten.WriteString(o + "\n")
				}
				rewritten.WriteString("\n")
				if !*update && strings.Join(s.out, "\n") != strings.Join(want, "\n") {
					t.Fatalf("%s:%d: %s\n got:\n\t%s\nwant:\n\t%s", file, lineNo, cmd,
						strings.Join(s.out, "\n\t"), strings.Join(want, "\n\t"))
				}
			}
			if *update {
				os.WriteFile(file, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644)
			}
		})
	}
}
