package tickcast

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// testKeys seals a publisher's packets with a schedule per channel and
// gives a subscriber the keys, as the feed handler and natskeys do over
// NATS: a KeySource whose keys are made once the sessions are known.
type testKeys struct {
	schedules []*seal.Schedule
	keys      []*seal.Keys
	misses    int
}

func (k *testKeys) make(tb testing.TB, sessions []mold.Session) {
	tb.Helper()
	for ch, s := range sessions {
		sch, err := seal.NewSchedule(s, ch, seal.NewSecret(), time.Hour)
		if err != nil {
			tb.Fatal(err)
		}
		r, _ := seal.ReplyFor(sch, time.Now().UnixNano())
		b, _ := json.Marshal(r)
		sess, ks, _, err := seal.ParseReply(b, ch)
		if err != nil {
			tb.Fatal(err)
		}
		k.schedules = append(k.schedules, sch)
		k.keys = append(k.keys, (&seal.Keys{}).With(sess, ks))
	}
}

func (k *testKeys) seal(ch int, pkt []byte, nowNs int64) ([]byte, error) {
	return k.schedules[ch].Seal(pkt, nowNs)
}

// Keys implements KeySource.
func (k *testKeys) Keys(ch int) *seal.Keys {
	if ch < len(k.keys) {
		return k.keys[ch]
	}
	return nil
}

// Miss implements KeySource.
func (k *testKeys) Miss(int, mold.Session) { k.misses++ }

// TestPublishPollAllocsSealed: with every packet sealed and opened, the
// publisher and the subscriber still allocate nothing per message, and
// every message is released.
func TestPublishPollAllocsSealed(t *testing.T) {
	keys := &testKeys{}
	f := newSealedSubBenchFeed(t, true, SubscriberConfig{Channels: benchChannels}, ud.Blocking, nil, keys)
	checkPublishPollAllocs(t, f)
	if st := f.sub.Stats(); st.Unauthenticated != 0 || st.NoKey != 0 || st.Messages == 0 {
		t.Fatalf("subscriber stats %+v: want every message released and nothing unverified", st)
	}
	if f.pub.Stats().PacketBytes == 0 {
		t.Fatal("nothing published")
	}
}

