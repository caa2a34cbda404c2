package tickcast

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/verify"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// testGroups returns A and B line bases on a free port, in 239.77.0.0/16 and
// 239.78.0.0/16, different for each call so that tests do not hear each other.
func testGroups(t *testing.T) (a, b netip.AddrPort) {
	t.Helper()
	g := testenv.MulticastGroups(t, 77, 78)
	return g[0], g[1]
}

// recorder is a Handler that verifies every message against the synthetic
// feed and records events.
type recorder struct {
	t        *testing.T
	v        *verify.Verifier
	next     map[int]uint64
	messages uint64
	events   []Event
	verr     error
}

func newRecorder(t *testing.T, cfg feed.SyntheticConfig) *recorder {
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{t: t, v: v, next: map[int]uint64{}}
}

func (r *recorder) Message(ch int, seq uint64, msg []byte, recvNs int64) {
	if r.next[ch] == 0 {
		r.next[ch] = 1
	}
	if seq != r.next[ch] && r.verr == nil {
		r.verr = fmt.Errorf("channel %d: seq %d released, want %d", ch, seq, r.next[ch])
	}
	r.next[ch] = seq + 1
	if err := r.v.Check(ch, seq, msg); err != nil && r.verr == nil {
		r.verr = err
	}
	r.messages++
}

func (r *recorder) Event(ev *Event) {
	r.events = append(r.events, *ev)
	switch ev.Kind {
	case EventLost:
		r.next[ev.Channel] = ev.Range.To + 1
	case EventSessionStart:
		r.next[ev.Channel] = 1
	}
}

