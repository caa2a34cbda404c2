package seqgap

import (
	"bufio"
	"cmp"
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
//	                     (and confirm-first=on: Config.ConfirmFirst,
//	                     unsealed-control=on: Config.UnsealedControl)
//	packet A S1 1 3      data packet on line A of session S1: messages 1..3
//	heartbeat B S1 9     heartbeat (next sequence 9)
//	eos A S1 9           end of session (next sequence 9)
//	tick 5ms             the clock moves to 5ms and Tick runs
//	recover S1 4 2       recovery delivers messages 4..5 (AnswerPackets)
//	giveup S1 4 5        recovery refuses 4..5 (AnswerRefused)
//	resync S1 10         a snapshot covers everything before 10 (AnswerSnapshot)
//	ended S1 9           recovery says the session ended, next sequence 9 (AnswerEnded)
//	retry S1 4 5         the request for 4..5 failed in transit (AnswerRetry)
//	session S2           recovery names S2 as the channel's session (AnswerSession);
//	                     "session -" says it could not tell
//	probe                before any packet, ask which session the channel
//	                     publishes (Tracker.Probe)
//	stats                the tracker's counters
//	----
//	release 1..3 A       consecutive releases from one line, coalesced
//	gap 4..5 A           and every event, in the order emitted;
//	request 4..5         then the requests the command put in the outbox
//	request 1..9 snapshot
//	request session      a session query (Request.Query)
//
// A blank line ends the output. Messages carry "m<seq>" so the runner checks
// that every released message is the one its sequence number says.
//
// The counters of a stats line are not only compared with the file: the
// runner also checks them against its own account of the scenario (see
// model), which does not come from the tracker.

type scenario struct {
	t     *testing.T
	tr    *Tracker
	now   int64
	out   []string
	relFr uint64
	relTo uint64
	relLn int
	m     model
}

// model is the scenario runner's own account of what it fed the tracker and
// what the tracker handed out, to check the stats counters against.
type model struct {
	had      map[mold.Session]map[uint64]bool // by session: sequences fed, lost, or below a resync
	fed      uint64                           // messages fed, live and recovered
	newMsgs  uint64                           // of those, the ones not had before
	dupPkts  uint64                           // live data packets that brought nothing new
	wins     [2]uint64                        // live data packets that brought something new, per line
	released uint64                           // Release calls
	fromRec  uint64                           // ... of messages from recovery
	lost     uint64                           // messages in EventLost ranges
	requests uint64                           // requests taken from the outbox

	// The followed session, from the session events, and what lets
	// another one replace it: it ended, or fell silent for staleAfter.
	cur       mold.Session
	curEnded  bool
	curNs     int64
	staleNs   int64
	competing uint64 // live packets of another session while cur is alive
}

// competes reports whether a live packet of session at nowNs competes with
// the followed session (and is dropped), and notes the followed session's
// last packet.
func (m *model) competes(session mold.Session, nowNs int64) bool {
	if m.cur != (mold.Session{}) && session != m.cur && !m.curEnded && nowNs-m.curNs < m.staleNs {
		m.competing++
		return true
	}
	if session == m.cur {
		m.curNs = nowNs
	}
	return false
}

// feed records a data packet of count messages from seq on line (or
// LineRecovery) and returns how many were new.
func (m *model) feed(session mold.Session, seq uint64, count int, line int) {
	fresh := 0
	for i := 0; i < count; i++ {
		if !m.has(session, seq+uint64(i)) {
			m.mark(session, seq+uint64(i))
			fresh++
		}
	}
	m.fed += uint64(count)
	m.newMsgs += uint64(fresh)
	if line == LineRecovery {
		return
	}
	if fresh == 0 {
		m.dupPkts++
	} else {
		m.wins[line]++
	}
}

func (m *model) has(session mold.Session, seq uint64) bool { return m.had[session][seq] }

func (m *model) mark(session mold.Session, seq uint64) {
	if m.had == nil {
		m.had = map[mold.Session]map[uint64]bool{}
	}
	if m.had[session] == nil {
		m.had[session] = map[uint64]bool{}
	}
	m.had[session][seq] = true
}

// check compares the tracker's counters with the model.
func (m *model) check(t *testing.T, where string, st Stats) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"released (Release calls)", st.Messages, m.released},
		{"recovered (releases from recovery)", st.Recovered, m.fromRec},
		{"lost (messages in lost events)", st.Missing, m.lost},
		{"dup-msgs + ignored recovered (fed - new)", st.Duplicates + st.IgnoredRecov, m.fed - m.newMsgs},
		{"dup-packets (live packets with nothing new)", st.DuplicatePackets, m.dupPkts},
		{"wins on A", st.WinsPerLine[0], m.wins[0]},
		{"wins on B", st.WinsPerLine[1], m.wins[1]},
		{"requests + probes + queries (requests taken from the outbox)", st.Requests + st.Probes + st.Queries, m.requests},
		{"competing (packets of another session while the followed one is alive)", st.Competing, m.competing},
	} {
		if c.got != c.want {
			t.Errorf("%s: stats %s = %d, the scenario says %d", where, c.name, c.got, c.want)
		}
	}
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
	s.m.released++
	if line == LineRecovery {
		s.m.fromRec++
	}
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
		s.m.cur, s.m.curEnded, s.m.curNs = ev.Session, false, s.now
	case EventCompeting:
		str = fmt.Sprintf("competing %s %s", ev.Session, lineName(ev.Line))
	case EventSessionNamed:
		str = fmt.Sprintf("session-named %s", ev.Session)
	case EventSessionEnd, EventSessionAbrupt:
		str = fmt.Sprintf("%s %s last=%d", ev.Kind, ev.Session, ev.LastSeq)
		if ev.Kind == EventSessionEnd && ev.Session == s.m.cur {
			s.m.curEnded = true
		}
	case EventGap:
		str = fmt.Sprintf("gap %s %s", ev.Range, lineName(ev.Line))
	case EventLost:
		str = fmt.Sprintf("lost %s %s", ev.Range, ev.Reason)
		s.m.lost += ev.Range.Len()
		for seq := ev.Range.From; seq <= ev.Range.To; seq++ {
			s.m.mark(ev.Session, seq)
		}
	default:
		str = ev.Kind.String()
	}
	s.out = append(s.out, str)
}

