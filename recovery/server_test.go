package recovery

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// natsWait bounds every wait for something to arrive over NATS in these
// tests.
const natsWait = 5 * time.Second

// startNATS starts an embedded NATS server on a free loopback port.
func startNATS(t testing.TB, cfg natsconn.ServerConfig) *natsconn.Server {
	t.Helper()
	cfg.Host = "127.0.0.1"
	cfg.Port = 0
	ns, err := natsconn.StartServer(cfg)
	if err != nil {
		t.Fatalf("StartServer: %v", err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// connEvents collects the asynchronous errors (permission violations among
// them) of a connection.
type connEvents struct {
	mu   sync.Mutex
	errs []error
}

func (e *connEvents) log(event string, err error) {
	if event != natsconn.EventError {
		return
	}
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

func (e *connEvents) errors() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// connectNATS connects with natsconn.Connect; cfg.URL must be set.
func connectNATS(t testing.TB, cfg natsconn.ConnConfig) (*nats.Conn, *connEvents) {
	t.Helper()
	ev := &connEvents{}
	nc, err := natsconn.Connect(cfg, ev.log)
	if err != nil {
		t.Fatalf("Connect %s: %v", cfg.Name, err)
	}
	t.Cleanup(nc.Close)
	return nc, ev
}

// env is one embedded NATS server, a recovery Server on one connection and a
// Client on another.
type env struct {
	ns      *natsconn.Server
	srvConn *nats.Conn
	cliConn *nats.Conn
	srv     *Server
	cli     *Client
}

// newEnv starts a NATS server without users and a recovery Server and Client
// on their own connections.
func newEnv(t testing.TB, scfg ServerConfig, ccfg ClientConfig) *env {
	t.Helper()
	ns := startNATS(t, natsconn.ServerConfig{})
	srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
	cliConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "subscriber"})
	return &env{ns: ns, srvConn: srvConn, cliConn: cliConn,
		srv: newServer(t, srvConn, scfg), cli: newClient(t, cliConn, ccfg)}
}

func newServer(t testing.TB, nc *nats.Conn, cfg ServerConfig) *Server {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		cfg.Log = zerolog.New(zerolog.NewTestWriter(tt))
	}
	s, err := NewServer(nc, cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func newClient(t testing.TB, nc *nats.Conn, cfg ClientConfig) *Client {
	t.Helper()
	c, err := NewClient(nc, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// publishTo feeds c the packets of st until st's last sequence is to,
// appending every message to log (log[i] is message i+1 of the session) and
// passing every packet to sent, if not nil.
func publishTo(t testing.TB, c *Channel, st *stream, log [][]byte, to uint64, sent func(pkt []byte)) [][]byte {
	t.Helper()
	record := func(_ uint64, msg []byte) { log = append(log, clone(msg)) }
	for st.seq < to {
		first, pkt := st.packet(int(min(20, to-st.seq)), record)
		if err := c.OnPacket(st.session, first, pkt); err != nil {
			t.Fatalf("OnPacket(%d): %v", first, err)
		}
		if sent != nil {
			sent(pkt)
		}
	}
	return log
}

// filledChannel returns a channel holding messages 1..n of a mixed
// synthetic stream of session, and the messages.
func filledChannel(t testing.TB, cfg StoreConfig, session string, n uint64) (*Channel, *stream, [][]byte) {
	t.Helper()
	c := newTestChannel(t, cfg)
	st := newStream(t, session, 500, 42, true)
	return c, st, publishTo(t, c, st, nil, n, nil)
}

// checkPackets checks that parts carry exactly messages first ..
// first+count-1 of session, byte-identical to log, each part a valid
// packet of at most MaxPartBytes whose sequence is that of its first
// message.
func checkPackets(t testing.TB, parts [][]byte, session mold.Session, first uint64, count int, log [][]byte) {
	t.Helper()
	next := first
	for i, p := range parts {
		if len(p) > MaxPartBytes {
			t.Fatalf("part %d of %d: %d bytes, above MaxPartBytes %d", i+1, len(parts), len(p), MaxPartBytes)
		}
		pk, err := mold.Parse(p)
		if err != nil {
			t.Fatalf("part %d of %d: %v", i+1, len(parts), err)
		}
		if pk.Session != session || pk.Seq != next {
			t.Fatalf("part %d of %d: session %s seq %d, want %s %d", i+1, len(parts), pk.Session, pk.Seq, session, next)
		}
		if pk.Messages() == 0 {
			t.Fatalf("part %d of %d carries no message", i+1, len(parts))
		}
		it := pk.Iter()
		for msg, seq, ok := it.Next(); ok; msg, seq, ok = it.Next() {
			if seq-first >= uint64(count) {
				t.Fatalf("part %d of %d: message %d beyond the range %d+%d", i+1, len(parts), seq, first, count)
			}
			if !bytes.Equal(msg, log[seq-1]) {
				t.Fatalf("message %d: got %x, want %x", seq, msg, log[seq-1])
			}
		}
		next += uint64(pk.Messages())
	}
	if got := next - first; got != uint64(count) {
		t.Fatalf("%d parts carry %d messages, want %d", len(parts), got, count)
	}
}

// wantReplyError checks that err is a *ReplyError of code with a reason
// that contains every one of words.
func wantReplyError(t testing.TB, err error, code ErrorCode, words ...string) *ReplyError {
	t.Helper()
	var re *ReplyError
	if !errors.As(err, &re) {
		t.Fatalf("got error %v (%T), want a *ReplyError %s", err, err, code)
	}
	if re.Code != code {
		t.Fatalf("got code %q (%v), want %q", re.Code, re, code)
	}
	if re.Reason == "" {
		t.Fatalf("%s reply without a reason", code)
	}
	for _, w := range words {
		if !strings.Contains(re.Reason, w) {
			t.Errorf("%s: reason %q does not mention %q", code, re.Reason, w)
		}
	}
	return re
}

// rawRequest publishes payload on subject with a fresh reply inbox and
// returns the reply's messages up to and including the final marker.
func rawRequest(t testing.TB, nc *nats.Conn, subject string, payload []byte) []*nats.Msg {
	t.Helper()
	return requestMsg(t, nc, &nats.Msg{Subject: subject, Data: payload})
}

// requestMsg publishes req with a fresh reply inbox and returns the reply's
// messages up to and including the final marker.
func requestMsg(t testing.TB, nc *nats.Conn, req *nats.Msg) []*nats.Msg {
	t.Helper()
	subject := req.Subject
	req.Reply = nc.NewInbox()
	sub, err := nc.SubscribeSync(req.Reply)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishMsg(req); err != nil {
		t.Fatal(err)
	}
	var msgs []*nats.Msg
	for {
		m, err := sub.NextMsg(natsWait)
		if err != nil {
			t.Fatalf("%s: reply after %d messages: %v", subject, len(msgs), err)
		}
		msgs = append(msgs, m)
		if m.Header.Get(HeaderFinal) != "" {
			return msgs
		}
	}
}

// rawError sends payload on subject and checks that the reply is a single
// error message of code, returning it as a ReplyError.
func rawError(t testing.TB, nc *nats.Conn, subject string, payload []byte, code ErrorCode) *ReplyError {
	t.Helper()
	msgs := rawRequest(t, nc, subject, payload)
	if len(msgs) != 1 {
		t.Fatalf("%s %x: %d reply messages, want one error reply", subject, payload, len(msgs))
	}
	m := msgs[0]
	if f := m.Header.Get(HeaderFinal); f != "0" || len(m.Data) != 0 {
		t.Fatalf("%s %x: error reply with final %q and %d bytes, want final 0 and none", subject, payload, f, len(m.Data))
	}
	re := &ReplyError{Code: ErrorCode(m.Header.Get(HeaderError)), Reason: m.Header.Get(HeaderReason)}
	wantReplyError(t, re, code)
	return re
}

func TestRetransmitRoundTrip(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "RT00000001", 30_000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}}, ClientConfig{})
	served := uint64(0)
	for _, tc := range []struct {
		first     uint64
		count     int
		multiPart bool
	}{
		{1, 1, false},
		{12_345, 1, false},
		{30_000, 1, false}, // the last message published
		{1, 100, false},
		{20_001, 100, false},
		{29_901, 100, false},
		{1, 10_000, true},
		{17_777, 10_000, true},
		{20_001, 10_000, true}, // up to the last message
	} {
		parts, err := e.cli.Retransmit(0, mold.Request{Session: st.session, Seq: tc.first, Count: uint16(tc.count)})
		if err != nil {
			t.Fatalf("Retransmit %d+%d: %v", tc.first, tc.count, err)
		}
		checkPackets(t, parts, st.session, tc.first, tc.count, log)
		if tc.multiPart && len(parts) < 2 {
			t.Errorf("Retransmit %d+%d: %d part(s), want a multi-part reply", tc.first, tc.count, len(parts))
		}
		t.Logf("%d+%d: %d part(s)", tc.first, tc.count, len(parts))
		served += uint64(tc.count)
	}
	if s := e.srv.Stats(); s.MessagesServed != served || s.Requests != 9 || len(s.Rejected) != 0 {
		t.Errorf("server stats %+v, want %d messages served in 9 requests, none rejected", s, served)
	}
	if s := e.cli.Stats(); s.Recovered != served || s.Requests != 9 || s.Failed != 0 {
		t.Errorf("client stats %+v, want %d messages recovered in 9 requests", s, served)
	}
}

// TestRetransmitReplyParts checks a multi-part reply on the wire: numbered
// parts, then an empty final marker that counts them.
func TestRetransmitReplyParts(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "RP00000001", 12_000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}}, ClientConfig{})
	msgs := rawRequest(t, e.cliConn, RetransmitSubject(DefaultFeed, 0),
		mold.Request{Session: st.session, Seq: 1001, Count: 10_000}.Append(nil))
	if len(msgs) < 3 {
		t.Fatalf("%d reply messages, want at least two parts and the final marker", len(msgs))
	}
	var parts [][]byte
	for i, m := range msgs[:len(msgs)-1] {
		if got := m.Header.Get(HeaderPart); got != strconv.Itoa(i+1) {
			t.Fatalf("message %d: %s %q", i+1, HeaderPart, got)
		}
		if m.Header.Get(HeaderFinal) != "" || m.Header.Get(HeaderError) != "" {
			t.Fatalf("message %d: data part with headers %v", i+1, m.Header)
		}
		parts = append(parts, m.Data)
	}
	final := msgs[len(msgs)-1]
	if got := final.Header.Get(HeaderFinal); got != strconv.Itoa(len(parts)) || len(final.Data) != 0 || final.Header.Get(HeaderPart) != "" {
		t.Fatalf("final marker: headers %v, %d bytes; want %s %d and no payload", final.Header, len(final.Data), HeaderFinal, len(parts))
	}
	checkPackets(t, parts, st.session, 1001, 10_000, log)
}