func (r *recorder) count(k EventKind) int {
	n := 0
	for _, e := range r.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// TestPublishSubscribeABLines runs a publisher and a subscriber of A and B
// lines in one process, in every receive mode: the subscriber's Run receives
// itself in the direct modes (one epoll_wait over eight sockets, or one
// spinning loop) and through receive threads in the others.
func TestPublishSubscribeABLines(t *testing.T) {
	for _, mode := range ud.Modes {
		t.Run(mode.String(), func(t *testing.T) { testPublishSubscribeABLines(t, mode) })
	}
}

func testPublishSubscribeABLines(t *testing.T, mode ud.Mode) {
	ga, gb := testGroups(t)
	syn := feed.SyntheticConfig{Seed: 42, Instruments: 40, Channels: 4, Count: 100_000}
	udpc := udp.Config{MaxDatagram: 1472, RingSlots: 8192, Mode: mode, CPU: -1, Backoff: mode == ud.BusyPoll}
	sub, err := NewSubscriber(SubscriberConfig{Channels: syn.Channels, GroupA: ga, GroupB: gb, NewReceiver: udp.Receivers(udpc),
		Spin: mode == ud.DirectSpin})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := NewPublisher(PublisherConfig{Channels: syn.Channels, GroupA: ga, GroupB: gb, NewSender: udp.Senders(udpc)})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := feed.NewSynthetic(syn)
	pubDone := make(chan error, 1)
	rate := 300_000.0
	if mode.Spins() {
		rate = 100_000 // two spinning threads in one process on a 2-core host
	}
	go func() {
		err := pub.Run(context.Background(), src, RunConfig{Rate: rate})
		if err == nil {
			err = pub.Close()
		}
		pubDone <- err
	}()
	rec := newRecorder(t, syn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sub.Run(ctx, rec, sub.AllEnded); err != nil {
		t.Fatalf("subscriber: %v (stats %+v)", err, sub.Stats())
	}
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	// The A line's end of session can stop Run before the B line's last
	// copies were read: drain them.
	for end := time.Now().Add(2 * time.Second); sub.Stats().DuplicatePackets < pub.Stats().Packets && time.Now().Before(end); {
		if sub.Poll(rec, 1000) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	st := sub.Stats()
	if rec.verr != nil {
		t.Fatal(rec.verr)
	}
	if rec.messages != syn.Count || st.Messages != syn.Count {
		t.Fatalf("received %d messages (stats %+v), want %d", rec.messages, st, syn.Count)
	}
	if st.Gaps != 0 || st.KernelDrops != 0 {
		t.Fatalf("loss on loopback at %v msg/s: %+v", rate, st)
	}
	// Every packet arrives twice (A and B): one copy wins, one is a duplicate.
	if st.WinsA+st.WinsB != pub.Stats().Packets || st.DuplicatePackets != pub.Stats().Packets {
		t.Fatalf("%d duplicate packets, want one per data packet sent (%d)", st.DuplicatePackets, pub.Stats().Packets)
	}
	if rec.count(EventSessionStart) != 4 || rec.count(EventSessionEnd) != 4 {
		t.Fatalf("events: %d starts, %d ends", rec.count(EventSessionStart), rec.count(EventSessionEnd))
	}
	for _, e := range rec.events {
		if e.Kind == EventSessionEnd && e.LastSeq != src.ChannelCount(e.Channel) {
			t.Fatalf("channel %d ended at %d, published %d", e.Channel, e.LastSeq, src.ChannelCount(e.Channel))
		}
	}
}

// TestSessionsUniqueAcrossRestarts starts two publishers on the same groups
// within one second and checks that the subscriber sees two sessions per
// channel, the first ended cleanly.
func TestSessionsUniqueAcrossRestarts(t *testing.T) {
	ga, _ := testGroups(t)
	syn := feed.SyntheticConfig{Seed: 1, Instruments: 8, Channels: 2, Count: 1000}
	udpc := udp.Config{}
	sub, err := NewSubscriber(SubscriberConfig{Channels: 2, GroupA: ga, NewReceiver: udp.Receivers(udpc)})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var sessions [][]mold.Session
	start := time.Now()
	for i := 0; i < 2; i++ {
		pub, err := NewPublisher(PublisherConfig{Channels: 2, GroupA: ga, NewSender: udp.Senders(udpc)})
		if err != nil {
			t.Fatal(err)
		}
		src, _ := feed.NewSynthetic(syn)
		if err := pub.Run(context.Background(), src, RunConfig{}); err != nil {
			t.Fatal(err)
		}
		if err := pub.Close(); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, pub.Sessions())
	}
	if time.Since(start) > time.Second {
		t.Logf("two runs took %v; the test means to restart within one second", time.Since(start))
	}
	for ch := 0; ch < 2; ch++ {
		if sessions[0][ch] == sessions[1][ch] {
			t.Fatalf("channel %d: both runs used session %s", ch, sessions[0][ch])
		}
		if SessionChannel(sessions[1][ch]) != ch {
			t.Fatalf("session %s does not name channel %d", sessions[1][ch], ch)
		}
	}
	rec := newRecorder(t, syn)
	deadline := time.Now().Add(5 * time.Second)
	for rec.count(EventSessionEnd) < 4 && time.Now().Before(deadline) {
		if sub.Poll(rec, 1000) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if rec.count(EventSessionStart) != 4 || rec.count(EventSessionEnd) != 4 || rec.count(EventSessionAbrupt) != 0 {
		t.Fatalf("starts %d ends %d abrupt %d", rec.count(EventSessionStart), rec.count(EventSessionEnd), rec.count(EventSessionAbrupt))
	}
	if rec.messages != 2*syn.Count || rec.verr != nil {
		t.Fatalf("messages %d, verify %v", rec.messages, rec.verr)
	}
}

// TestForeignAndMalformedPackets sends packets of another channel's session,
// an older session and garbage to a channel's group.
func TestForeignAndMalformedPackets(t *testing.T) {
	ga, _ := testGroups(t)
	udpc := udp.Config{}
	sub, err := NewSubscriber(SubscriberConfig{Channels: 3, Join: []int{1}, GroupA: ga, NewReceiver: udp.Receivers(udpc)})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	g1, _ := ChannelGroup(ga, 1)
	s, err := udp.NewSender(udp.Config{Group: g1.Addr(), Port: int(g1.Port())})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	older := NewSession(1, now)
	current := NewSession(1, now)
	other := NewSession(2, now)
	b, _ := mold.NewBuilder(1472)
	pkt := func(sess mold.Session, seq uint64) []byte {
		b.Start(sess, seq)
		b.Add([]byte("x"))
		return append([]byte{}, b.Finish()...)
	}
	send := [][]byte{
		pkt(current, 1),
		pkt(other, 2),                       // another channel's session
		pkt(older, 2),                       // an older session of this channel
		[]byte("not a mold packet at all!"), // malformed
		pkt(current, 2),
	}
	if err := s.Send(send); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{t: t, next: map[int]uint64{}}
	rec.v, _ = verify.New(feed.SyntheticConfig{Instruments: 1, Channels: 1})
	deadline := time.Now().Add(3 * time.Second)
	for sub.Stats().Packets < 5 && time.Now().Before(deadline) {
		if sub.Poll(rec, 100) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	st := sub.Stats()
	if st.Packets != 5 || st.Foreign != 2 || st.Malformed != 1 || st.Messages != 2 || st.Gaps != 0 {
		t.Fatalf("stats %+v", st)
	}
	if rec.count(EventForeign) != 2 || rec.count(EventMalformed) != 1 {
		t.Fatalf("events %+v", rec.events)
	}
}

func TestChannelGroup(t *testing.T) {
	base := netip.MustParseAddrPort("239.77.0.254:31001")
	g, err := ChannelGroup(base, 3)
	if err != nil || g.String() != "239.77.1.1:31001" {
		t.Fatalf("%v %v", g, err)
	}
	if _, err := ChannelGroup(netip.MustParseAddrPort("239.255.255.255:1"), 1); err == nil {
		t.Fatal("channel outside 224.0.0.0/4 accepted")
	}
	for _, bad := range []string{"10.0.0.1:1", "239.1.1.1", "239.1.1.1:0", "[ff02::1]:5"} {
		if _, err := ParseGroup(bad); err == nil {
			t.Errorf("ParseGroup(%q) accepted", bad)
		}
	}
}

func TestNewSessionFormat(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := NewSession(37, now)
	b := NewSession(37, now)
	if a == b {
		t.Fatal("same millisecond gave the same session twice")
	}
	if SessionChannel(a) != 37 || string(a[:2]) != "11" {
		t.Fatalf("session %s", a)
	}
	ms := now.Sub(sessionEpoch).Milliseconds()
	if got := decode36(a[2:]); got != ms {
		t.Fatalf("session %s encodes %d ms, want %d", a, got, ms)
	}
	if decode36(b[2:]) != ms+1 {
		t.Fatalf("second session %s is not the next millisecond", b)
	}
}

func decode36(s []byte) int64 {
	var v int64
	for _, c := range s {
		d := int64(c - '0')
		if c >= 'A' {
			d = int64(c-'A') + 10
		}
		v = v*36 + d
	}
	return v
}

// TestOlderSessionAfterEnd: a session that sorts older than the current one
// is foreign only while the current one lives; after its end of session, a
// feed handler whose clock is behind is still followed.
func TestOlderSessionAfterEnd(t *testing.T) {
	ga, _ := testGroups(t)
	sub, err := NewSubscriber(SubscriberConfig{Channels: 1, GroupA: ga, NewReceiver: udp.Receivers(udp.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	s, err := udp.NewSender(udp.Config{Group: ga.Addr(), Port: int(ga.Port())})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	older, current := NewSession(0, now), NewSession(0, now)
	b, _ := mold.NewBuilder(1472)
	pkt := func(sess mold.Session, seq uint64) []byte {
		b.Start(sess, seq)
		b.Add([]byte("x"))
		return append([]byte{}, b.Finish()...)
	}
	if err := s.Send([][]byte{pkt(current, 1), pkt(older, 1), mold.AppendEndOfSession(nil, current, 2), pkt(older, 1)}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{t: t, next: map[int]uint64{}}
	rec.v, _ = verify.New(feed.SyntheticConfig{Instruments: 1, Channels: 1})
	for deadline := time.Now().Add(3 * time.Second); sub.Stats().Packets < 4 && time.Now().Before(deadline); {
		if sub.Poll(rec, 100) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	st := sub.Stats()
	// The older session's first packet came while the current one lived:
	// foreign. Its second came after the end of session: a new stream.
	if st.Foreign != 1 || st.Sessions != 2 || st.Messages != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDirectPollAfterStall: a direct-mode subscriber whose goroutine was
// held (here: it simply did not poll) for longer than pollStall asks every
// socket on its next Poll, although no epoll_wait marked them readable, so
// that no channel is judged silent while its datagrams wait in the socket.
func TestDirectPollAfterStall(t *testing.T) {
	ga, _ := testGroups(t)
	syn := feed.SyntheticConfig{Seed: 3, Instruments: 20, Channels: 2, Count: 200}
	udpc := udp.Config{Mode: ud.Direct, CPU: -1}
	sub, err := NewSubscriber(SubscriberConfig{Channels: syn.Channels, GroupA: ga, NewReceiver: udp.Receivers(udpc)})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rec := newRecorder(t, syn)
	if n := sub.Poll(rec, 1000); n != 0 { // finds every socket empty: no socket is marked readable now
		t.Fatalf("released %d before anything was sent", n)
	}
	pub, err := NewPublisher(PublisherConfig{Channels: syn.Channels, GroupA: ga, NewSender: udp.Senders(udpc)})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	src, _ := feed.NewSynthetic(syn)
	if err := pub.Run(context.Background(), src, RunConfig{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * pollStall) // the datagrams wait in the sockets; nobody polls
	if n := sub.Poll(rec, 1000); n == 0 {
		t.Fatalf("after a stall, Poll released nothing although %d messages wait in the sockets", syn.Count)
	}
	if rec.verr != nil {
		t.Fatal(rec.verr)
	}
}

// TestEventKindNames: the names logs and JSON show stay as they are, and
// every tracker event kind maps to the subscriber's kind of the same name.
func TestEventKindNames(t *testing.T) {
	want := map[EventKind]string{
		EventSessionStart: "session-start", EventSessionEnd: "session-end", EventSessionAbrupt: "session-abrupt",
		EventGap: "gap", EventRequest: "request", EventLost: "lost", EventStale: "stale", EventFresh: "fresh",
		EventForeign: "foreign", EventMalformed: "malformed", EventInstrumentGap: "instrument-gap", EventSnapshot: "snapshot",
	}
	if len(want) != 12 {
		t.Fatalf("%d distinct kinds, want 12", len(want))
	}
	for k, name := range want {
		if k.String() != name {
			t.Errorf("kind %d is %q, want %q", k, k, name)
		}
	}
	for k := seqgap.EventSessionStart; k <= seqgap.EventFresh; k++ {
		if got := trackerKinds[k]; got == 0 || got.String() != k.String() {
			t.Errorf("tracker kind %v maps to %v", k, got)
		}
	}
}
