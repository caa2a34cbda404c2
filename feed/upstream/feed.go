package upstream

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// maxCount is the largest Config.MaxCount: a request's count field.
const maxCount = mold.MaxCount

// slotSize holds every ITCH 5.0 message in the tracker's window (the
// longest is 50 bytes).
const slotSize = 64

// MaxDatagram is the largest upstream datagram taken, a jumbo frame's
// payload: an exchange's packets fit an Ethernet MTU. A longer one is
// dropped and counted (Stats.Lines' Truncated), and its messages are
// recovered as if it were lost.
const MaxDatagram = 9000

// Receive ring sizes, in datagrams: per line, and for re-request answers.
const (
	lineSlots   = 2048
	answerSlots = 256
)

// LossReasons returns the names of the reasons of Stats.Lost, by index (a
// seqgap.LossReason; index 0 is unused).
func LossReasons() []string {
	r := make([]string, numReasons)
	for i := 1; i < numReasons; i++ {
		r[i] = seqgap.LossReason(i).String()
	}
	return r
}

// numReasons is one more than the largest seqgap.LossReason.
const numReasons = int(seqgap.LossSkipped) + 1

// Stats are a Feed's counters.
type Stats struct {
	// Tracker are the sequence tracker's counters (packets per line,
	// duplicates, gaps, recovered, missing, ...).
	Tracker seqgap.Stats
	// Lines are the line receivers' counters, A then B.
	Lines [2]ud.RecvStats
	// Malformed counts line datagrams that are not MoldUDP64 packets.
	Malformed uint64
	// Deferred counts live data packets beyond the window, taken as word of
	// how far the stream reaches and their messages recovered in turn.
	Deferred uint64
	// Requests counts request packets sent, Retries those among them sent
	// again after a timeout, GaveUp the requests given up after the
	// retries.
	Requests, Retries, GaveUp uint64
	// Answers counts answer packets taken, BadAnswers answer datagrams that
	// are not MoldUDP64 packets, dropped.
	Answers, BadAnswers uint64
	// Lost counts the messages lost for good, by seqgap.LossReason
	// (LossReasons names them). Messages before Config.StartFrom are lost
	// by LossSkipped.
	Lost [numReasons]uint64
}

// DatagramError is a datagram dropped as malformed: on a line, or as a
// re-request answer.
type DatagramError struct {
	Source string // "line A", "line B" or "re-request answer from HOST:PORT"
	Len    int    // the datagram's length
	Err    error  // mold's reason (a *mold.PacketError)
}

func (e *DatagramError) Error() string {
	return fmt.Sprintf("upstream: %s: %d-byte datagram dropped: %v", e.Source, e.Len, e.Err)
}

func (e *DatagramError) Unwrap() error { return e.Err }

// GiveUpError is a re-request given up: sent Tries times, never answered.
type GiveUpError struct {
	Server  netip.AddrPort
	Session mold.Session
	Range   seqgap.Range
	Tries   int
}

func (e *GiveUpError) Error() string {
	return fmt.Sprintf("upstream: re-request of %v session %s to %v given up after %d unanswered tries",
		e.Range, e.Session, e.Server, e.Tries)
}

// item is a message released and waiting for Next, or a loss between two.
type item struct {
	end  int    // end of the message in buf
	seq  uint64 // its sequence
	recv int64  // when it arrived (Release's recvNs)
	lost bool   // a loss marker, not a message
}

// Feed is a live MoldUDP64 feed: its lines, its re-request socket and its
// tracker. It implements itch.MessageReader. Next, Offset and Close belong
// to one goroutine; Stats may be called from any.
type Feed struct {
	cfg     Config
	lines   []*udp.Receiver
	n       *ud.Notifier
	tr      *seqgap.Tracker
	req     *requester // nil without Config.Rerequest
	answers *ud.Ring   // re-request answers, filled by readAnswers
	done    chan struct{}
	wg      sync.WaitGroup

	// Released messages, copied, taken one by one by Next.
	buf   []byte
	items []item
	pos   int
	seq   uint64 // sequence of the last message Next returned
	recv  int64  // when that message arrived
	err   error  // sticky end
	one   [][]byte

	stats    Stats // owned by Next's goroutine
	mu       sync.Mutex
	snapshot Stats // stats as of the last wait, for Stats
	closed   atomic.Bool
}

