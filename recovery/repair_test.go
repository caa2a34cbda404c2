package recovery

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// repairWatch counts the repairs published on channel 0's repair subject
// (their final markers), by id.
type repairWatch struct {
	sub *nats.Subscription
}

func watchRepairs(t *testing.T, nc *nats.Conn) *repairWatch {
	t.Helper()
	sub, err := nc.SubscribeSync(RepairSubject(DefaultFeed, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return &repairWatch{sub: sub}
}

// finals returns the ids of the repairs' final markers received within a
// short wait after the last one.
func (w *repairWatch) finals(t *testing.T) []string {
	t.Helper()
	var ids []string
	for {
		m, err := w.sub.NextMsg(200 * time.Millisecond)
		if err != nil {
			return ids
		}
		if m.Header.Get(HeaderFinal) != "" {
			ids = append(ids, m.Header.Get(HeaderRepair))
		}
	}
}

// waitFor polls cond until it holds, bounded by natsWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(natsWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, natsWait)

		}
		time.Sleep(time.Millisecond)
	}
}

// repairRequest sends a retransmit request that asks for a repair from a
// fresh inbox and returns the one message it is answered with.
func repairRequest(t *testing.T, nc *nats.Conn, req mold.Request) *nats.Msg {
	t.Helper()
	msgs := requestMsg(t, nc, &nats.Msg{Subject: RetransmitSubject(DefaultFeed, 0), Data: req.Append(nil),
		Header: nats.Header{HeaderAnswer: []string{AnswerRepair}}})
	m := msgs[0]
	if len(msgs) != 1 || m.Header.Get(HeaderRepair) == "" || len(m.Data) != 0 {
		t.Fatalf("answer to %+v: %d messages, the first with headers %v and %d bytes, want a pointer to a repair", req, len(msgs), m.Header, len(m.Data))
	}
	return m
}

// TestRepairOnceForMany has N clients, on their own connections, ask for
// the same range while the server is busy, so that every request reaches
// it within the repair window: the range is published once, on the repair
// subject, and every client gets it; a range that differs is repaired
// separately.
func TestRepairOnceForMany(t *testing.T) {
	const n = 6
	c, st, log := filledChannel(t, StoreConfig{}, "RP00000001", 2000)
	ns := startNATS(t, natsconn.ServerConfig{})
	srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
	srv := newServer(t, srvConn, ServerConfig{Channels: []*Channel{c}})
	watch := watchRepairs(t, connectNATS2(t, ns))
	var clis []*Client
	var notes []chan struct{}
	for range n {
		cli := newClient(t, connectNATS2(t, ns), ClientConfig{Timeout: natsWait})
		clis = append(clis, cli)
		notes = append(notes, newNotify(cli))
	}

	// Hold the channel's lock: the server's handler blocks reading the
	// first request's range while the others queue behind it.
	rng := seqgap.Range{From: 501, To: 740}
	c.mu.Lock()
	for _, cli := range clis {
		cli.Request(0, seqgap.Request{Session: st.session, Range: rng})
	}
	// The subscription counts the message its handler is on as pending
	// until the handler returns.
	waitFor(t, "requests queued at the server", func() bool {
		queued, _, _ := srv.subs[0].Pending()
		return srv.Stats().Requests == 1 && queued == n
	})
	c.mu.Unlock()

	for i, cli := range clis {
		r := results(t, cli, notes[i], 1)[0]
		if r.Err != nil || r.Outcome != seqgap.AnswerPackets || r.Range != rng {
			t.Fatalf("client %d: result %+v", i, r)
		}
		checkPackets(t, r.Packets, st.session, rng.From, int(rng.Len()), log)
		if cs := cli.Stats(); cs.Requests != 1 || cs.Heard != 0 || cs.Failed != 0 || cs.Recovered != rng.Len() {
			t.Errorf("client %d: stats %+v, want 1 request, %d recovered", i, cs, rng.Len())
		}
	}
	// A client's result may come from the repair it heard before the
	// server has taken its request off the queue: wait for every request.
	ss := settled(t, srv, func(ss ServerStats) bool { return ss.Requests == n && ss.Answers == 1 && ss.Suppressed == n-1 })
	if ss.Requests != n || ss.Repairs != 1 || ss.Answers != 1 || ss.Suppressed != n-1 || ss.MessagesServed != rng.Len() {
		t.Fatalf("server stats %+v, want %d requests, 1 repair and answer, %d suppressed, %d messages", ss, n, n-1, rng.Len())
	}
	if ids := watch.finals(t); len(ids) != 1 {
		t.Fatalf("repairs published: %v, want one", ids)
	}

	// A range that overlaps but differs is its own repair.
	other := seqgap.Range{From: 600, To: 800}
	clis[0].Request(0, seqgap.Request{Session: st.session, Range: other})
	r := results(t, clis[0], notes[0], 1)[0]
	if r.Err != nil || r.Range != other {
		t.Fatalf("other range: result %+v", r)
	}
	checkPackets(t, r.Packets, st.session, other.From, int(other.Len()), log)
	if ss := settled(t, srv, func(ss ServerStats) bool { return ss.Repairs == 2 && ss.Answers == 2 }); ss.Repairs != 2 || ss.Answers != 2 || ss.Suppressed != n-1 {
		t.Fatalf("after another range: server stats %+v, want 2 repairs and answers, %d suppressed", ss, n-1)
	}

	// Every client heard that repair too: asking for the same range again,
	// any of them answers itself without a request, once the repair has
	// reached it.
	last := clis[n-1]
	waitFor(t, "the repair reaches the last client", func() bool {
		last.repMu.Lock()
		defer last.repMu.Unlock()
		return last.byRange[repairKey{ch: 0, req: mold.Request{Session: st.session, Seq: other.From, Count: uint16(other.Len())}}] != nil
	})
	clis[n-1].Request(0, seqgap.Request{Session: st.session, Range: other})
	r = results(t, clis[n-1], notes[n-1], 1)[0]
	if r.Err != nil || r.Range != other {
		t.Fatalf("heard range: result %+v", r)
	}
	checkPackets(t, r.Packets, st.session, other.From, int(other.Len()), log)
	if cs := clis[n-1].Stats(); cs.Requests != 1 || cs.Heard != 1 {
		t.Errorf("client %d after a heard repair: stats %+v, want 1 request, 1 heard", n-1, cs)
	}
	if ss := srv.Stats(); ss.Requests != n+1 {
		t.Errorf("server saw %d requests, want %d", ss.Requests, n+1)
	}
	if ids := watch.finals(t); len(ids) != 1 {
		t.Fatalf("repairs published after the first: %v, want one", ids)
	}
}