func TestRetransmitErrors(t *testing.T) {
	old, oldSt, _ := filledChannel(t, StoreConfig{MaxMessages: 1000}, "ER00000001", 5000)
	empty := newTestChannel(t, StoreConfig{})
	e := newEnv(t, ServerConfig{Channels: []*Channel{old, empty}}, ClientConfig{})
	sess := oldSt.session
	oldest, next := old.Oldest(), old.Next()
	if oldest != 4001 || next != 5001 {
		t.Fatalf("store holds %d..%d, want 4001..5000", oldest, next-1)
	}
	retransmit := func(ch int, s mold.Session, seq uint64, count int) error {
		t.Helper()
		parts, err := e.cli.Retransmit(ch, mold.Request{Session: s, Seq: seq, Count: uint16(count)})
		if err == nil {
			t.Fatalf("channel %d %s %d+%d: %d parts, want an error", ch, s, seq, count, len(parts))
		}
		return err
	}

	t.Run("unknown-session", func(t *testing.T) {
		other := mustSession(t, "ER00000002")
		wantReplyError(t, retransmit(0, other, 4500, 10), CodeUnknownSession, "ER00000002")
		// A channel that has not published anything has no session at all.
		wantReplyError(t, retransmit(1, sess, 1, 1), CodeUnknownSession)
	})
	t.Run("too-old", func(t *testing.T) {
		for _, r := range [][2]uint64{{1, 10}, {3999, 2}, {4000, 1000}} {
			re := wantReplyError(t, retransmit(0, sess, r[0], int(r[1])), CodeTooOld, "snapshot", strconv.FormatUint(oldest, 10))
			if re.Oldest != oldest {
				t.Errorf("%d+%d: Oldest %d, want %d", r[0], r[1], re.Oldest, oldest)
			}
		}
	})
	t.Run("not-yet", func(t *testing.T) {
		for _, r := range [][2]uint64{{next, 1}, {next - 5, 10}, {next + 1000, 100}} {
			re := wantReplyError(t, retransmit(0, sess, r[0], int(r[1])), CodeNotYet, strconv.FormatUint(next, 10))
			if re.Next != next {
				t.Errorf("%d+%d: Next %d, want %d", r[0], r[1], re.Next, next)
			}
		}
	})
	t.Run("too-many", func(t *testing.T) {
		wantReplyError(t, retransmit(0, sess, 4001, 10_001), CodeTooMany, "10001", "10000")
		wantReplyError(t, retransmit(0, sess, 4001, mold.MaxCount), CodeTooMany)
	})
	t.Run("bad-request", func(t *testing.T) {
		subj := RetransmitSubject(DefaultFeed, 0)
		valid := mold.Request{Session: sess, Seq: 4001, Count: 10}.Append(nil)
		for _, tc := range []struct {
			name    string
			payload []byte
			word    string
		}{
			{"empty", nil, "20 bytes"},
			{"garbage", []byte("hello, feed handler"), "20 bytes"},
			{"long", append(clone(valid), 0), "20 bytes"},
			{"short", valid[:19], "20 bytes"},
			{"huge", bytes.Repeat([]byte{0xAB}, 100_000), "20 bytes"},
			{"seq 0", mold.Request{Session: sess, Seq: 0, Count: 10}.Append(nil), "sequence 0"},
			{"count 0", mold.Request{Session: sess, Seq: 4001, Count: 0}.Append(nil), "count"},
			{"count 0xFFFF", mold.Request{Session: sess, Seq: 4001, Count: 0xFFFF}.Append(nil), "count"},
		} {
			re := rawError(t, e.cliConn, subj, tc.payload, CodeBadRequest)
			if !strings.Contains(re.Reason, tc.word) {
				t.Errorf("%s: reason %q does not mention %q", tc.name, re.Reason, tc.word)
			}
		}
		// The same connection still gets answers.
		if _, err := e.cli.Retransmit(0, mold.Request{Session: sess, Seq: 4001, Count: 10}); err != nil {
			t.Fatalf("valid request after bad ones: %v", err)
		}
	})
	t.Run("unknown-channel", func(t *testing.T) {
		wantReplyError(t, retransmit(7, sess, 4001, 1), CodeUnknownChannel, RetransmitSubject(DefaultFeed, 7))
		rawError(t, e.cliConn, "tickcast."+DefaultFeed+".retransmit.x", mold.Request{Session: sess, Seq: 4001, Count: 1}.Append(nil), CodeUnknownChannel)
		rawError(t, e.cliConn, "tickcast."+DefaultFeed+".retransmit.-1", mold.Request{Session: sess, Seq: 4001, Count: 1}.Append(nil), CodeUnknownChannel)
		_, err := e.cli.Snapshot(context.Background(), 2)
		wantReplyError(t, err, CodeUnknownChannel)
	})
	st := e.srv.Stats()
	want := map[ErrorCode]uint64{CodeUnknownSession: 2, CodeTooOld: 3, CodeNotYet: 3, CodeTooMany: 2, CodeBadRequest: 8, CodeUnknownChannel: 4}
	for code, n := range want {
		if st.Rejected[code] != n {
			t.Errorf("Stats().Rejected[%s] = %d, want %d (all: %v)", code, st.Rejected[code], n, st.Rejected)
		}
	}
}