var _ itch.MessageReader = (*Feed)(nil)

// A Source reads ahead of a Feed only what is pending (itch's look-ahead).
var _ interface{ Pending() bool } = (*Feed)(nil)

// Open joins the lines, opens the re-request socket and returns the feed.
func Open(cfg Config) (*Feed, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = func() int64 { return time.Now().UnixNano() }
	}
	tr, err := seqgap.New(seqgap.Config{Window: cfg.Window, SlotSize: slotSize, LostAfter: cfg.GapDeadline, StaleAfter: cfg.StaleAfter,
		Recovery: cfg.Rerequest.IsValid(), ReplayJoin: true})
	if err != nil {
		return nil, err
	}
	f := &Feed{cfg: cfg, n: ud.NewNotifier(), tr: tr, done: make(chan struct{}),
		buf: make([]byte, 0, 1<<16), items: make([]item, 0, 1024), one: make([][]byte, 1)}
	for _, g := range []netip.AddrPort{cfg.A, cfg.B} {
		if !g.IsValid() {
			continue
		}
		r, err := udp.NewReceiver(udp.Config{Group: g.Addr(), Port: int(g.Port()), Interface: cfg.Interface,
			MaxDatagram: MaxDatagram, RingSlots: lineSlots, Notifier: f.n})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("upstream: line %v: %w", g, err)
		}
		f.lines = append(f.lines, r)
	}
	if cfg.Rerequest.IsValid() {
		conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Interface, 0)))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("upstream: re-request socket: %w", err)
		}
		ring, err := ud.NewRing(answerSlots, MaxDatagram)
		if err != nil {
			conn.Close()
			f.Close()
			return nil, err
		}
		ring.SetNotifier(f.n)
		f.answers = ring
		f.req = newRequester(conn, cfg, &f.stats)
		f.wg.Add(1)
		go f.readAnswers(conn, ring)
	}
	return f, nil
}

// LocalAddr returns the address the re-requests are sent from (and the
// answers arrive at), or false without a re-request server.
func (f *Feed) LocalAddr() (netip.AddrPort, bool) {
	if f.req == nil {
		return netip.AddrPort{}, false
	}
	return f.req.conn.LocalAddr().(*net.UDPAddr).AddrPort(), true
}

// readAnswers receives the re-request server's answers into ring until the
// socket is closed.
func (f *Feed) readAnswers(conn *net.UDPConn, ring *ud.Ring) {
	defer f.wg.Done()
	defer ring.Close()
	for {
		s := ring.FreeSlot(0)
		if s == nil {
			if ring.WaitFree(time.Second) != nil {
				return
			}
			continue
		}
		n, err := conn.Read(s.Buf)
		if err != nil {
			if f.closed.Load() {
				return
			}
			continue
		}
		s.N, s.RecvNs = n, f.cfg.Clock()
		ring.Publish(1)
	}
}

// Offset returns the sequence number of the last message Next returned: a
// live feed's position, as a file's is its offset.
func (f *Feed) Offset() int64 { return int64(f.seq) }

// Tracker returns the feed's sequence tracker (read it between Next calls).
func (f *Feed) Tracker() *seqgap.Tracker { return f.tr }

// Stats returns the counters as of the last time Next read the lines.
// Safe from any goroutine.
func (f *Feed) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshot
}

func (f *Feed) publishStats() {
	f.stats.Tracker = f.tr.Stats()
	for i, r := range f.lines {
		f.stats.Lines[i] = r.Stats()
	}
	f.mu.Lock()
	f.snapshot = f.stats
	f.mu.Unlock()
}