// requests prints what the tracker put in its outbox.
func (s *scenario) requests() {
	if s.tr == nil {
		return
	}
	for _, r := range s.tr.Requests() {
		s.m.requests++
		if r.Query {
			s.out = append(s.out, "request session")
			continue
		}
		str := fmt.Sprintf("request %s", r.Range)
		if r.Snapshot {
			str += " snapshot"
		}
		s.out = append(s.out, str)
	}
}

func (s *scenario) packet(session string, seq uint64, count uint16, msgs int) mold.Packet {
	p, err := mold.Parse(s.packetBytes(session, seq, count, msgs))
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

func (s *scenario) packetBytes(session string, seq uint64, count uint16, msgs int) []byte {
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
	return pkt
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
			case "confirm-first":
				cfg.ConfirmFirst = v == "on"
			case "unsealed-control":
				cfg.UnsealedControl = v == "on"
			default:
				s.t.Fatalf("unknown config %q", k)
			}
		}
		cfg.Recovery = recovery
		tr, err := New(cfg)
		if err != nil {
			s.t.Fatal(err)
		}
		s.tr, s.now, s.m = tr, 0, model{staleNs: int64(cmp.Or(cfg.StaleAfter, DefaultStaleAfter))}
	case "packet":
		n := u(4)
		if seq := u(3); seq != 0 && seq < 1<<32 && !s.m.competes(s.session(f[2]), s.now) {
			// The scenarios' implausible packets start at 0 or past 2^32.
			s.m.feed(s.session(f[2]), seq, int(n), line())
		}
		s.tr.Packet(line(), s.packet(f[2], u(3), uint16(n), int(n)), s.now, s.now, s)
	case "heartbeat":
		if !s.tr.cfg.UnsealedControl || !s.tr.cfg.Recovery { // unsealed: ignored, not competing
			s.m.competes(s.session(f[2]), s.now)
		}
		s.tr.Packet(line(), s.packet(f[2], u(3), 0, 0), s.now, s.now, s)
	case "eos":
		if !s.tr.cfg.UnsealedControl || !s.tr.cfg.Recovery {
			s.m.competes(s.session(f[2]), s.now)
		}
		s.tr.Packet(line(), s.packet(f[2], u(3), mold.EndOfSession, 0), s.now, s.now, s)
	case "session":
		var named mold.Session
		if f[1] != "-" {
			named = s.session(f[1])
		}
		s.tr.Answer(Answer{Outcome: AnswerSession, Session: named}, s.now, s)
	case "probe":
		s.tr.Probe(s.now)
	case "tick":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			s.t.Fatal(err)
		}
		s.now = int64(d)
		s.tr.Tick(s.now, s)
	case "recover":
		n := u(3)
		s.m.feed(s.session(f[1]), u(2), int(n), LineRecovery)
		s.tr.Answer(Answer{Outcome: AnswerPackets, Session: s.session(f[1]), Range: Range{u(2), u(2) + n - 1},
			Packets: [][]byte{s.packetBytes(f[1], u(2), uint16(n), int(n))}}, s.now, s)
	case "giveup":
		s.tr.Answer(Answer{Outcome: AnswerRefused, Session: s.session(f[1]), Range: Range{u(2), u(3)}}, s.now, s)
	case "ended":
		s.tr.Answer(Answer{Outcome: AnswerEnded, Session: s.session(f[1]), Next: u(2)}, s.now, s)
	case "retry":
		s.tr.Answer(Answer{Outcome: AnswerRetry, Session: s.session(f[1]), Range: Range{u(2), u(3)}}, s.now, s)
	case "resync":
		for seq := uint64(1); seq < u(2); seq++ {
			s.m.mark(s.session(f[1]), seq)
		}
		s.tr.Answer(Answer{Outcome: AnswerSnapshot, Session: s.session(f[1]), Next: u(2)}, s.now, s)
	case "stats":
		st := s.tr.Stats()
		s.m.check(s.t, cmd, st)
		s.out = append(s.out, fmt.Sprintf("released=%d lost=%d dup-msgs=%d dup-packets=%d held=%d recovered=%d overflow=%d wins=%d/%d requests=%d",
			st.Messages, st.Missing, st.Duplicates, st.DuplicatePackets, st.Reordered, st.Recovered, st.WindowFull, st.WinsPerLine[0], st.WinsPerLine[1], st.Requests))
		if st.Competing != 0 {
			s.out[len(s.out)-1] += fmt.Sprintf(" competing=%d", st.Competing)
		}
		if st.VettedSessions != 0 || st.Unvetted != 0 {
			s.out[len(s.out)-1] += fmt.Sprintf(" vetted=%d unvetted=%d", st.VettedSessions, st.Unvetted)
		}
	default:
		s.t.Fatalf("unknown command %q", cmd)
	}
	s.flushRel()
	s.requests()
}

func (s *scenario) session(name string) mold.Session {
	sess, err := mold.ParseSession(name)
	if err != nil {
		s.t.Fatal(err)
	}
	return sess
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