func TestRetransmitRateLimited(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "RL00000001", 5000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}, RateLimit: 1000}, ClientConfig{})
	req := mold.Request{Session: st.session, Seq: 1, Count: 1000}
	parts, err := e.cli.Retransmit(0, req)
	if err != nil {
		t.Fatalf("first 1000 messages (the burst): %v", err)
	}
	checkPackets(t, parts, st.session, 1, 1000, log)
	req.Seq = 1001
	_, err = e.cli.Retransmit(0, req)
	wantReplyError(t, err, CodeRateLimited, "1000", "_INBOX.")

	// Another requester (its own connection, its own inbox prefix) has its
	// own budget.
	other := newClient(t, connectOther(t, e), ClientConfig{})
	if parts, err = other.Retransmit(0, req); err != nil {
		t.Fatalf("another requester: %v", err)
	}
	checkPackets(t, parts, st.session, 1001, 1000, log)

	// The budget refills at 1000 messages a second.
	time.Sleep(200 * time.Millisecond)
	req.Count = 150
	if parts, err = e.cli.Retransmit(0, req); err != nil {
		t.Fatalf("150 messages 200 ms later: %v", err)
	}
	checkPackets(t, parts, st.session, 1001, 150, log)
	if got := e.srv.Stats().Rejected[CodeRateLimited]; got != 1 {
		t.Errorf("Rejected[rate-limited] = %d, want 1", got)
	}
}

// connectOther opens another plain connection to e's NATS server.
func connectOther(t testing.TB, e *env) *nats.Conn {
	t.Helper()
	nc, _ := connectNATS(t, natsconn.ConnConfig{URL: e.ns.ClientURL(), Name: "other"})
	return nc
}