// TestSubscriberDropsUnverified: a subscriber with keys drops a packet of
// the publisher's session sealed under other keys or under a retired key
// of its own schedule (unauthenticated) and one
// of a session it holds no keys for (no_key, and asks for them), and
// releases every genuine message.
func TestSubscriberDropsUnverified(t *testing.T) {
	keys := &testKeys{}
	f := newSealedSubBenchFeed(t, true, SubscriberConfig{Channels: benchChannels}, ud.Blocking, nil, keys)
	now := Now()
	for range 100 {
		f.publish(t, now)
	}
	if err := f.pub.Flush(now); err != nil {
		t.Fatal(err)
	}
	f.drain(t, f.pub.Stats().Messages)

	// Two forgeries on channel 0's group: the live session under another
	// secret, and another session.
	session := f.pub.Sessions()[0]
	other, _ := seal.NewSchedule(session, 0, seal.NewSecret(), time.Hour)
	b, _ := mold.NewBuilder(1400)
	b.SetTail(seal.Overhead)
	b.Start(session, f.pub.NextSeq(0))
	b.Add(make([]byte, 68))
	forged, err := other.Seal(b.Finish(), time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	forged = append([]byte(nil), forged...) // b is used again below
	stranger, _ := mold.ParseSession("00ZZZZZZZZ")
	third, _ := seal.NewSchedule(stranger, 0, seal.NewSecret(), time.Hour)
	b.Start(stranger, 1)
	b.Add(make([]byte, 68))
	foreign, err := third.Seal(b.Finish(), time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	foreign = append([]byte(nil), foreign...) // b is used again below
	// A retired key: the genuine schedule's key of a day ago (one that
	// leaked, or that a user whose entitlement ended still holds).
	b.Start(session, f.pub.NextSeq(0))
	b.Add(make([]byte, 68))
	retired, err := keys.schedules[0].SealShared(b.Finish(), time.Now().Add(-24*time.Hour).UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	g, _ := ChannelGroup(f.group, 0)
	snd, err := udp.NewSender(udp.Config{Group: g.Addr(), Port: int(g.Port()), CPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	if err := snd.Send([][]byte{forged, foreign, retired}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st := f.sub.Stats(); st.Unauthenticated+st.NoKey < 3; st = f.sub.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %+v", st)
		}
		f.sub.Poll(&f.h, 1000)
		time.Sleep(time.Millisecond)
	}
	st := f.sub.Stats()
	if st.Unauthenticated != 2 || st.NoKey != 1 || keys.misses == 0 {
		t.Fatalf("unauthenticated %d, no_key %d, misses %d: want 2 (other secret, retired key), 1 and the stranger's keys asked for", st.Unauthenticated, st.NoKey, keys.misses)
	}
	// The genuine stream goes on, and nothing forged was released.
	for range 100 {
		f.publish(t, now)
	}
	f.pub.Flush(now)
	f.drain(t, f.pub.Stats().Messages)
	if st := f.sub.Stats(); st.Messages != f.pub.Stats().Messages || st.Missing != 0 {
		t.Fatalf("released %d of %d, missing %d", st.Messages, f.pub.Stats().Messages, st.Missing)
	}
}

// lateKeys is a KeySource whose keys arrive only once ready is set, as
// natskeys' do when the subscriber starts before its feed handler.
type lateKeys struct {
	src    *testKeys
	ready  bool
	misses int
}

func (k *lateKeys) Keys(ch int) *seal.Keys {
	if !k.ready {
		return nil
	}
	return k.src.Keys(ch)
}

func (k *lateKeys) Miss(int, mold.Session) { k.misses++ }

// TestKeysWaitAfterHeartbeat: a session known only from a heartbeat (not
// sealed) is not a live stream yet, so the first data packet waits for
// its keys rather than being dropped as NoKey: a feed handler that starts
// idle sends a heartbeat first.
func TestKeysWaitAfterHeartbeat(t *testing.T) {
	keys := &testKeys{}
	late := &lateKeys{src: keys}
	group := benchGroup(t)
	uc := udp.Config{Mode: ud.Blocking, CPU: -1}
	sub, err := NewSubscriber(SubscriberConfig{Channels: 1, GroupA: group, NewReceiver: udp.Receivers(uc), Keys: late})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := NewPublisher(PublisherConfig{Channels: 1, GroupA: group, NewSender: udp.Senders(uc), Seal: keys.seal, SealOverhead: seal.Overhead})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	keys.make(t, pub.Sessions())
	var h countHandler
	pollUntil := func(what string, done func(SubscriberStats) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !done(sub.Stats()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: after 5s: %+v", what, sub.Stats())
			}
			sub.Poll(&h, 100)
			time.Sleep(time.Millisecond)
		}
	}
	g, _ := ChannelGroup(group, 0)
	snd, err := udp.NewSender(udp.Config{Group: g.Addr(), Port: int(g.Port()), CPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	if err := snd.Send([][]byte{mold.AppendHeartbeat(nil, pub.Sessions()[0], 1)}); err != nil {
		t.Fatal(err)
	}
	pollUntil("the heartbeat", func(st SubscriberStats) bool { return st.Packets >= 1 })
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 1, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	var m feed.Msg
	if err := src.Next(&m); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(&m, Now()); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(Now()); err != nil {
		t.Fatal(err)
	}
	pollUntil("the keys asked for", func(SubscriberStats) bool { return late.misses > 0 })
	for range 20 {
		sub.Poll(&h, 100)
		time.Sleep(time.Millisecond)
	}
	if st := sub.Stats(); st.NoKey != 0 || st.Messages != 0 {
		t.Fatalf("before the keys came: no_key %d, released %d; want the packet waiting", st.NoKey, st.Messages)
	}
	late.ready = true
	pollUntil("the message released", func(st SubscriberStats) bool { return st.Messages == 1 })
	if st := sub.Stats(); st.NoKey != 0 || st.Missing != 0 {
		t.Fatalf("no_key %d, missing %d", st.NoKey, st.Missing)
	}
}