// connectNATS2 is a plain connection to ns.
func connectNATS2(t *testing.T, ns *natsconn.Server) *nats.Conn {
	t.Helper()
	nc, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "subscriber"})
	return nc
}

// TestRepairMissed has a client that started listening after a repair was
// published ask for its range within the repair window: the server points
// it at that repair, which it never heard, and it gets the range inline.
// An old client, whose requests ask for no repair, is answered inline.
func TestRepairMissed(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "RP00000002", 1000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}, RepairWindow: time.Minute}, ClientConfig{Timeout: natsWait})
	rng := seqgap.Range{From: 10, To: 50}
	e.cli.Request(0, seqgap.Request{Session: st.session, Range: rng})
	results(t, e.cli, newNotify(e.cli), 1)

	late := newClient(t, connectOther(t, e), ClientConfig{Timeout: natsWait})
	late.Request(0, seqgap.Request{Session: st.session, Range: rng})
	r := results(t, late, newNotify(late), 1)[0]
	if r.Err != nil || r.Outcome != seqgap.AnswerPackets || r.Range != rng {
		t.Fatalf("late client: result %+v", r)
	}
	checkPackets(t, r.Packets, st.session, rng.From, int(rng.Len()), log)
	if cs := late.Stats(); cs.Requests != 2 || cs.Heard != 0 {
		t.Errorf("late client: stats %+v, want 2 requests (the pointer, then inline)", cs)
	}
	ss := settled(t, e.srv, func(ss ServerStats) bool { return ss.Requests == 3 && ss.Answers == 2 })
	if ss.Requests != 3 || ss.Repairs != 1 || ss.Suppressed != 1 || ss.Answers != 2 {
		t.Fatalf("server stats %+v, want 3 requests, 1 repair, 1 suppressed, 2 answers", ss)
	}

	// A request without Tickcast-Answer (an old client) gets the messages on
	// its reply subject, however recently they were repaired.
	msgs := rawRequest(t, connectOther(t, e), RetransmitSubject(DefaultFeed, 0), mold.Request{Session: st.session, Seq: rng.From, Count: uint16(rng.Len())}.Append(nil))
	var parts [][]byte
	for _, m := range msgs[:len(msgs)-1] {
		parts = append(parts, m.Data)
	}
	checkPackets(t, parts, st.session, rng.From, int(rng.Len()), log)
	if ss := settled(t, e.srv, func(ss ServerStats) bool { return ss.Answers == 3 }); ss.Answers != 3 || ss.Repairs != 1 || ss.Suppressed != 1 {
		t.Fatalf("after an old client's request: server stats %+v, want 3 answers, 1 repair, 1 suppressed", ss)
	}

	// So is a client with InlineOnly.
	inline := newClient(t, connectOther(t, e), ClientConfig{Timeout: natsWait, InlineOnly: true})
	inline.Request(0, seqgap.Request{Session: st.session, Range: rng})
	r = results(t, inline, newNotify(inline), 1)[0]
	if r.Err != nil || r.Outcome != seqgap.AnswerPackets || r.Range != rng {
		t.Fatalf("InlineOnly client: result %+v", r)
	}
	checkPackets(t, r.Packets, st.session, rng.From, int(rng.Len()), log)
	if ss := settled(t, e.srv, func(ss ServerStats) bool { return ss.Requests == 5 && ss.Answers == 4 }); ss.Requests != 5 || ss.Answers != 4 || ss.Repairs != 1 || ss.Suppressed != 1 {
		t.Fatalf("after an InlineOnly client's request: server stats %+v, want 5 requests, 4 answers, 1 repair, 1 suppressed", ss)
	}
}