// TestHostileFlood sends a flood of invalid requests from one connection
// and checks that each gets the right error, that a valid request behind
// them is answered promptly, and that the counters add up.
func TestHostileFlood(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "FL00000001", 20_000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}}, ClientConfig{})
	flood, _ := connectNATS(t, natsconn.ConnConfig{URL: e.ns.ClientURL(), Name: "flood"})
	floodCli := newClient(t, flood, ClientConfig{})

	const n = 2000
	const noReply = 100 // requests without a reply subject: nothing to answer
	inbox := flood.NewInbox()
	replies := make(chan *nats.Msg, 2*n)
	sub, err := flood.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := flood.Flush(); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	wrong := mustSession(t, "FL00000666")
	want := make([]ErrorCode, n)
	sent := map[ErrorCode]uint64{}
	subj := RetransmitSubject(DefaultFeed, 0)
	start := time.Now()
	for i := range n {
		var payload []byte
		to := subj
		switch i % 5 {
		case 0: // garbage of any length but 20
			l := rng.IntN(200)
			if l == mold.RequestLen {
				l++
			}
			payload = make([]byte, l)
			for j := range payload {
				payload[j] = byte(rng.Uint32())
			}
			want[i] = CodeBadRequest
		case 1: // a huge count
			payload = mold.Request{Session: st.session, Seq: 1, Count: uint16(10_001 + rng.IntN(50_000))}.Append(nil)
			want[i] = CodeTooMany
		case 2: // a session that is not the channel's
			payload = mold.Request{Session: wrong, Seq: 1 + rng.Uint64N(20_000), Count: uint16(1 + rng.IntN(100))}.Append(nil)
			want[i] = CodeUnknownSession
		case 3: // a channel the feed does not have
			to = RetransmitSubject(DefaultFeed, 1+rng.IntN(1000))
			payload = mold.Request{Session: st.session, Seq: 1, Count: 1}.Append(nil)
			want[i] = CodeUnknownChannel
		case 4: // count 0xFFFF, the end-of-session marker
			payload = mold.Request{Session: st.session, Seq: 1, Count: 0xFFFF}.Append(nil)
			want[i] = CodeBadRequest
		}
		sent[want[i]]++
		if err := flood.PublishRequest(to, inbox+"."+strconv.Itoa(i), payload); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if i%(n/noReply) == 0 {
			if err := flood.Publish(subj, mold.Request{Session: st.session, Seq: 1, Count: 10}.Append(nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A valid request queued behind the flood on the same connection, and
	// one from another connection.
	parts, err := floodCli.Retransmit(0, mold.Request{Session: st.session, Seq: 5000, Count: 100})
	if err != nil {
		t.Fatalf("valid request behind the flood: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("valid request behind the flood answered after %v (flood sent at once)", d)
	}
	checkPackets(t, parts, st.session, 5000, 100, log)
	t0 := time.Now()
	parts, err = e.cli.Retransmit(0, mold.Request{Session: st.session, Seq: 19_001, Count: 1000})
	if err != nil {
		t.Fatalf("valid request from another connection: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("valid request from another connection answered after %v", d)
	}
	checkPackets(t, parts, st.session, 19_001, 1000, log)
	t.Logf("flood of %d and the valid request behind it: %v", n, time.Since(start))

	// Every flood request got exactly one error reply, of the right code.
	got := make([]ErrorCode, n)
	timeout := time.After(natsWait)
	for received := 0; received < n; received++ {
		select {
		case m := <-replies:
			i, err := strconv.Atoi(m.Subject[len(inbox)+1:])
			if err != nil || i < 0 || i >= n {
				t.Fatalf("reply on unexpected subject %s", m.Subject)
			}
			if got[i] != "" {
				t.Fatalf("request %d answered twice", i)
			}
			got[i] = ErrorCode(m.Header.Get(HeaderError))
			if got[i] != want[i] || m.Header.Get(HeaderFinal) != "0" || m.Header.Get(HeaderReason) == "" {
				t.Fatalf("request %d: reply %v, want error %s", i, m.Header, want[i])
			}
		case <-timeout:
			t.Fatalf("%d of %d flood requests answered within %v", received, n, natsWait)
		}
	}
	select {
	case m := <-replies:
		t.Fatalf("unexpected extra reply on %s: %v", m.Subject, m.Header)
	case <-time.After(100 * time.Millisecond):
	}

	// The server is still up and counted everything.
	if !e.srvConn.IsConnected() {
		t.Fatalf("server connection: %v", e.srvConn.Status())
	}
	if got := e.ns.NumClients(); got != 3 {
		t.Errorf("NATS server has %d clients, want 3", got)
	}
	s := e.srv.Stats()
	if s.Requests != n+noReply+2 {
		t.Errorf("Stats().Requests = %d, want %d", s.Requests, n+noReply+2)
	}
	if len(s.Rejected) != len(sent) {
		t.Errorf("Stats().Rejected = %v, want %v", s.Rejected, sent)
	}
	for code, k := range sent {
		if s.Rejected[code] != k {
			t.Errorf("Stats().Rejected[%s] = %d, want %d", code, s.Rejected[code], k)
		}
	}
	if s.MessagesServed != 1100 {
		t.Errorf("Stats().MessagesServed = %d, want 1100", s.MessagesServed)
	}
}

func TestSnapshot(t *testing.T) {
	c := newTestChannel(t, StoreConfig{})
	empty := newTestChannel(t, StoreConfig{})
	e := newEnv(t, ServerConfig{Channels: []*Channel{c, empty}}, ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), natsWait)
	defer cancel()

	// A channel that has not started has no snapshot.
	_, err := e.cli.Snapshot(ctx, 1)
	wantReplyError(t, err, CodeUnknownSession)

	st := newStream(t, "SN00000001", 2000, 9, true)
	var ref refState
	ref.reset(st.session)
	var log [][]byte
	check := func(to uint64) {
		t.Helper()
		log = publishTo(t, c, st, log, to, nil)
		ref.advance(log, to)
		snap, err := e.cli.Snapshot(ctx, 0)
		if err != nil {
			t.Fatalf("Snapshot at %d: %v", to, err)
		}
		if snap.Session != st.session || snap.Seq != to {
			t.Fatalf("Snapshot: session %s seq %d, want %s %d", snap.Session, snap.Seq, st.session, to)
		}
		if err := sameMessages(snap.Messages, ref.messages()); err != nil {
			t.Fatalf("Snapshot at %d: %v", to, err)
		}
		t.Logf("snapshot at %d: %d messages", to, len(snap.Messages))
	}
	check(1)     // one definition
	check(1500)  // definitions only, not all of them
	check(5000)  // every instrument defined, some quotes and trades
	check(30000) // statuses, busts, level deltas, longer and short messages

	// On the wire: every part is a packet of the session whose sequence is
	// the snapshot's, with the session and sequence headers; the final
	// marker also carries the next sequence.
	msgs := rawRequest(t, e.cliConn, SnapshotSubject(DefaultFeed, 0), nil)
	if len(msgs) < 3 {
		t.Fatalf("snapshot of %d instruments in %d reply messages, want several parts", 2000, len(msgs))
	}
	for i, m := range msgs {
		if m.Header.Get(HeaderSession) != st.session.String() || m.Header.Get(HeaderSnapshotSeq) != "30000" {
			t.Fatalf("message %d of %d: headers %v", i+1, len(msgs), m.Header)
		}
		if i == len(msgs)-1 {
			if m.Header.Get(HeaderFinal) != strconv.Itoa(len(msgs)-1) || m.Header.Get(HeaderNext) != "30001" || len(m.Data) != 0 {
				t.Fatalf("final marker: headers %v, %d bytes", m.Header, len(m.Data))
			}
			break
		}
		if m.Header.Get(HeaderPart) != strconv.Itoa(i+1) || len(m.Data) > MaxPartBytes {
			t.Fatalf("part %d: headers %v, %d bytes", i+1, m.Header, len(m.Data))
		}
		pk, err := mold.Parse(m.Data)
		if err != nil || pk.Session != st.session || pk.Seq != 30000 {
			t.Fatalf("part %d: %v, session %s seq %d", i+1, err, pk.Session, pk.Seq)
		}
	}

	// A new session replaces the snapshot.
	st.newSession("SN00000002")
	ref.reset(st.session)
	log = nil
	check(3000)
	if s := e.srv.Stats(); s.Snapshots != 6 || s.Rejected[CodeUnknownSession] != 1 {
		t.Errorf("server stats %+v, want 6 snapshots and 1 unknown-session", s)
	}

	// A context that ends first ends the wait.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := e.cli.Snapshot(done, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Snapshot with a cancelled context: %v", err)
	}
}

// results collects n Results from c, waiting on notify, bounded.
func results(t *testing.T, c *Client, notify <-chan struct{}, n int) []*Result {
	t.Helper()
	var out []*Result
	timeout := time.After(natsWait)
	for {
		c.Drain(func(r *Result) { out = append(out, r) })
		if len(out) >= n {
			break
		}
		select {
		case <-notify:
		case <-timeout:
			t.Fatalf("%d of %d results within %v", len(out), n, natsWait)
		}
	}
	if len(out) > n {
		t.Fatalf("%d results, want %d", len(out), n)
	}
	return out
}

func newNotify(c *Client) chan struct{} {
	notify := make(chan struct{}, 1)
	c.SetNotify(func() {
		select {
		case notify <- struct{}{}:
		default:
		}
	})
	return notify
}

func TestClientPipeline(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{MaxMessages: 20_000}, "CP00000001", 30_000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}}, ClientConfig{MaxPerRequest: 1000, Timeout: natsWait})
	notify := newNotify(e.cli)

	t.Run("recovered", func(t *testing.T) {
		e.cli.Request(0, seqgap.Request{Session: st.session, Range: seqgap.Range{From: 15_001, To: 15_100}})
		rs := results(t, e.cli, notify, 1)
		r := rs[0]
		if r.Err != nil || r.Outcome != seqgap.AnswerPackets || r.Channel != 0 || r.Session != st.session || r.Range != (seqgap.Range{From: 15_001, To: 15_100}) || r.Latency <= 0 {
			t.Fatalf("result %+v", r)
		}
		checkPackets(t, r.Packets, st.session, 15_001, 100, log)
	})
	t.Run("split", func(t *testing.T) {
		// 2,500 messages with at most 1,000 per request: three results.
		e.cli.Request(0, seqgap.Request{Session: st.session, Range: seqgap.Range{From: 20_001, To: 22_500}})
		rs := results(t, e.cli, notify, 3)
		from := uint64(20_001)
		for _, r := range rs {
			n := min(1000, 22_501-from)
			if r.Err != nil || r.Range != (seqgap.Range{From: from, To: from + n - 1}) {
				t.Fatalf("result %+v, want range %d..%d", r, from, from+n-1)
			}
			checkPackets(t, r.Packets, st.session, from, int(n), log)
			from += n
		}
	})
	t.Run("too-old", func(t *testing.T) {
		// The store no longer holds the range: the client loads the
		// snapshot instead, which answers it.
		e.cli.Request(0, seqgap.Request{Session: st.session, Range: seqgap.Range{From: 100, To: 199}})
		r := results(t, e.cli, notify, 1)[0]
		if r.Err != nil || r.Packets != nil || r.Range != (seqgap.Range{From: 100, To: 199}) || r.Snapshot == nil ||
			r.Outcome != seqgap.AnswerSnapshot || r.Next != r.Snapshot.Seq+1 {
			t.Fatalf("result %+v", r)
		}
		if r.Snapshot.Session != st.session || r.Snapshot.Seq != c.Next()-1 || len(r.Snapshot.Messages) == 0 {
			t.Fatalf("snapshot session %s seq %d (%d messages), want %s %d", r.Snapshot.Session, r.Snapshot.Seq, len(r.Snapshot.Messages), st.session, c.Next()-1)
		}
		// With snapshots turned off, the error comes back.
		noSnap, err := NewClient(e.cliConn, ClientConfig{SnapshotAbove: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer noSnap.Close()
		_, err = noSnap.Retransmit(0, mold.Request{Session: st.session, Seq: 100, Count: 100})
		re := wantReplyError(t, err, CodeTooOld)
		if re.Oldest != c.Oldest() {
			t.Errorf("Oldest %d, want %d", re.Oldest, c.Oldest())
		}
	})
	t.Run("unknown-session", func(t *testing.T) {
		e.cli.Request(0, seqgap.Request{Session: mustSession(t, "CP00000002"), Range: seqgap.Range{From: 25_000, To: 25_000}})
		r := results(t, e.cli, notify, 1)[0]
		wantReplyError(t, r.Err, CodeUnknownSession)
		if r.Outcome != seqgap.AnswerRefused {
			t.Fatalf("unknown session answered as %v, want refused", r.Outcome)
		}
	})
}

func TestClientQueueFull(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "QF00000001", 1000)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}}, ClientConfig{MaxInflight: 1, QueueLen: 2, Timeout: natsWait})
	notify := newNotify(e.cli)
	request := func(r seqgap.Range) { e.cli.Request(0, seqgap.Request{Session: st.session, Range: r}) }

	// Hold the channel's lock: the server's handler blocks reading the
	// store, so the first request stays in flight.
	c.mu.Lock()
	unlock := sync.OnceFunc(c.mu.Unlock)
	defer unlock()
	rng := func(i uint64) seqgap.Range { return seqgap.Range{From: i*100 + 1, To: i*100 + 100} }
	request(rng(0))
	deadline := time.Now().Add(natsWait)
	for e.srv.Stats().Requests == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first request did not reach the server")
		}
		time.Sleep(time.Millisecond)
	}
	// The first request is in flight, the only one allowed: two more fill
	// the queue, the next two find it full and fail at once (to be asked
	// again: failed in transit).
	for i := uint64(1); i <= 4; i++ {
		request(rng(i))
	}
	failed := results(t, e.cli, notify, 2)
	for i, r := range failed {
		var re *ReplyError
		if !errors.As(r.Err, &re) || re.Code != "" || r.Outcome != seqgap.AnswerRetry || !strings.Contains(re.Reason, "queued") || r.Range != rng(uint64(3+i)) || r.Packets != nil {
			t.Fatalf("overflow result %d: %+v (%v)", i, r, r.Err)
		}
	}
	if s := e.cli.Stats(); s.Failed != 2 {
		t.Errorf("client stats %+v, want 2 failed", s)
	}

	unlock()
	rs := results(t, e.cli, notify, 3)
	for i, r := range rs {
		if r.Err != nil || r.Range != rng(uint64(i)) {
			t.Fatalf("result %d: %+v, want range %v", i, r, rng(uint64(i)))
		}
		checkPackets(t, r.Packets, st.session, r.Range.From, 100, log)
	}
}