// Next returns the next message, valid until the next call, and its
// sequence number. It returns itch.ErrLost where messages were lost for
// good, feed.ErrIdle when nothing came for Config.IdleWait, and io.EOF once
// the session has ended and every message of it was released or lost.
func (f *Feed) Next() ([]byte, int64, error) {
	for f.pos == len(f.items) {
		if f.err != nil {
			return nil, int64(f.seq), f.err
		}
		f.buf, f.items, f.pos = f.buf[:0], f.items[:0], 0
		if !f.fill() {
			return nil, int64(f.seq), feed.ErrIdle
		}
	}
	it := f.items[f.pos]
	f.pos++
	if it.lost {
		return nil, int64(f.seq), itch.ErrLost
	}
	start := 0
	if f.pos > 1 {
		start = f.items[f.pos-2].end
	}
	f.seq, f.recv = it.seq, it.recv
	return f.buf[start:it.end:it.end], int64(it.seq), nil
}

// RecvNs returns when the message Next returned last arrived, in Unix ns:
// when a line's receive loop took from the socket the datagram that
// carried it (the first of its copies on lines A and B), or, for a message
// recovered upstream, when the re-request server's answer was taken from
// its socket. In stream order it may go back: a message held behind a gap
// keeps its own datagram's time, earlier than the recovered ones before
// it. A Source (itch.NewMessageSource) stamps what it normalizes from the
// message with this time instead of reading its clock, so that the time a
// message waited in the feed handler counts in the latency downstream.
func (f *Feed) RecvNs() int64 { return f.recv }

// Pending reports whether Next returns at once: a message or a loss was
// released and not yet returned, or the stream has ended. Otherwise Next
// waits for input, up to Config.IdleWait. A Source reading ahead of the
// Feed takes only what is pending, so that no message waits for the ones
// after it.
func (f *Feed) Pending() bool { return f.pos < len(f.items) || f.err != nil }

// fill takes what the lines and the re-request socket hold, and waits,
// until the tracker releases something or reports a loss (true), the
// stream ends (true, with f.err set), or IdleWait passes (false).
func (f *Feed) fill() bool {
	deadline := f.cfg.Clock() + int64(f.cfg.IdleWait)
	for {
		f.poll()
		now := f.cfg.Clock()
		f.tr.Tick(now, f)
		if f.req != nil {
			f.req.serve(f.tr, now, f)
		}
		f.publishStats()
		if len(f.items) > 0 {
			return true
		}
		if f.tr.Complete() {
			f.err = io.EOF
			return true
		}
		if f.closed.Load() {
			f.err = ud.ErrClosed
			return true
		}
		if now >= deadline {
			return false
		}
		wait := deadline - now
		if f.req != nil {
			if due, ok := f.req.due(); ok {
				wait = min(wait, max(due-now, int64(time.Millisecond)))
			}
		}
		f.n.Wait(time.Duration(wait), f.done, f.poll)
	}
}

// poll takes every datagram waiting on the lines and the re-request socket
// and returns how many it took.
func (f *Feed) poll() int {
	n := 0
	for l, r := range f.lines {
		for s := r.Peek(0); s != nil; s = r.Peek(0) {
			f.packet(l, s.Buf[:s.N], s.RecvNs)
			r.Release(1)
			n++
		}
	}
	if f.answers != nil {
		for s := f.answers.Peek(0); s != nil; s = f.answers.Peek(0) {
			f.answer(s.Buf[:s.N], s.RecvNs)
			f.answers.Release(1)
			n++
		}
	}
	return n
}