// TestRepairQueueGroup serves one channel from two servers in one queue
// group: a range one of them repaired is answered by either with a pointer
// to that repair, so it is published once.
func TestRepairQueueGroup(t *testing.T) {
	c, st, _ := filledChannel(t, StoreConfig{}, "RP00000003", 1000)
	ns := startNATS(t, natsconn.ServerConfig{})
	cfg := ServerConfig{Channels: []*Channel{c}, Queue: "recovery"}
	srvs := []*Server{newServer(t, connectNATS2(t, ns), cfg), newServer(t, connectNATS2(t, ns), cfg)}
	nc := connectNATS2(t, ns)
	watch := watchRepairs(t, nc)
	req := mold.Request{Session: st.session, Seq: 100, Count: 30}

	first := repairRequest(t, nc, req)
	id := first.Header.Get(HeaderRepair)
	key := repairKey{ch: 0, req: req}
	for i, s := range srvs {
		waitFor(t, "server "+string(rune('0'+i))+" knows the repair", func() bool {
			e, ok := s.recentRepair(key)
			return ok && e.id == id
		})
	}
	// Ask until both servers have taken requests (the queue group picks
	// one at random each time).
	sent := 1
	for srvs[0].Stats().Requests == 0 || srvs[1].Stats().Requests == 0 {
		if sent == 200 {
			t.Fatalf("200 requests, one server took none: %+v %+v", srvs[0].Stats(), srvs[1].Stats())
		}
		if m := repairRequest(t, nc, req); m.Header.Get(HeaderRepair) != id || m.Header.Get(HeaderFinal) != first.Header.Get(HeaderFinal) {
			t.Fatalf("request %d: pointer %v, want repair %s", sent+1, m.Header, id)
		}
		sent++
	}
	var requests, repairs, suppressed uint64
	for _, s := range srvs {
		ss := s.Stats()
		requests, repairs, suppressed = requests+ss.Requests, repairs+ss.Repairs, suppressed+ss.Suppressed
	}
	if requests != uint64(sent) || repairs != 1 || suppressed != uint64(sent-1) {
		t.Fatalf("%d requests: servers saw %d, published %d repairs, suppressed %d; want %d, 1, %d", sent, requests, repairs, suppressed, sent, sent-1)
	}
	if ids := watch.finals(t); len(ids) != 1 || ids[0] != id {
		t.Fatalf("repairs published: %v, want only %s", ids, id)
	}
}