// TestWithUsers runs recovery with the roles' permissions enforced: the
// feed handler answers through response permissions only, and the
// subscriber reads replies on its own inbox prefix.
func TestWithUsers(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{Users: []natsconn.User{
		{Name: "fh", Password: "fh-secret", Role: natsconn.RoleFeedHandler},
		{Name: "alice", Password: "alice-secret", Role: natsconn.RoleSubscriber},
		{Name: "bob", Password: "bob-secret", Role: natsconn.RoleSubscriber},
	}})
	c, st, log := filledChannel(t, StoreConfig{}, "US00000001", 30_000)
	fhConn, fhEvents := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "fh", User: "fh", Password: "fh-secret"})
	srv := newServer(t, fhConn, ServerConfig{Channels: []*Channel{c}})
	aliceConn, aliceEvents := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "alice", User: "alice", Password: "alice-secret",
		InboxPrefix: natsconn.UserInboxPrefix("alice")})
	cli := newClient(t, aliceConn, ClientConfig{})

	for _, r := range [][2]uint64{{30_000, 1}, {101, 100}, {20_001, 10_000}} {
		parts, err := cli.Retransmit(0, mold.Request{Session: st.session, Seq: r[0], Count: uint16(r[1])})
		if err != nil {
			t.Fatalf("Retransmit %d+%d: %v", r[0], r[1], err)
		}
		checkPackets(t, parts, st.session, r[0], int(r[1]), log)
		if r[1] == 10_000 && len(parts) < 2 {
			t.Errorf("Retransmit %d+%d: %d part(s), want several", r[0], r[1], len(parts))
		}
	}
	// An error reply goes through too.
	_, err := cli.Retransmit(0, mold.Request{Session: st.session, Seq: 30_001, Count: 1})
	wantReplyError(t, err, CodeNotYet)

	ctx, cancel := context.WithTimeout(context.Background(), natsWait)
	defer cancel()
	snap, err := cli.Snapshot(ctx, 0)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	var ref refState
	ref.reset(st.session)
	ref.advance(log, 30_000)
	if err := sameMessages(snap.Messages, ref.messages()); err != nil || snap.Seq != 30_000 || snap.Session != st.session {
		t.Fatalf("Snapshot: session %s seq %d: %v", snap.Session, snap.Seq, err)
	}

	// Live datagrams reach the subscriber, once it has announced its
	// demand, which the feed handler answers.
	live, err := aliceConn.SubscribeSync(LiveSubject(DefaultFeed, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := aliceConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := aliceConn.Request(DemandSubject(DefaultFeed, 0), nil, natsWait); err != nil || m.Header.Get(HeaderLease) == "" {
		t.Fatalf("demand: %v", err)
	}
	hb := mold.AppendHeartbeat(nil, st.session, 30_001)
	srv.Live(0, hb)
	if m, err := live.NextMsg(natsWait); err != nil || !bytes.Equal(m.Data, hb) {
		t.Fatalf("live datagram: %v", err)
	}

	// Nothing was refused.
	if err := fhConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := aliceConn.Flush(); err != nil {
		t.Fatal(err)
	}
	for who, ev := range map[string]*connEvents{"fh": fhEvents, "alice": aliceEvents} {
		if errs := ev.errors(); len(errs) != 0 {
			t.Errorf("%s: asynchronous errors %v", who, errs)
		}
	}
	if s := srv.Stats(); s.MessagesServed != 10_101 || s.Snapshots != 1 || s.LivePublishErrors != 0 || s.LiveDemands != 1 || s.LivePublished != 1 {
		t.Errorf("server stats %+v", s)
	}

	// The permissions do bite: a subscriber that does not use its inbox
	// prefix may not subscribe to its reply inbox, so it gets no answer.
	bobConn, bobEvents := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "bob", User: "bob", Password: "bob-secret"})
	bob := newClient(t, bobConn, ClientConfig{Timeout: 300 * time.Millisecond})
	_, err = bob.Retransmit(0, mold.Request{Session: st.session, Seq: 1, Count: 1})
	var re *ReplyError
	if !errors.As(err, &re) || re.Code != "" || !errors.Is(err, ErrTimeout) {
		t.Fatalf("bob without his inbox prefix: %v, want a timeout", err)
	}
	violation := false
	for _, err := range bobEvents.errors() {
		violation = violation || errors.Is(err, nats.ErrPermissionViolation)
	}
	if !violation {
		t.Errorf("bob: no permission violation reported (%v)", bobEvents.errors())
	}
}