// packet takes a datagram received on line.
func (f *Feed) packet(line int, b []byte, recvNs int64) {
	p, err := mold.Parse(b)
	if err != nil {
		f.stats.Malformed++
		if f.cfg.OnError != nil {
			f.cfg.OnError(&DatagramError{Source: "line " + string(rune('A'+line)), Len: len(b), Err: err})
		}
		return
	}
	now := f.cfg.Clock()
	session, started := f.tr.Session()
	if !started && f.cfg.StartFrom > 1 {
		f.startFrom(p.Session, now)
		session, started = p.Session, true
	}
	if f.req != nil && p.Messages() > 0 && (!started || p.Session == session) && !f.tr.Fits(p.Seq, p.Messages()) {
		// Beyond what the window can hold (a late start, a long outage):
		// taking it would declare the front of the window lost. It says how
		// far the stream reaches; its messages are asked for in turn.
		f.stats.Deferred++
		hb := mold.Packet{Header: mold.Header{Session: p.Session, Seq: p.Seq + uint64(p.Messages())}}
		f.tr.Packet(line, hb, recvNs, now, f)
		return
	}
	f.tr.Packet(line, p, recvNs, now, f)
}

// startFrom starts session at Config.StartFrom (as a snapshot would) and
// reports what lies before it lost.
func (f *Feed) startFrom(session mold.Session, now int64) {
	f.tr.Answer(seqgap.Answer{Outcome: seqgap.AnswerSnapshot, Session: session, Next: f.cfg.StartFrom}, now, f)
	ev := seqgap.Event{Kind: seqgap.EventLost, Line: seqgap.LineRecovery, Session: session,
		Range: seqgap.Range{From: 1, To: f.cfg.StartFrom - 1}, Reason: seqgap.LossSkipped}
	f.Event(&ev)
}

// answer takes a datagram the re-request server sent, received at recvNs:
// the time its messages carry (RecvNs), and the tracker's now.
func (f *Feed) answer(b []byte, recvNs int64) {
	p, err := mold.Parse(b)
	if err != nil || p.Messages() == 0 {
		if err == nil {
			err = fmt.Errorf("a packet without messages (count %d) is no answer", p.Count)
		}
		f.stats.BadAnswers++
		if f.cfg.OnError != nil {
			f.cfg.OnError(&DatagramError{Source: "re-request answer from " + f.cfg.Rerequest.String(), Len: len(b), Err: err})
		}
		return
	}
	f.stats.Answers++
	f.req.answered(p, recvNs)
	f.one[0] = b
	f.tr.Answer(seqgap.Answer{Outcome: seqgap.AnswerPackets, Session: p.Session, Packets: f.one}, recvNs, f)
	f.one[0] = nil
}

// Release implements seqgap.Output: it queues a copy of message seq.
func (f *Feed) Release(seq uint64, msg []byte, _ int, recvNs int64) {
	f.buf = append(f.buf, msg...)
	f.items = append(f.items, item{end: len(f.buf), seq: seq, recv: recvNs})
}

// markLost queues a loss marker, one for losses with no message between.
func (f *Feed) markLost() {
	if n := len(f.items); n > f.pos && f.items[n-1].lost {
		return
	}
	f.items = append(f.items, item{end: len(f.buf), lost: true})
}

// Event implements seqgap.Output: a loss is queued for Next and counted;
// every event goes to Config.OnEvent.
func (f *Feed) Event(ev *seqgap.Event) {
	if ev.Kind == seqgap.EventLost {
		if int(ev.Reason) < numReasons {
			f.stats.Lost[ev.Reason] += ev.Range.Len()
		}
		f.markLost()
	}
	if f.cfg.OnEvent != nil {
		f.cfg.OnEvent(ev)
	}
}

// Close leaves the groups and closes the re-request socket. Next then
// returns ud.ErrClosed once what was released is taken.
func (f *Feed) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	close(f.done)
	var first error
	for _, r := range f.lines {
		if err := r.Close(); err != nil && first == nil {
			first = err
		}
	}
	if f.req != nil {
		if err := f.req.conn.Close(); err != nil && first == nil {
			first = err
		}
	}
	f.wg.Wait()
	return first
}
