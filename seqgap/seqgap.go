package seqgap

import (
	"fmt"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/mold"
)

// Range is the inclusive range of sequence numbers From..To. Sequence
// numbers start at 1, so the zero Range is empty.
type Range struct {
	From, To uint64
}

// Len returns the number of sequence numbers in r.
func (r Range) Len() uint64 {
	if r.From == 0 || r.To < r.From {
		return 0
	}
	return r.To - r.From + 1
}

func (r Range) String() string { return fmt.Sprintf("%d..%d", r.From, r.To) }

// LineRecovery is the line number of messages that came from recovery.
const LineRecovery = -1

// Config tunes a Tracker. Zero fields take the defaults.
type Config struct {
	// Window is how many sequence numbers ahead of the next one can be held,
	// a power of two in 2..MaxWindow. Default DefaultWindow.
	Window int
	// SlotSize is the bytes reserved per held message, 1..MaxSlotSize; a
	// longer message is held in its own allocation (counted in
	// Stats.OversizeReordered). Default DefaultSlotSize.
	SlotSize int
	// GapDelay is how long a gap waits before it is requested, so that a
	// late packet can close it first. Default DefaultGapDelay (0: request
	// on the next Tick).
	GapDelay time.Duration
	// LostAfter is how long after detection a gap still unfilled is declared
	// lost. Default DefaultLostAfter.
	LostAfter time.Duration
	// MaxGaps bounds the gap list; when it is full, a new gap is merged
	// into the last one. Default DefaultMaxGaps.
	MaxGaps int
	// StaleAfter is how long without any packet makes the channel stale.
	// Default DefaultStaleAfter.
	StaleAfter time.Duration
	// Recovery says that the caller serves the tracker's requests
	// (Tracker.Requests) and hands back the answers (Tracker.Answer).
	// Without it nothing is requested: gaps wait LostAfter for late packets
	// and are then lost, and a late join's prefix is lost at once.
	Recovery bool
	// ConfirmFirst, with Recovery, vets the first session the tracker
	// meets against the one recovery names, without making the session
	// the channel publishes wait for the control plane. Before any packet
	// arrives the tracker asks recovery which session the channel
	// publishes (Probe). A first session that recovery named already is
	// confirmed and flows at once; so does one met before recovery could
	// tell (no answer yet, no session yet): the answer, when it comes,
	// confirms it or replaces it by the one named (a session change,
	// reported with the replaced session as competing). Only a first
	// session other than the one recovery named is held (in the window,
	// as a late join's wait for its snapshot) until recovery answers the
	// query it starts, or StaleAfter passes: when the answer names another
	// session, the one met first was a competing publisher's, its held
	// messages are dropped, none was delivered, and it is reported as
	// competing (EventCompeting) while the tracker follows the named one.
	// That wait, one recovery round trip on a control plane known to
	// answer, is counted (Stats.VettedSessions).
	ConfirmFirst bool
	// ReplayJoin makes a session first met further in than the window
	// reaches an ordinary gap 1..S-1, asked for in ranges as the window
	// moves, instead of a late join waiting for a snapshot: for a recovery
	// that replays messages and has no snapshot (a MoldUDP64 re-request
	// server). The caller keeps packets that do not fit the window out of
	// Packet meanwhile (see Fits), or they declare the front of the window
	// lost.
	ReplayJoin bool
	// StartWhereMet starts the first session the tracker meets at the
	// first data packet's sequence, as if the messages before it had been
	// released: nothing before it is asked for or counted missing. For a
	// replay that starts where its user asked (subscriber --replay-from);
	// later sessions start at 1 as usual.
	StartWhereMet bool
	// Trim, if set, is applied to every message of a packet before it is
	// held or released: a subscriber of tickcast's feed cuts the padding a
	// publisher may add to a packet's last message (feed.Trim), so that
	// held messages fit their slots and handlers see each message at its
	// size. It must return a prefix of its argument and not allocate.
	Trim func(msg []byte) []byte
	// UnsealedControl says that data packets are authenticated (package
	// seal) and heartbeats and ends of session are not: anyone could send
	// them. Of the session followed, such a packet keeps the channel
	// fresh, and what it claims (a later sequence number, the end of the
	// session) is checked with recovery, by a probe past the highest
	// sequence known, before it is believed: the answer's messages extend
	// the stream, and a session that ended says so. Of any other session,
	// or before a session, it is ignored (Stats.UnsealedIgnored). Without
	// Recovery there is nothing to check with, and such packets are taken
	// as they are (as without UnsealedControl): a real lost tail must not
	// go unreported, so a forged one can make messages reported lost.
	UnsealedControl bool
}

// Defaults of a Config, and limits.
const (
	// DefaultWindow is the default Config.Window: about half a second of
	// a busy channel.
	DefaultWindow = 131072
	// MaxWindow is the largest Config.Window.
	MaxWindow = 1 << 24
	// DefaultSlotSize is the default Config.SlotSize, which holds every
	// version-1 normalized message.
	DefaultSlotSize = 80
	// MaxSlotSize is the largest Config.SlotSize.
	MaxSlotSize = 65535
	// DefaultGapDelay is the default Config.GapDelay: request at once.
	DefaultGapDelay = 0
	// DefaultLostAfter is the default Config.LostAfter.
	DefaultLostAfter = time.Second
	// DefaultMaxGaps is the default Config.MaxGaps.
	DefaultMaxGaps = 1024
	// DefaultStaleAfter is the default Config.StaleAfter: three 100 ms
	// heartbeat intervals.
	DefaultStaleAfter = 300 * time.Millisecond
)

var check = config.Checker{Pkg: "seqgap", Struct: "Config"}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.Window, DefaultWindow)
	config.Default(&c.SlotSize, DefaultSlotSize)
	config.Default(&c.GapDelay, DefaultGapDelay)
	config.Default(&c.LostAfter, DefaultLostAfter)
	config.Default(&c.MaxGaps, DefaultMaxGaps)
	config.Default(&c.StaleAfter, DefaultStaleAfter)
	return c
}