// settled returns the server's stats once done says they are complete, or
// after natsWait: the server counts an answer after it has sent it, so a
// client can hold its result a moment before the count moves.
func settled(t *testing.T, srv *Server, done func(ServerStats) bool) ServerStats {
	t.Helper()
	deadline := time.Now().Add(natsWait)
	for {
		ss := srv.Stats()
		if done(ss) || time.Now().After(deadline) {
			return ss
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRepairBackoff follows a client through the back-off of shared
// losses: alone it asks at once; a pointer marked as a repeat tells it that
// others lose what it loses; from then on it waits before asking, and a
// range another client gets repaired meanwhile is never asked for; a range
// nobody else asks for is asked for once the wait is over; Close fails what
// still waits.
func TestRepairBackoff(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "RP00000004", 2000)
	ns := startNATS(t, natsconn.ServerConfig{})
	srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
	srv := newServer(t, srvConn, ServerConfig{Channels: []*Channel{c}})
	eager := newClient(t, connectNATS2(t, ns), ClientConfig{Timeout: natsWait, RepairBackoff: -1})
	eagerNote := newNotify(eager)
	const wait = 300 * time.Millisecond
	patient := newClient(t, connectNATS2(t, ns), ClientConfig{Timeout: natsWait, RepairBackoff: wait})
	// The test chooses patient's back-off: long enough that only a repair
	// heard can answer a held request within natsWait, or wait; it records
	// the window it was drawn from.
	var forever atomic.Bool
	var drawnFrom atomic.Int64
	patient.jitter = func(d time.Duration) time.Duration {
		drawnFrom.Store(int64(d))
		if forever.Load() {
			return time.Hour
		}
		return wait
	}
	note := newNotify(patient)
	ask := func(cli *Client, n chan struct{}, rng seqgap.Range) *Result {
		t.Helper()
		cli.Request(0, seqgap.Request{Session: st.session, Range: rng})
		r := results(t, cli, n, 1)[0]
		if r.Err != nil || r.Outcome != seqgap.AnswerPackets || r.Range != rng {
			t.Fatalf("%v: result %+v", rng, r)
		}
		checkPackets(t, r.Packets, st.session, rng.From, int(rng.Len()), log)
		return r
	}

	// Alone: asked at once.
	ask(patient, note, seqgap.Range{From: 1, To: 10})
	if cs := patient.Stats(); cs.Requests != 1 || cs.BackedOff != 0 {
		t.Fatalf("a lone loss: stats %+v, want 1 request, no back-off", cs)
	}

	waitFor(t, "a round trip measured", func() bool { return patient.rtt.Load() > 0 })

	// Both ask for one range, eager first (the server's handler holds the
	// first request until the channel's lock is free, so the second
	// arrives within the repair window): patient's pointer is a repeat.
	shared := seqgap.Range{From: 101, To: 120}
	c.mu.Lock()
	eager.Request(0, seqgap.Request{Session: st.session, Range: shared})
	waitFor(t, "eager's request at the server", func() bool { return srv.Stats().Requests == 2 })
	patient.Request(0, seqgap.Request{Session: st.session, Range: shared})
	waitFor(t, "patient's request queued at the server", func() bool {
		queued, _, _ := srv.subs[0].Pending()
		return queued == 2
	})
	c.mu.Unlock()
	results(t, eager, eagerNote, 1)
	if r := results(t, patient, note, 1)[0]; r.Err != nil || r.Range != shared {
		t.Fatalf("shared range: patient's result %+v", r)
	}
	if ss := settled(t, srv, func(ss ServerStats) bool { return ss.Suppressed == 1 }); ss.Suppressed != 1 || ss.Repairs != 2 {
		t.Fatalf("server stats %+v, want 2 repairs, 1 suppressed", ss)
	}
	// The pointer may come after the result (the repair answered first).
	// It opens the back-off window at the round trip and widens it by half
	// (TestBackoffWindow holds the arithmetic).
	waitFor(t, "the repeat pointer opening the back-off window", func() bool { return patient.window.Load() != 0 })
	opened := time.Duration(patient.window.Load())
	if opened < minBackoff*3/2 || opened > wait || patient.sharedAt.Load() == 0 {
		t.Fatalf("after a repeat pointer: back-off window %v, want %v..%v; shared at %d", opened, minBackoff*3/2, wait, patient.sharedAt.Load())
	}

	// Now patient waits before asking; eager's repair of the same range,
	// made meanwhile, answers it at once, and its request is never sent.
	forever.Store(true)
	next := seqgap.Range{From: 201, To: 230}
	patient.Request(0, seqgap.Request{Session: st.session, Range: next})
	waitFor(t, "patient's request held", func() bool { return patient.Stats().BackedOff == 1 })
	ask(eager, eagerNote, next)
	r := results(t, patient, note, 1)[0]
	if r.Err != nil || r.Outcome != seqgap.AnswerPackets || r.Range != next {
		t.Fatalf("held range: patient's result %+v", r)
	}
	checkPackets(t, r.Packets, st.session, next.From, int(next.Len()), log)
	if cs := patient.Stats(); cs.Requests != 2 || cs.Heard != 1 || cs.BackedOff != 1 {
		t.Fatalf("after a range repaired while it waited: stats %+v, want 2 requests, 1 heard, 1 backed off", cs)
	}
	if d, want := time.Duration(drawnFrom.Load()), opened; d != want {
		t.Fatalf("back-off drawn from a window of %v, want %v", d, want)
	}

	// A range nobody else asks for is asked for after the wait.
	forever.Store(false)
	start := time.Now()
	ask(patient, note, seqgap.Range{From: 301, To: 305})
	if cs := patient.Stats(); cs.Requests != 3 || cs.BackedOff != 2 {
		t.Fatalf("after a range only it lost: stats %+v, want 3 requests, 2 backed off", cs)
	}
	if waited := time.Since(start); waited < wait {
		t.Fatalf("the request was answered %v after it was made, before its back-off of %v ended", waited, wait)
	}
	// Its request was the first for the range: the window narrows.
	narrowed := max(opened*3/4, minBackoff)
	waitFor(t, fmt.Sprintf("the back-off window narrowed to %v", narrowed),
		func() bool { return time.Duration(patient.window.Load()) == narrowed })

	// Close fails a request still waiting: its range is asked for again
	// by whoever owns the tracker, never silently dropped.
	forever.Store(true)
	patient.Request(0, seqgap.Request{Session: st.session, Range: seqgap.Range{From: 401, To: 402}})
	waitFor(t, "the last request held", func() bool { return patient.Stats().BackedOff == 3 })
	patient.Close()
	r = results(t, patient, note, 1)[0]
	if r.Err == nil || r.Outcome != seqgap.AnswerRetry {
		t.Fatalf("a held request at Close: result %+v, want a retry outcome with an error", r)
	}
	if cs := patient.Stats(); cs.Requests != 3 {
		t.Fatalf("after Close: stats %+v, want the held request never sent", cs)
	}
}

// TestBackoffWindow: the window stays shut until a shared loss, opens at
// the smoothed round trip (minBackoff before any), widens by half per repeat up to RepairBackoff and narrows by a
// quarter per first request down to minBackoff; a negative RepairBackoff,
// or InlineOnly, never waits.
func TestBackoffWindow(t *testing.T) {
	c := &Client{cfg: ClientConfig{RepairBackoff: 4 * time.Millisecond}.withDefaults(), jitter: func(d time.Duration) time.Duration { return d }}
	c.first()
	if w := c.window.Load(); w != 0 || c.backoff() != 0 {
		t.Fatalf("before any shared loss: window %v, back-off %v, want both 0", time.Duration(w), c.backoff())
	}
	want := []time.Duration{1500 * time.Microsecond, 2250 * time.Microsecond, 3375 * time.Microsecond, 4 * time.Millisecond, 4 * time.Millisecond}
	for i, w := range want {
		c.repeated()
		if got := c.backoff(); got != w {
			t.Fatalf("after %d repeats: back-off window %v, want %v", i+1, got, w)
		}
	}
	want = []time.Duration{3 * time.Millisecond, 2250 * time.Microsecond, 1687500, 1265625, time.Millisecond, time.Millisecond}
	for i, w := range want {
		c.first()
		if got := c.backoff(); got != w {
			t.Fatalf("after %d first requests: back-off window %v, want %v", i+1, got, w)
		}
	}
	c.sharedAt.Store(time.Now().Add(-sharedKeep - time.Second).UnixNano())
	if d := c.backoff(); d != 0 {
		t.Fatalf("%v after the last shared loss: back-off %v, want 0", sharedKeep+time.Second, d)
	}
	// The round trip is smoothed an eighth at a time, and a window opens
	// there.
	c = &Client{cfg: ClientConfig{}.withDefaults(), jitter: func(d time.Duration) time.Duration { return d }}
	c.sampleRTT(8 * time.Millisecond)
	c.sampleRTT(16 * time.Millisecond)
	c.shared()
	if got := c.backoff(); got != 9*time.Millisecond {
		t.Fatalf("window opened at %v after round trips of 8 and 16ms, want 9ms", got)
	}
	for _, cfg := range []ClientConfig{{RepairBackoff: -1}, {InlineOnly: true}} {
		c := &Client{cfg: cfg.withDefaults(), jitter: func(d time.Duration) time.Duration { return d }}
		c.repeated()
		if d := c.backoff(); d != 0 {
			t.Fatalf("%+v: back-off %v after a repeat, want 0", cfg, d)
		}
	}
}