func TestLive(t *testing.T) {
	c := newTestChannel(t, StoreConfig{})
	e := newEnv(t, ServerConfig{Channels: []*Channel{c, newTestChannel(t, StoreConfig{})}, Live: LiveAlways}, ClientConfig{})
	// The subjects of docs/recovery.md.
	for got, want := range map[string]string{
		LiveSubject(DefaultFeed, 0): "tickcast.tickcast.live.0", LiveSubject("f-1", 12): "tickcast.f-1.live.12",
		DemandSubject("f-1", 12):     "tickcast.f-1.demand.12",
		RetransmitSubject("f-1", 12): "tickcast.f-1.retransmit.12", SnapshotSubject("f-1", 12): "tickcast.f-1.snapshot.12",
	} {
		if got != want {
			t.Errorf("subject %q, want %q", got, want)
		}
	}
	sub, err := e.cliConn.SubscribeSync("tickcast.tickcast.live.0")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.cliConn.SubscribeSync(LiveSubject(DefaultFeed, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cliConn.Flush(); err != nil {
		t.Fatal(err)
	}
	st := newStream(t, "LV00000001", 100, 3, true)
	var sent [][]byte
	publishTo(t, c, st, nil, 2000, func(pkt []byte) {
		sent = append(sent, clone(pkt))
		e.srv.Live(0, pkt)
	})
	for _, ctl := range [][]byte{mold.AppendHeartbeat(nil, st.session, 2001), mold.AppendEndOfSession(nil, st.session, 2001)} {
		sent = append(sent, ctl)
		e.srv.Live(0, ctl)
	}
	for i, want := range sent {
		m, err := sub.NextMsg(natsWait)
		if err != nil {
			t.Fatalf("datagram %d of %d: %v", i+1, len(sent), err)
		}
		if !bytes.Equal(m.Data, want) || len(m.Header) != 0 {
			t.Fatalf("datagram %d of %d: got %x (headers %v), want %x", i+1, len(sent), m.Data, m.Header, want)
		}
	}
	if m, err := other.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("channel 1 received a datagram of channel 0: %x", m.Data)
	}
	if !e.srv.FlushLive(natsWait) {
		t.Fatalf("the live queue did not drain: %+v", e.srv.Stats())
	}
	if s := e.srv.Stats(); s.LivePublished != uint64(len(sent)) || s.LivePublishErrors != 0 || s.LiveDropped != 0 {
		t.Errorf("server stats %+v, want %d published", s, len(sent))
	}
	// After the connection is closed, publishing fails and is counted.
	e.srvConn.Close()
	e.srv.Live(0, sent[0])
	if !e.srv.FlushLive(natsWait) {
		t.Fatalf("the live queue did not drain: %+v", e.srv.Stats())
	}
	if s := e.srv.Stats(); s.LivePublishErrors != 1 {
		t.Errorf("LivePublishErrors %d after closing the connection, want 1", s.LivePublishErrors)
	}
}

// TestServerConfig checks NewServer's and NewClient's validation.
func TestServerConfig(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{})
	nc, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL()})
	ch := newTestChannel(t, StoreConfig{})
	for _, cfg := range []ServerConfig{
		{},
		{Channels: []*Channel{ch}, Feed: "bad.feed"},
		{Channels: []*Channel{ch}, MaxRetransmit: -1},
		{Channels: []*Channel{ch}, MaxRetransmit: mold.MaxCount + 1},
		{Channels: []*Channel{ch}, RateLimit: -1},
		{Channels: []*Channel{ch}, LiveLease: time.Millisecond},
		{Channels: []*Channel{ch}, Live: LiveOff + 1},
		{Channels: []*Channel{ch}, LiveLease: 2 * time.Hour},
	} {
		if s, err := NewServer(nc, cfg); err == nil {
			s.Close()
			t.Errorf("NewServer(%+v) accepted", cfg)
		}
	}
	for _, tc := range []struct {
		cfg   ClientConfig
		field string
	}{
		{ClientConfig{Feed: "a b"}, "Feed"}, {ClientConfig{Timeout: -1}, "Timeout"}, {ClientConfig{MaxInflight: -1}, "MaxInflight"},
		{ClientConfig{QueueLen: -1}, "QueueLen"}, {ClientConfig{MaxPerRequest: -1}, "MaxPerRequest"},
		{ClientConfig{MaxPerRequest: mold.MaxCount + 1}, "MaxPerRequest"},
	} {
		c, err := NewClient(nc, tc.cfg)
		if err == nil {
			c.Close()
		}
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Struct != "ClientConfig" || ce.Field != tc.field {
			t.Errorf("NewClient(%+v): error %v, want a *config.Error for ClientConfig.%s", tc.cfg, err, tc.field)
		}
	}
	// A feed name scopes the subjects: a client of another feed reaches no
	// server.
	newServer(t, nc, ServerConfig{Feed: "feed-A", Channels: []*Channel{ch}})
	c := newClient(t, nc, ClientConfig{Feed: "feed-B", Timeout: 200 * time.Millisecond})
	if _, err := c.Retransmit(0, mold.Request{Session: mustSession(t, "SC00000001"), Seq: 1, Count: 1}); err == nil {
		t.Fatal("request to a feed without a server succeeded")
	} else {
		t.Logf("request to a feed without a server: %v", err)
	}
	a := newClient(t, nc, ClientConfig{Feed: "feed-A"})
	_, err := a.Retransmit(0, mold.Request{Session: mustSession(t, "SC00000001"), Seq: 1, Count: 1})
	wantReplyError(t, err, CodeUnknownSession)
}