// validate checks a Config whose defaults are set.
func (c Config) validate() error {
	switch {
	case c.Window < 2 || c.Window&(c.Window-1) != 0 || c.Window > MaxWindow:
		return check.Invalid("Window", c.Window, "want a power of two in 2..%d", MaxWindow)
	case c.SlotSize < 0 || c.SlotSize > MaxSlotSize:
		return check.Invalid("SlotSize", c.SlotSize, "want 1..%d", MaxSlotSize)
	case c.GapDelay < 0:
		return check.Invalid("GapDelay", c.GapDelay, "negative")
	case c.LostAfter < 0:
		return check.Invalid("LostAfter", c.LostAfter, "negative")
	case c.MaxGaps < 1:
		return check.Invalid("MaxGaps", c.MaxGaps, "want 1 or more")
	case c.StaleAfter < 0:
		return check.Invalid("StaleAfter", c.StaleAfter, "negative")
	}
	return nil
}

// Request is a range the tracker asks recovery for. The caller takes the
// requests from the tracker's outbox (Tracker.Requests), sends each once, and
// hands every answer back through Tracker.Answer.
type Request struct {
	Session mold.Session
	Range   Range
	// Snapshot marks a late join's prefix: it is best answered with the
	// channel's snapshot (AnswerSnapshot). A recovery without snapshots
	// may replay the range instead.
	Snapshot bool
	// Query asks which session the channel publishes, not for messages
	// (Range is empty; Session is the one followed). It is answered with
	// AnswerSession.
	Query bool
}

// Outcome says how recovery answered a request.
type Outcome uint8

// Outcomes of a request.
const (
	// AnswerPackets: Answer.Packets carry recovered messages of the range.
	AnswerPackets Outcome = iota + 1
	// AnswerSnapshot: the caller applied the channel's snapshot, which
	// reflects every message before Answer.Next; the stream resumes there.
	// Messages and gaps below Next are dropped without being reported lost;
	// held ones from Next on stay.
	AnswerSnapshot
	// AnswerRefused: recovery cannot serve the range (unknown session, too
	// old, nothing there yet): the gaps' parts it covers are lost as soon as
	// the stream reaches them (at a Tick); other parts may still come.
	AnswerRefused
	// AnswerRetry: the request failed in transit (timed out, nobody
	// answered, queue full): the gaps it touches are asked for again at the
	// next Tick, within their LostAfter deadline.
	AnswerRetry
	// AnswerEnded: the session has ended and Answer.Next is one past its
	// last message; the range is refused as with AnswerRefused. It acts as
	// an end-of-session packet would (a tail gap if messages are missing,
	// EventSessionEnd once): a subscriber that lost every end-of-session
	// packet still learns the end.
	AnswerEnded
	// AnswerSession answers a Query: Answer.Session is the session
	// recovery says the channel publishes, or zero when it could not tell
	// (no answer, no session yet). A named session other than the one
	// followed replaces it, as a packet of a new session would; the one
	// named is confirmed, and a competing session never replaces it while
	// it is alive.
	AnswerSession
)

var outcomeNames = [...]string{"", "packets", "snapshot", "refused", "retry", "ended", "session"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Answer is recovery's answer to a Request (see Tracker.Answer).
type Answer struct {
	Outcome Outcome
	Session mold.Session
	Range   Range // the range that was asked for
	// Packets are MoldUDP64 packets of recovered messages (AnswerPackets).
	Packets [][]byte
	// Next is the sequence after the snapshot (AnswerSnapshot), or one past
	// the session's last message (AnswerEnded).
	Next uint64
}

// Output receives what the tracker releases, in order.
type Output interface {
	// Release hands over message seq. msg is valid only during the call.
	// line is the line it arrived on, or LineRecovery.
	Release(seq uint64, msg []byte, line int, recvNs int64)
	// Event reports a stream event; ev is valid only during the call.
	Event(ev *Event)
}

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	EventSessionStart  EventKind = iota + 1 // first packet of a session
	EventSessionEnd                         // end of session arrived; LastSeq is the last sequence
	EventSessionAbrupt                      // the session was replaced without end of session; LastSeq is the last known
	EventGap                                // Range went missing (detected)
	EventLost                               // Range is lost for good; Reason says why
	EventStale                              // nothing received for StaleAfter
	EventFresh                              // packets again after EventStale
	// EventCompeting: a packet of another session arrived while the
	// current one is alive and not replaced (see Tracker.Packet); Session
	// is the competing one. Reported once for each competing session in a
	// row; its packets are counted (Stats.Competing) and dropped.
	EventCompeting
	// EventSessionNamed: before the channel's first packet, recovery named
	// Session as the one the channel publishes (see Tracker.Probe).
	EventSessionNamed
)

var eventNames = [...]string{"", "session-start", "session-end", "session-abrupt", "gap", "lost", "stale", "fresh", "competing", "session-named"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k != 0 {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// LossReason says why a range was declared lost.
type LossReason uint8

// Loss reasons.
const (
	LossTimeout         LossReason = iota + 1 // not filled within LostAfter
	LossRefused                               // recovery gave up on it
	LossSessionReplaced                       // a new session began first
	LossWindowFull                            // a message arrived more than Window ahead
	// LossSkipped: the caller started the stream past it on purpose (an
	// operator's choice to start mid-session). The tracker itself never
	// reports it.
	LossSkipped
)

var reasonNames = [...]string{"", "timeout", "refused", "session-replaced", "window-full", "skipped"}

func (r LossReason) String() string {
	if int(r) < len(reasonNames) && r != 0 {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Event is a stream event.
type Event struct {
	Kind    EventKind
	Line    int // the line whose packet caused it, or LineRecovery
	Session mold.Session
	Range   Range      // EventGap, EventLost
	LastSeq uint64     // EventSessionEnd, EventSessionAbrupt
	Reason  LossReason // EventLost
}

// Stats are a tracker's cumulative counters. A counter the subscriber
// reports has the name of its JSON summary key (Reordered is "reordered",
// WindowFull "window_full", Missing "missing") in tickcast.SubscriberStats
// too; see its doc for the Prometheus names.
type Stats struct {
	Packets          uint64    // packets taken, all lines
	PacketsOnLine    [2]uint64 // per line
	WinsPerLine      [2]uint64 // packets that brought at least one new message, per line
	Heartbeats       uint64
	DuplicatePackets uint64 // packets that brought nothing new
	Duplicates       uint64 // messages dropped as already released or waiting in the window
	Messages         uint64 // messages released
	Reordered        uint64 // messages that arrived early and waited in the window
	Recovered        uint64 // messages released that came from recovery
	WindowFull       uint64 // messages that arrived beyond the window and forced a loss
	UnsealedIgnored  uint64 // unauthenticated heartbeats and ends of session of another session, or before one (Config.UnsealedControl)
	// OversizeReordered counts the Reordered messages larger than
	// SlotSize, each kept in its own allocation.
	OversizeReordered uint64
	Gaps              uint64 // gaps detected
	Requests          uint64 // ranges requested (probes not included)
	Missing           uint64 // messages declared lost (EventLost), for good
	LostRanges        uint64 // EventLost events
	Sessions          uint64 // sessions started
	SessionsAbrupt    uint64 // sessions replaced without end of session
	Stale             uint64 // times the stream went stale (EventStale)
	IgnoredRecov      uint64 // recovered messages of another session or already had
	Probes            uint64 // requests past the known end of a stale stream
	Implausible       uint64 // packets dropped for an impossible sequence (0, or a leap past maxJump)
	Competing         uint64 // packets of a competing session, dropped (EventCompeting)
	Queries           uint64 // session queries made (Request.Query)
	// VettedSessions counts first sessions held for recovery's answer
	// because recovery had named another one (ConfirmFirst).
	VettedSessions uint64
	// Unvetted counts messages released of a session that recovery then
	// replaced by another one it named: messages of a competing publisher
	// that was alone on the group while recovery could not yet tell.
	Unvetted uint64
}

// maxJump is the largest forward leap of sequence a packet of the current
// session may make.
const maxJump = 1 << 32

// probeLen is how many messages past the known end a stale stream's probe
// asks for (the recovery answers with those that exist).
const probeLen = 10000

type held struct {
	seq    uint64 // 0 when empty
	n      int32
	line   int32
	recvNs int64
	big    []byte // when n > SlotSize
}

// join is the prefix 1..S-1 of a session first met at sequence S, too long
// for the window. With recovery, live messages are held (not released)
// until the snapshot that covers the prefix arrives, so the handler gets the
// state first and then the stream after it.
type join struct {
	pending    bool
	r          Range
	deadlineNs int64
	refused    bool
}

type gap struct {
	from, to   uint64
	detectedNs int64
	deadlineNs int64
	reqTo      uint64 // highest sequence requested so far, 0 if none
	refused    Range  // the part recovery gave up on (zero: none)
	retry      bool   // asked again after a failed request: no new deadline
}

// Tracker follows one channel. It is used by one goroutine.
type Tracker struct {
	cfg       Config
	session   mold.Session
	started   bool
	ended     bool
	stale     bool
	next      uint64
	high      uint64
	lastNs    int64
	probeNs   int64 // last probe of a stale stream
	claimNs   int64 // last probe started by an unsealed heartbeat or end of session
	claimed   bool  // claimNs is set
	window    []held
	data      []byte
	mask      uint64
	gaps      []gap // ring of MaxGaps entries, ordered by from
	gapHead   int
	gapCount  int
	heldCount int
	join      join         // a late join's missing prefix, when pending
	sessNs    int64        // last packet of the current session
	confirmed bool         // recovery named the current session (AnswerSession)
	vetting   bool         // ConfirmFirst: the first session waits for the query's answer
	vetNs     int64        // when vetting started
	known     mold.Session // before the first packet: the session recovery named (Probe)
	asking    bool         // a session query is out
	asked     bool         // a query was made for the current session, at askNs
	askNs     int64
	rival     mold.Session // the competing session reported last
	ev        Event        // scratch: events are passed by pointer, never escape
	outbox    []Request    // requests not yet taken (Requests); reused
	stats     Stats
}

// New returns a tracker.
func New(cfg Config) (*Tracker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Tracker{
		cfg:    cfg,
		outbox: make([]Request, 0, outboxCap),
		window: make([]held, cfg.Window),
		data:   make([]byte, cfg.Window*cfg.SlotSize),
		mask:   uint64(cfg.Window - 1),
		gaps:   make([]gap, cfg.MaxGaps),
		next:   1,
		high:   1,
	}, nil
}

// Session returns the current session and whether one has started.
func (t *Tracker) Session() (mold.Session, bool) { return t.session, t.started }

// Next returns the next sequence the tracker will release.
func (t *Tracker) Next() uint64 { return t.next }

// MustWait reports whether a data packet of session whose messages are
// seq..seq+n-1 should stay in the transport's queue for now: a late join
// holds live messages for its snapshot (see AnswerSnapshot), and the packet reaches
// beyond what the window can hold, so taking it would force the join's
// prefix to be declared lost although its snapshot may be on the way. A
// consumer that leaves it queued, lets recovery answers in and asks again
// loses nothing; the join's deadline (LostAfter) still bounds the wait.
func (t *Tracker) MustWait(session mold.Session, seq uint64, n int) bool {
	if !t.holding() || session != t.session || n == 0 {
		return false
	}
	return seq+uint64(n)-1 >= t.next+uint64(len(t.window))
}

// Fits reports whether the messages seq..seq+n-1 lie within the window as
// it stands, so that Packet can take them without declaring anything lost
// for room (window-full).
func (t *Tracker) Fits(seq uint64, n int) bool {
	return n == 0 || seq+uint64(n)-1 < t.next+uint64(len(t.window))
}

// High returns one past the highest sequence known to exist.
func (t *Tracker) High() uint64 { return t.high }

// Ended reports whether the current session's end of session arrived.
func (t *Tracker) Ended() bool { return t.ended }

// Complete reports whether the session ended and nothing is outstanding.
func (t *Tracker) Complete() bool {
	return t.ended && t.next == t.high && t.gapCount == 0 && !t.join.pending
}

// Stale reports whether the channel is silent (see Config.StaleAfter).
func (t *Tracker) Stale() bool { return t.stale }

// Outstanding returns the number of open gaps and held messages.
func (t *Tracker) Outstanding() (gaps, held int) { return t.gapCount, t.heldCount }

// Stats returns the counters.
func (t *Tracker) Stats() Stats { return t.stats }

// Requests returns the requests made since the last call, oldest first, and
// empties the outbox: each request is handed out once. The slice is the
// tracker's own buffer, reused so that requesting allocates nothing: it is
// valid until the next call into the tracker.
func (t *Tracker) Requests() []Request {
	r := t.outbox
	t.outbox = t.outbox[:0]
	return r
}

// outboxCap is the outbox's initial capacity; it grows (once) if a Tick
// requests more ranges than that.
const outboxCap = 16

// request puts r in the outbox.
func (t *Tracker) request(r Range, snapshot bool) {
	t.outbox = append(t.outbox, Request{Session: t.session, Range: r, Snapshot: snapshot})
}

// Released returns how many messages the tracker has released (the cheap
// form of Stats().Released, for loops that check it per packet).
func (t *Tracker) Released() uint64 { return t.stats.Messages }

func (t *Tracker) emit(kind EventKind, line int) *Event {
	t.ev = Event{Kind: kind, Line: line, Session: t.session}
	return &t.ev
}

// Packet takes one packet received on line (0 = A, 1 = B) at recvNs; nowNs
// is the caller's clock (the same clock as Tick's).
func (t *Tracker) Packet(line int, p mold.Packet, recvNs, nowNs int64, out Output) {
	t.stats.Packets++
	t.stats.PacketsOnLine[line&1]++
	if t.cfg.UnsealedControl && t.cfg.Recovery && (p.IsHeartbeat() || p.IsEndOfSession()) {
		t.unsealedControl(line, p, nowNs, out)
		return
	}
	if t.started && p.Session != t.session && !t.replaceable(nowNs) {
		// Not the stream followed: it neither keeps the channel fresh nor
		// moves it.
		t.compete(line, p.Session, nowNs, out)
		return
	}
	t.heard(line, nowNs, out)
	if p.Seq == 0 || (t.started && p.Session == t.session && t.high > 1 && p.Seq-t.high > maxJump && p.Seq > t.high) {
		// Sequence 0 does not exist, and a stream does not leap four
		// billion messages: such a packet would declare everything lost.
		// It is dropped and counted, not believed.
		t.stats.Implausible++
		return
	}
	if !t.started || p.Session != t.session {
		first := !t.started
		t.newSession(line, p.Session, nowNs, out)
		switch {
		case first && t.cfg.ConfirmFirst && t.cfg.Recovery && t.known == p.Session:
			// Recovery named this session before it arrived.
			t.confirmed = true
		case first && t.cfg.ConfirmFirst && t.cfg.Recovery && t.known != (mold.Session{}):
			// Recovery named another session: this one waits for its
			// word, one round trip to a control plane that answers.
			t.vetting, t.vetNs = true, nowNs
			t.stats.VettedSessions++
			t.query(nowNs)
		default:
			t.query(nowNs) // with recovery, a session is confirmed, not assumed
		}
		if first && t.cfg.StartWhereMet && p.Seq > 1 && !p.IsHeartbeat() && !p.IsEndOfSession() {
			// A replay from a chosen place: the stream starts here.
			t.next, t.high = p.Seq, p.Seq
		}
	}
	t.sessNs = nowNs
	if t.next == 1 && t.high == 1 && !t.join.pending && p.Seq > uint64(len(t.window)) && !t.cfg.ReplayJoin {
		// The session's first packet is further in than the window reaches:
		// a late join.
		t.startJoin(line, p.Seq, nowNs, out)
	}
	if p.IsHeartbeat() || p.IsEndOfSession() {
		if p.IsHeartbeat() {
			t.stats.Heartbeats++
		}
		t.learnHigh(line, p.Seq, nowNs, out)
		if p.IsEndOfSession() && !t.ended {
			t.ended = true
			ev := t.emit(EventSessionEnd, line)
			ev.LastSeq = p.Seq - 1
			out.Event(ev)
		}
		return
	}
	end := p.Seq + uint64(p.Messages())
	if end <= t.next {
		t.stats.DuplicatePackets++
		t.stats.Duplicates += uint64(p.Messages())
		return
	}
	if p.Seq > t.high {
		t.addGap(line, max(t.high, t.next), p.Seq-1, nowNs, out)
	}
	if w := uint64(len(t.window)); end-1 >= t.next+w {
		// The packet reaches beyond the window, which is full of what waits
		// behind the oldest gap. Keeping what arrived matters more than
		// waiting for that gap: the front of the window is declared lost
		// (window-full), once for the packet, until the packet fits.
		// Never past the packet's own first message: those are here.
		t.stats.WindowFull++
		if t.join.pending {
			t.loseJoin(LossWindowFull, out)
		}
		if cut := min(end-1-w, p.Seq-1); end-1 >= t.next+w && cut >= t.next {
			t.loseThrough(cut, LossWindowFull, out)
		}
	}
	newMsgs := t.take(p, line, recvNs, nowNs, out)
	if end > t.high {
		t.high = end
	}
	if newMsgs > 0 {
		t.stats.WinsPerLine[line&1]++
	} else {
		t.stats.DuplicatePackets++
	}
}

// take releases or holds the messages of p; it returns how many were new.
func (t *Tracker) take(p mold.Packet, line int, recvNs, nowNs int64, out Output) int {
	it := p.Iter()
	fresh := 0
	w := uint64(len(t.window))
	for msg, seq, ok := it.Next(); ok; msg, seq, ok = it.Next() {
		if t.cfg.Trim != nil {
			msg = t.cfg.Trim(msg)
		}
		switch {
		case seq < t.next:
			t.stats.Duplicates++
			continue
		case seq == t.next && !t.holding():
			fresh++
			t.release(seq, msg, line, recvNs, out)
			t.drain(out)
			continue
		case seq-t.next >= w:
			if line == LineRecovery {
				// Recovery is only asked for what fits the window, so this
				// answers a request from before the window moved: ignore it.
				t.stats.IgnoredRecov++
				continue
			}
			// Packet made room for the whole packet; this is only reached
			// when that could not be done in one step.
			if t.join.pending {
				t.loseJoin(LossWindowFull, out)
			}
			t.loseThrough(seq-w, LossWindowFull, out)
			if seq == t.next {
				fresh++
				t.release(seq, msg, line, recvNs, out)
				t.drain(out)
				continue
			}
		}
		if t.hold(seq, msg, line, recvNs) {
			fresh++
		} else {
			t.stats.Duplicates++
		}
	}
	t.trimGaps()
	return fresh
}

func (t *Tracker) release(seq uint64, msg []byte, line int, recvNs int64, out Output) {
	t.stats.Messages++
	if line == LineRecovery {
		t.stats.Recovered++
	}
	out.Release(seq, msg, line, recvNs)
	t.next = seq + 1
}

// hold copies message seq into the window; false if it is already there.
func (t *Tracker) hold(seq uint64, msg []byte, line int, recvNs int64) bool {
	h := &t.window[seq&t.mask]
	if h.seq == seq {
		return false
	}
	h.seq, h.n, h.line, h.recvNs = seq, int32(len(msg)), int32(line), recvNs
	if len(msg) > t.cfg.SlotSize {
		// Rare: a message larger than the slots (a newer message version).
		h.big = append(h.big[:0], msg...)
		t.stats.OversizeReordered++
	} else {
		off := int(seq&t.mask) * t.cfg.SlotSize
		copy(t.data[off:off+len(msg)], msg)
	}
	t.heldCount++
	t.stats.Reordered++
	return true
}

// drain releases held messages from next on while they are contiguous.
func (t *Tracker) drain(out Output) {
	if t.holding() {
		return
	}
	for t.heldCount > 0 {
		h := &t.window[t.next&t.mask]
		if h.seq != t.next {
			return
		}
		t.releaseHeld(h, out)
	}
}

func (t *Tracker) releaseHeld(h *held, out Output) {
	seq := h.seq
	var msg []byte
	if int(h.n) > t.cfg.SlotSize {
		msg = h.big[:h.n]
	} else {
		off := int(seq&t.mask) * t.cfg.SlotSize
		msg = t.data[off : off+int(h.n)]
	}
	h.seq = 0
	t.heldCount--
	t.release(seq, msg, int(h.line), h.recvNs, out)
}

// holding reports whether live messages wait: for a late join's snapshot,
// or for recovery to confirm the first session (ConfirmFirst).
func (t *Tracker) holding() bool { return (t.join.pending || t.vetting) && t.cfg.Recovery }

// endVetting releases what the first session held while recovery was asked
// to confirm it.
func (t *Tracker) endVetting(out Output) {
	if t.vetting {
		t.vetting = false
		t.drain(out)
	}
}

// dropHeld empties the window.
func (t *Tracker) dropHeld() {
	for i := 0; t.heldCount > 0 && i < len(t.window); i++ {
		if h := &t.window[i]; h.seq != 0 {
			h.seq = 0
			t.heldCount--
		}
	}
	t.heldCount = 0
}

// startJoin records the prefix 1..start-1 of a session met late and asks
// recovery for it (the snapshot, when the recovery offers one); the stream
// resumes at start.
func (t *Tracker) startJoin(line int, start uint64, nowNs int64, out Output) {
	t.join = join{pending: true, r: Range{1, start - 1}, deadlineNs: nowNs + int64(t.cfg.LostAfter)}
	t.next, t.high = start, start
	t.stats.Gaps++
	ev := t.emit(EventGap, line)
	ev.Range = t.join.r
	out.Event(ev)
	if !t.cfg.Recovery {
		return
	}
	t.stats.Requests++
	t.request(t.join.r, true)
}

// loseJoin reports a late join's prefix lost and releases what was held.
func (t *Tracker) loseJoin(reason LossReason, out Output) {
	r := t.join.r
	t.join = join{}
	t.stats.Missing += r.Len()
	t.stats.LostRanges++
	ev := t.emit(EventLost, LineRecovery)
	ev.Range, ev.Reason = r, reason
	out.Event(ev)
	t.drain(out)
}

// learnHigh takes the publisher's next sequence from a heartbeat or end of
// session.
func (t *Tracker) learnHigh(line int, nextSeq uint64, nowNs int64, out Output) {
	if nextSeq > t.high {
		t.addGap(line, max(t.high, t.next), nextSeq-1, nowNs, out)
		t.high = nextSeq
	}
}

// addGap records [from, to] as missing (coalescing with the last gap).
func (t *Tracker) addGap(line int, from, to uint64, nowNs int64, out Output) {
	if to < from || to < t.next {
		return
	}
	from = max(from, t.next)
	t.stats.Gaps++
	ev := t.emit(EventGap, line)
	ev.Range = Range{from, to}
	out.Event(ev)
	if t.gapCount > 0 {
		last := &t.gaps[(t.gapHead+t.gapCount-1)%len(t.gaps)]
		if from <= last.to+1 || t.gapCount == len(t.gaps) {
			// Adjacent, overlapping or out of room: widen the last gap. It
			// keeps its own (earlier) deadlines.
			last.to = max(last.to, to)
			return
		}
	}
	g := &t.gaps[(t.gapHead+t.gapCount)%len(t.gaps)]
	*g = gap{from: from, to: to, detectedNs: nowNs, deadlineNs: nowNs + int64(t.cfg.LostAfter)}
	t.gapCount++
}

// trimGaps drops gaps that next has passed and shrinks the first to start at
// next.
func (t *Tracker) trimGaps() {
	for t.gapCount > 0 {
		g := &t.gaps[t.gapHead]
		if g.to >= t.next {
			if g.from < t.next {
				g.from = t.next
			}
			return
		}
		t.gapHead = (t.gapHead + 1) % len(t.gaps)
		t.gapCount--
	}
}

// Tick enforces the deadlines at nowNs: it reports a silent channel stale
// (and probes its tail), declares lost what is past LostAfter or refused,
// and requests gaps that are GapDelay old. Call it from the receive loop, as
// often as convenient.
func (t *Tracker) Tick(nowNs int64, out Output) {
	if t.vetting && nowNs-t.vetNs >= int64(t.cfg.StaleAfter) {
		t.endVetting(out) // recovery did not answer: follow what was met
	}
	t.checkStale(nowNs, out)
	t.probeSilentTail(nowNs)
	t.expireJoin(nowNs, out)
	t.resolveHeadGaps(nowNs, out)
	t.requestGaps(nowNs)
}

// checkStale reports the channel stale once nothing arrived for StaleAfter.
func (t *Tracker) checkStale(nowNs int64, out Output) {
	if t.started && !t.stale && nowNs-t.lastNs >= int64(t.cfg.StaleAfter) {
		t.stale = true
		t.stats.Stale++
		out.Event(t.emit(EventStale, LineRecovery))
	}
}

// unsealedControl takes a heartbeat or end of session that is not
// authenticated (Config.UnsealedControl): of the session followed, it keeps
// the channel fresh, and a later sequence or an end it claims starts a
// probe of recovery, at most one per claimProbeEvery; anything else is
// ignored.
func (t *Tracker) unsealedControl(line int, p mold.Packet, nowNs int64, out Output) {
	if !t.started || p.Session != t.session {
		t.stats.UnsealedIgnored++
		return
	}
	t.heard(line, nowNs, out)
	if p.IsHeartbeat() {
		t.stats.Heartbeats++
	}
	claims := p.Seq > t.high || p.IsEndOfSession() && !t.ended
	if !claims || t.ended || t.claimed && nowNs-t.claimNs < int64(claimProbeEvery) {
		return
	}
	t.claimed, t.claimNs = true, nowNs
	t.probeTail()
}

// heard notes a packet of the followed stream at nowNs: the channel is
// fresh again if it was stale.
func (t *Tracker) heard(line int, nowNs int64, out Output) {
	t.lastNs = nowNs
	if t.stale {
		t.stale = false
		out.Event(t.emit(EventFresh, line))
	}
}

// claimProbeEvery bounds how often unsealed heartbeats and ends of session
// start a probe of recovery, so that a flood of forged ones costs at most
// 100 probes a second per channel.
const claimProbeEvery = 10 * time.Millisecond

// probeSilentTail asks recovery, once per StaleAfter, for what follows high
// on a stale stream that has not ended: silence may hide a lost tail
// (heartbeats lost too). A reply with messages extends the stream; one that
// there is nothing yet is refused without effect.
func (t *Tracker) probeSilentTail(nowNs int64) {
	if !t.stale || t.ended || !t.cfg.Recovery || nowNs-t.probeNs < int64(t.cfg.StaleAfter) {
		return
	}
	t.probeNs = nowNs
	t.probeTail()
}

// probeTail asks recovery for what follows high, as far as the window
// reaches: an answer beyond it could not be held.
func (t *Tracker) probeTail() {
	if limit := t.next + uint64(len(t.window)) - 1; t.high <= limit {
		t.stats.Probes++
		t.request(Range{t.high, min(t.high+probeLen-1, limit)}, false)
	}
}

// expireJoin declares a late join's prefix lost once its deadline passed
// (at once when recovery refused it).
func (t *Tracker) expireJoin(nowNs int64, out Output) {
	if !t.join.pending || nowNs < t.join.deadlineNs {
		return
	}
	reason := LossTimeout
	if t.join.refused {
		reason = LossRefused
	}
	t.loseJoin(reason, out)
}

// resolveHeadGaps settles the gaps at the head of the list, in order: a part
// recovery refused is lost as soon as the stream reaches it (what lies
// before it may still come); the whole gap is lost once LostAfter has
// passed.
func (t *Tracker) resolveHeadGaps(nowNs int64, out Output) {
	for t.gapCount > 0 {
		g := &t.gaps[t.gapHead]
		if g.refused.From != 0 && t.next >= g.refused.From {
			to := g.refused.To
			g.refused = Range{}
			t.loseThrough(to, LossRefused, out)
			continue
		}
		if nowNs < g.deadlineNs {
			return
		}
		t.loseThrough(g.to, LossTimeout, out)
	}
}

// requestGaps requests what is GapDelay old and not yet requested, as far as
// the window reaches: an answer beyond it could not be held. The rest is
// requested as the window moves, each extension with a fresh deadline.
func (t *Tracker) requestGaps(nowNs int64) {
	if !t.cfg.Recovery {
		return
	}
	limit := t.next + uint64(len(t.window)) - 1
	for i := 0; i < t.gapCount; i++ {
		g := &t.gaps[(t.gapHead+i)%len(t.gaps)]
		from := max(g.from, g.reqTo+1, t.next)
		to := min(g.to, limit)
		if from > to {
			if g.from > limit {
				return
			}
			continue
		}
		if nowNs-g.detectedNs < int64(t.cfg.GapDelay) {
			continue
		}
		if g.reqTo != 0 && !g.retry {
			g.deadlineNs = max(g.deadlineNs, nowNs+int64(t.cfg.LostAfter))
		}
		g.retry = false
		g.reqTo = to
		t.stats.Requests++
		t.request(Range{from, to}, false)
	}
}

// loseThrough releases what is held up to and including seq to, reports the
// rest of [next, to] lost, and moves next past to.
func (t *Tracker) loseThrough(to uint64, reason LossReason, out Output) {
	var run Range
	flush := func() {
		if run.From != 0 {
			t.stats.Missing += run.Len()
			t.stats.LostRanges++
			ev := t.emit(EventLost, LineRecovery)
			ev.Range, ev.Reason = run, reason
			out.Event(ev)
			run = Range{}
		}
	}
	for t.next <= to {
		h := &t.window[t.next&t.mask]
		if t.heldCount > 0 && h.seq == t.next {
			flush()
			t.releaseHeld(h, out)
			continue
		}
		if t.heldCount == 0 {
			// Nothing held: the rest of the range is one lost run.
			if run.From == 0 {
				run.From = t.next
			}
			run.To = to
			t.next = to + 1
			break
		}
		if run.From == 0 {
			run.From = t.next
		}
		run.To = t.next
		t.next++
	}
	flush()
	t.drain(out)
	t.trimGaps()
}

// Answer takes recovery's answer to one of the tracker's requests, whatever
// its outcome; nowNs is the caller's clock (Tick's).
func (t *Tracker) Answer(a Answer, nowNs int64, out Output) {
	switch a.Outcome {
	case AnswerPackets:
		for _, b := range a.Packets {
			if p, err := mold.Parse(b); err == nil {
				t.recovered(a.Session, p, nowNs, out)
			}
		}
	case AnswerSnapshot:
		t.resync(a.Session, a.Next, nowNs, out)
	case AnswerRefused:
		t.refuse(a.Session, a.Range, nowNs)
	case AnswerRetry:
		t.retry(a.Session, a.Range)
	case AnswerEnded:
		t.endOfSession(a.Session, a.Next, nowNs, out)
		t.refuse(a.Session, a.Range, nowNs)
	case AnswerSession:
		t.confirm(a.Session, nowNs, out)
	}
}

// Confirmed reports whether recovery named the current session as the one
// the channel publishes (see AnswerSession).
func (t *Tracker) Confirmed() bool { return t.confirmed }

// replaceable reports whether a packet of another session may replace the
// current one: the current one ended, or sent nothing for StaleAfter.
// Otherwise the two interleave, and only recovery can say which is the
// channel's (AnswerSession).
func (t *Tracker) replaceable(nowNs int64) bool {
	return t.ended || nowNs-t.sessNs >= int64(t.cfg.StaleAfter)
}

// compete counts and drops a packet of session, which competes with the
// current one, reports the session (once while it is the last competitor)
// and asks recovery which of them is the channel's: while the current one
// is not confirmed, and for each new competitor.
func (t *Tracker) compete(line int, session mold.Session, nowNs int64, out Output) {
	t.stats.Competing++
	fresh := session != t.rival
	if fresh {
		t.rival = session
		ev := t.emit(EventCompeting, line)
		ev.Session = session
		out.Event(ev)
	}
	if !t.confirmed || fresh {
		// A new competitor may be the publisher restarted: recovery knows.
		t.query(nowNs)
	}
}

// query asks recovery which session the channel publishes: one query at a
// time, at most once per StaleAfter for a session.
func (t *Tracker) query(nowNs int64) {
	if !t.cfg.Recovery || t.asking || t.asked && nowNs-t.askNs < int64(t.cfg.StaleAfter) {
		return
	}
	t.asking, t.asked, t.askNs = true, true, nowNs
	t.stats.Queries++
	t.outbox = append(t.outbox, Request{Session: t.session, Query: true})
}

// Probe asks recovery, before the first packet, which session the
// channel publishes (ConfirmFirst with Recovery), so that the first
// session met can be checked against the answer without waiting for it.
// It does nothing once a session has started, or while a query is out.
func (t *Tracker) Probe(nowNs int64) {
	if !t.started && t.cfg.ConfirmFirst {
		t.query(nowNs)
	}
}

// confirm takes recovery's word that session is the channel's (see
// AnswerSession): the current one is confirmed, or replaced by the one
// named.
func (t *Tracker) confirm(session mold.Session, nowNs int64, out Output) {
	t.asking = false
	if !t.started {
		t.known = session // the answer to Probe (zero: no session yet)
		if session != (mold.Session{}) {
			ev := t.emit(EventSessionNamed, LineRecovery)
			ev.Session = session
			out.Event(ev)
		}
		return
	}
	if session == (mold.Session{}) {
		t.endVetting(out)
		return // recovery could not tell: nothing changes
	}
	if session != t.session && t.vetting {
		// The session met first, none of it delivered, is a competitor's:
		// drop what it held and follow the one named, as if it had come
		// first.
		rival := t.session
		t.dropHeld()
		t.started = false
		t.stats.Sessions--
		t.newSession(LineRecovery, session, nowNs, out)
		t.sessNs = nowNs
		t.rival = rival
		ev := t.emit(EventCompeting, LineRecovery)
		ev.Session = rival
		out.Event(ev)
	} else if session != t.session {
		// The session followed is not the one recovery names. Whatever
		// it still lacked is lost to the replacement, as for any session
		// change. One never confirmed that is still sending was a
		// competing publisher's, met while recovery could not yet tell:
		// what it delivered is counted and it is reported as competing.
		replaced, delivered := t.session, t.next-1
		competitor := !t.confirmed && !t.replaceable(nowNs)
		t.newSession(LineRecovery, session, nowNs, out)
		t.sessNs = nowNs
		if competitor {
			t.stats.Unvetted += delivered
			t.rival = replaced
			ev := t.emit(EventCompeting, LineRecovery)
			ev.Session = replaced
			out.Event(ev)
		}
	}
	t.confirmed = true
	t.endVetting(out)
}

// recovered takes a packet of recovered messages for session.
func (t *Tracker) recovered(session mold.Session, p mold.Packet, nowNs int64, out Output) {
	if !t.started || session != t.session || p.Messages() == 0 {
		t.stats.IgnoredRecov += uint64(p.Messages())
		return
	}
	end := p.Seq + uint64(p.Messages())
	if end <= t.next {
		t.stats.IgnoredRecov += uint64(p.Messages())
		return
	}
	if p.Seq > t.high {
		t.addGap(LineRecovery, max(t.high, t.next), p.Seq-1, nowNs, out)
	}
	if lim := t.next + uint64(len(t.window)); end > lim {
		// What the window cannot hold is not dropped in silence: it stays
		// missing, in a gap, and is asked for again as the window moves.
		t.addGap(LineRecovery, max(t.high, lim), end-1, nowNs, out)
	}
	t.take(p, LineRecovery, nowNs, nowNs, out)
	if end > t.high {
		t.high = end
	}
}

// endOfSession takes what recovery says of a session that ended: nextSeq is
// one past its last message (see AnswerEnded).
func (t *Tracker) endOfSession(session mold.Session, nextSeq uint64, nowNs int64, out Output) {
	if !t.started || session != t.session {
		return
	}
	t.learnHigh(LineRecovery, nextSeq, nowNs, out)
	if !t.ended {
		t.ended = true
		ev := t.emit(EventSessionEnd, LineRecovery)
		ev.LastSeq = nextSeq - 1
		out.Event(ev)
	}
}

// refuse records that recovery cannot serve r of session (see
// AnswerRefused).
func (t *Tracker) refuse(session mold.Session, r Range, nowNs int64) {
	if !t.started || session != t.session {
		return
	}
	if t.join.pending && t.join.r.From <= r.To && r.From <= t.join.r.To {
		t.join.deadlineNs = min(t.join.deadlineNs, nowNs)
		t.join.refused = true
	}
	for i := 0; i < t.gapCount; i++ {
		g := &t.gaps[(t.gapHead+i)%len(t.gaps)]
		if g.from <= r.To && r.From <= g.to {
			part := Range{max(r.From, g.from), min(r.To, g.to)}
			if g.refused.From != 0 {
				// Keep one refused range per gap: the span of both.
				part = Range{min(part.From, g.refused.From), max(part.To, g.refused.To)}
			}
			g.refused = part
		}
	}
}

// retry asks again, at the next Tick, for the gaps a request that failed in
// transit touched (see AnswerRetry).
func (t *Tracker) retry(session mold.Session, r Range) {
	if !t.started || session != t.session {
		return
	}
	for i := 0; i < t.gapCount; i++ {
		g := &t.gaps[(t.gapHead+i)%len(t.gaps)]
		if g.from <= r.To && r.From <= g.to && g.reqTo >= r.From {
			g.reqTo = max(r.From, g.from) - 1
			g.retry = true
		}
	}
}

// resync moves the stream of session to next, as after loading a snapshot
// that reflects every message before next (see AnswerSnapshot).
func (t *Tracker) resync(session mold.Session, next uint64, nowNs int64, out Output) {
	if !t.started || session != t.session {
		t.newSession(LineRecovery, session, nowNs, out)
		t.confirmed = true // the snapshot is of the session recovery serves
	}
	if t.join.pending {
		// The snapshot answers the late join's prefix; what it does not
		// reach (a snapshot older than the first live packet) is lost.
		r := t.join.r
		t.join = join{}
		if next <= r.To {
			t.stats.Missing += Range{next, r.To}.Len()
			t.stats.LostRanges++
			ev := t.emit(EventLost, LineRecovery)
			ev.Range, ev.Reason = Range{next, r.To}, LossRefused
			out.Event(ev)
		}
	}
	if next > t.next {
		// Drop what is held below next: the snapshot accounts for it.
		if next-t.next >= uint64(len(t.window)) {
			for i := range t.window {
				if h := &t.window[i]; h.seq != 0 && h.seq < next {
					h.seq = 0
					t.heldCount--
				}
			}
		} else {
			for seq := t.next; seq < next; seq++ {
				if h := &t.window[seq&t.mask]; h.seq == seq {
					h.seq = 0
					t.heldCount--
				}
			}
		}
		t.next = next
	}
	if t.high < next {
		t.high = next
	}
	t.trimGaps()
	// What is still missing after the snapshot is asked for again, with a
	// fresh deadline: the earlier request covered it, but it may have been
	// answered by the snapshot instead.
	for i := 0; i < t.gapCount; i++ {
		g := &t.gaps[(t.gapHead+i)%len(t.gaps)]
		g.reqTo = 0
		g.detectedNs = nowNs
		g.deadlineNs = nowNs + int64(t.cfg.LostAfter)
	}
	t.drain(out)
}

// newSession ends the current stream and starts session.
func (t *Tracker) newSession(line int, session mold.Session, nowNs int64, out Output) {
	if t.started {
		if t.high > t.next || t.gapCount > 0 {
			t.loseThrough(t.high-1, LossSessionReplaced, out)
		}
		if !t.ended {
			t.stats.SessionsAbrupt++
			ev := t.emit(EventSessionAbrupt, line)
			ev.LastSeq = t.high - 1
			out.Event(ev)
		}
	}
	t.session = session
	t.started, t.ended = true, false
	t.next, t.high = 1, 1
	t.gapHead, t.gapCount = 0, 0
	t.join = join{}
	t.confirmed, t.asked = false, false
	if session == t.rival {
		t.rival = mold.Session{}
	}
	t.stats.Sessions++
	out.Event(t.emit(EventSessionStart, line))
}