// TestLiveOnlyWithListeners: with LiveInterest (the embedded server's
// subscription interest), a live subject nobody subscribes to costs no
// publish; a subscriber that joins starts getting datagrams within
// LiveInterestEvery, and the skipped ones are counted.
func TestLiveOnlyWithListeners(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{})
	srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
	cliConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "subscriber"})
	c0, c1 := newTestChannel(t, StoreConfig{}), newTestChannel(t, StoreConfig{})
	srv := newServer(t, srvConn, ServerConfig{Channels: []*Channel{c0, c1}, LiveInterest: ns.Interest})
	pkt := []byte("not parsed by Live")
	for range 100 {
		srv.Live(0, pkt)
	}
	if s := srv.Stats(); s.LivePublished != 0 || s.LiveSkipped != 100 {
		t.Fatalf("nobody listening: stats %+v, want 0 published, 100 skipped", s)
	}
	sub, err := cliConn.SubscribeSync(LiveSubject(DefaultFeed, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := cliConn.Flush(); err != nil {
		t.Fatal(err)
	}
	// Publish until the interest is seen, then every datagram arrives.
	deadline := time.Now().Add(natsWait)
	for srv.Stats().LivePublished == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber's interest was never seen: %+v", srv.Stats())
		}
		srv.Live(0, pkt)
		srv.FlushLive(natsWait)
		time.Sleep(time.Millisecond)
	}
	for range 50 {
		srv.Live(0, pkt)
		srv.Live(1, pkt) // channel 1 still has no listener
	}
	if !srv.FlushLive(natsWait) {
		t.Fatalf("the live queue did not drain: %+v", srv.Stats())
	}
	got := 0
	for {
		m, err := sub.NextMsg(200 * time.Millisecond)
		if err != nil {
			break
		}
		if !bytes.Equal(m.Data, pkt) {
			t.Fatalf("got %q", m.Data)
		}
		got++
	}
	s := srv.Stats()
	if uint64(got) != s.LivePublished || s.LivePublished < 51 {
		t.Fatalf("received %d live datagrams, server published %d (want at least 51)", got, s.LivePublished)
	}
	if s.LiveSkipped < 150 {
		t.Fatalf("skipped %d, want at least 150 (100 before the subscriber, 50 of channel 1)", s.LiveSkipped)
	}
	t.Logf("published %d, skipped %d", s.LivePublished, s.LiveSkipped)
}

// TestLiveDoesNotWaitForNATS: Live returns at once while the connection to
// NATS cannot write (a server that stopped reading), drops and counts what
// does not fit the queue, and publishes the queue in order when the
// connection moves again.
func TestLiveDoesNotWaitForNATS(t *testing.T) {
	// A TCP proxy between the feed handler's connection and the server,
	// which can stop forwarding: the connection's writes then block once
	// the socket buffers fill.
	ns := startNATS(t, natsconn.ServerConfig{})
	proxy := newStallProxy(t, ns.ClientURL())
	srvConn, _ := connectNATS(t, natsconn.ConnConfig{URL: proxy.url, Name: "feedhandler"})
	cliConn, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "subscriber"})
	sub, err := cliConn.SubscribeSync(LiveSubject(DefaultFeed, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := cliConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c0 := newTestChannel(t, StoreConfig{})
	const queue = 64
	srv := newServer(t, srvConn, ServerConfig{Channels: []*Channel{c0}, LiveQueue: queue, Live: LiveAlways})

	proxy.stall()
	datagram := make([]byte, 1400)
	const n = 20000 // 28 MB: more than the socket buffers and the queue hold
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			binary.BigEndian.PutUint32(datagram, uint32(i))
			srv.Live(0, datagram)
		}
	}()
	select {
	case <-done:
	case <-time.After(natsWait):
		// Live waited for the stalled connection: let it go, and fail.
		proxy.resume()
		<-done
		t.Fatalf("Live blocked while NATS could not be written to (%d datagrams took over %v)", n, natsWait)
	}
	elapsed := time.Since(start)
	st := srv.Stats()
	if st.LiveDropped == 0 {
		t.Fatalf("nothing dropped while NATS could not be written to: %+v (Live took %v)", st, elapsed)
	}
	t.Logf("%d datagrams given to Live in %v with the connection stalled: %d dropped", n, elapsed, st.LiveDropped)
	proxy.resume()
	if !srv.FlushLive(natsWait) {
		t.Fatalf("the live queue did not drain after the connection moved again: %+v", srv.Stats())
	}
	st = srv.Stats()
	if st.LivePublished+st.LiveDropped+st.LivePublishErrors != n {
		t.Fatalf("published %d + dropped %d + errors %d != %d given", st.LivePublished, st.LiveDropped, st.LivePublishErrors, n)
	}
	// What was published arrives in the order it was given.
	last := -1
	for got := uint64(0); got < st.LivePublished; got++ {
		m, err := sub.NextMsg(natsWait)
		if err != nil {
			t.Fatalf("live datagram %d of %d: %v", got+1, st.LivePublished, err)
		}
		i := int(binary.BigEndian.Uint32(m.Data))
		if i <= last {
			t.Fatalf("datagram %d after %d: out of order", i, last)
		}
		last = i
	}
}

// stallProxy forwards one TCP connection to a NATS server and can stop
// reading from the client side, so that the client's writes back up.
type stallProxy struct {
	url     string
	mu      sync.Mutex
	stalled bool
	cond    *sync.Cond
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{url: "nats://" + ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		p.resume()
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", u.Host)
			if err != nil {
				c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, s)
			cmu.Unlock()
			go io.Copy(c, s) // server to client: never stalled
			go p.copyClient(s, c)
		}
	}()
	return p
}

// copyClient forwards the client's bytes to the server, waiting while the
// proxy is stalled.
func (p *stallProxy) copyClient(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		p.mu.Lock()
		for p.stalled {
			p.cond.Wait()
		}
		p.mu.Unlock()
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	p.stalled = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// TestSessionQuery: a session query is answered with the channel's session,
// whatever session the asking tracker follows; a channel without a session
// yet, or a feed nobody serves, says nothing (a zero session, with the
// reason in Err).
func TestSessionQuery(t *testing.T) {
	c, st, _ := filledChannel(t, StoreConfig{MaxMessages: 1000}, "SQ00000007", 50)
	empty := newTestChannel(t, StoreConfig{MaxMessages: 1000})
	e := newEnv(t, ServerConfig{Channels: []*Channel{c, empty}}, ClientConfig{Timeout: natsWait})
	notify := newNotify(e.cli)
	follows := mustSession(t, "SQ99999999") // a competitor the tracker took first
	e.cli.Request(0, seqgap.Request{Session: follows, Query: true})
	r := results(t, e.cli, notify, 1)[0]
	if r.Err != nil || r.Outcome != seqgap.AnswerSession || r.Session != st.session || r.Channel != 0 {
		t.Fatalf("query of channel 0: %+v, want session %s", r, st.session)
	}
	if a := r.Answer(); a.Outcome != seqgap.AnswerSession || a.Session != st.session {
		t.Fatalf("answer %+v", a)
	}
	// The server counts a query after it has answered it.
	if got := settled(t, e.srv, func(ss ServerStats) bool { return ss.SessionQueries == 1 }).SessionQueries; got != 1 {
		t.Errorf("SessionQueries %d, want 1", got)
	}

	e.cli.Request(1, seqgap.Request{Session: follows, Query: true})
	r = results(t, e.cli, notify, 1)[0]
	if r.Outcome != seqgap.AnswerSession || r.Session != (mold.Session{}) {
		t.Fatalf("query of a channel without a session: %+v, want a zero session", r)
	}
	wantReplyError(t, r.Err, CodeUnknownSession)
	// Before a channel's first packet that is an answer, not a refusal: a
	// session query counted, no rejection (no alert), no recovery failure.
	ss := settled(t, e.srv, func(ss ServerStats) bool { return ss.SessionQueries == 2 })
	if ss.SessionQueries != 2 || ss.Rejected[CodeUnknownSession] != 0 {
		t.Errorf("SessionQueries %d, rejected unknown-session %d: want 2 and 0", ss.SessionQueries, ss.Rejected[CodeUnknownSession])
	}
	if cs := e.cli.Stats(); cs.Failed != 0 {
		t.Errorf("client counts %d failed requests: a session query recovers nothing and fails nothing", cs.Failed)
	}

	other, err := NewClient(e.cliConn, ClientConfig{Feed: "nobody", Timeout: natsWait})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherNotify := newNotify(other)
	other.Request(0, seqgap.Request{Session: follows, Query: true})
	r = results(t, other, otherNotify, 1)[0]
	if r.Outcome != seqgap.AnswerSession || r.Session != (mold.Session{}) || r.Err == nil {
		t.Fatalf("query nobody serves: %+v, want a zero session and an error", r)
	}
}

// A held server answers nothing until Serve; QuerySession then reads the
// channel's session and position, and a channel without a session is an
// unknown-session error.
func TestHoldAndQuerySession(t *testing.T) {
	c, st, _ := filledChannel(t, StoreConfig{MaxMessages: 1000}, "SQ00000008", 50)
	empty := newTestChannel(t, StoreConfig{MaxMessages: 1000})
	e := newEnv(t, ServerConfig{Channels: []*Channel{c, empty}, Hold: true}, ClientConfig{Timeout: natsWait})
	if _, err := QuerySession(e.cliConn, DefaultFeed, 0, natsWait); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("query of a held server: %v, want no responders", err)
	}
	if err := e.srv.Serve(); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Serve(); err != nil {
		t.Fatalf("second Serve: %v", err)
	}
	got, err := QuerySession(e.cliConn, DefaultFeed, 0, natsWait)
	if want := (SessionState{Session: st.session, Next: 51}); err != nil || got != want {
		t.Fatalf("query: %+v, %v; want %+v", got, err, want)
	}
	_, err = QuerySession(e.cliConn, DefaultFeed, 1, natsWait)
	wantReplyError(t, err, CodeUnknownSession)
}

// A range partly past what the answering server has published: the part it
// has comes as packets, the rest as a retry (another feed handler of the
// feed may be ahead of this one), so that the tracker asks for it again.
func TestNotYetRestIsRetried(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{MaxMessages: 1000}, "NY00000001", 50)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}}, ClientConfig{Timeout: natsWait})
	notify := newNotify(e.cli)
	e.cli.Request(0, seqgap.Request{Session: st.session, Range: seqgap.Range{From: 45, To: 58}})
	rs := results(t, e.cli, notify, 2)
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%v %d..%d", r.Outcome, r.Range.From, r.Range.To))
		if r.Outcome == seqgap.AnswerPackets {
			checkPackets(t, r.Packets, st.session, 45, 6, log)
		}
	}
	slices.Sort(got)
	if want := []string{"packets 45..50", "retry 51..58"}; !slices.Equal(got, want) {
		t.Fatalf("results %q, want %q", got, want)
	}
}
