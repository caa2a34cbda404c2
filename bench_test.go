package tickcast

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/seal"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// Shape of the feed the benchmarks publish: the feed handler's defaults
// (100 synthetic instruments over 4 channels).
const (
	benchInstruments = 100
	benchChannels    = 4
	// benchFlushEvery is how many messages are published between two
	// Flush calls, standing for the input draining now and then as it
	// does in Publisher.Run. 64 messages over 4 channels make packets of
	// about 16 messages, close to what the feed handler reaches at full
	// speed on 4 channels (a 1472-byte packet holds about 20 quotes).
	benchFlushEvery = 64
	// benchMaxInFlight bounds published-but-not-yet-released messages in
	// the publish/subscribe measurements, so the socket buffers and
	// receive rings can never overflow: the numbers are for a lossless
	// flow, and a gap is a failure rather than noise.
	benchMaxInFlight = 8192
)

// benchGroup returns a channel-0 group base in 239.79.0.0/16 (kept apart from
// the 239.77/239.78 groups the other tests use) on a free port, different on
// each call.
func benchGroup(tb testing.TB) netip.AddrPort {
	tb.Helper()
	return testenv.MulticastGroups(tb, 79)[0]
}

// benchFeed is a publisher (and optionally a subscriber joined to all its
// channels) on loopback multicast, with a pool of pre-generated synthetic
// messages. Generating messages is not what is measured, so it is done once.
type benchFeed struct {
	pub  *Publisher
	sub  *Subscriber
	msgs []feed.Msg // quotes and trades only: every instrument is defined
	next int        // index in msgs of the next message to publish
	n    uint64     // messages published by publish
	h    countHandler
	mode ud.Mode
	// group is the publisher's channel-0 A-line group.
	group netip.AddrPort
}

// newBenchFeed opens the publisher, and the subscriber when withSub is set
// (joined before the first packet is sent), and publishes every instrument's
// definition so that the measured loop sees only steady-state messages.
func newBenchFeed(tb testing.TB, withSub bool) *benchFeed {
	tb.Helper()
	return newObservedBenchFeed(tb, withSub, nil, nil)
}

// newObservedBenchFeed is newBenchFeed with observers on the publisher and
// the subscriber (either may be nil).
func newObservedBenchFeed(tb testing.TB, withSub bool, pubObs PublisherObserver, subObs Observer) *benchFeed {
	tb.Helper()
	// Blocking receive mode: on a two-core machine a spinning receive
	// thread would compete with the publisher and the consumer, which run
	// in this same process.
	return newModeBenchFeed(tb, withSub, udp.Blocking, pubObs, subObs)
}

// newModeBenchFeed is newObservedBenchFeed with the subscriber in mode.
func newModeBenchFeed(tb testing.TB, withSub bool, mode ud.Mode, pubObs PublisherObserver, subObs Observer) *benchFeed {
	tb.Helper()
	return newSubBenchFeed(tb, withSub, SubscriberConfig{Channels: benchChannels, Observer: subObs}, mode, pubObs)
}

// newFilterBenchFeed is newBenchFeed with a subscriber that filters every
// channel to symbols (SubscriberConfig.Symbols).
func newFilterBenchFeed(tb testing.TB, symbols []string) *benchFeed {
	tb.Helper()
	return newSubBenchFeed(tb, true, SubscriberConfig{Channels: benchChannels, Join: []int{0, 1, 2, 3}, Symbols: symbols}, udp.Blocking, nil)
}

// newSubBenchFeed is newModeBenchFeed with the subscriber's configuration
// (its groups and receivers set here).
func newSubBenchFeed(tb testing.TB, withSub bool, subCfg SubscriberConfig, mode ud.Mode, pubObs PublisherObserver) *benchFeed {
	tb.Helper()
	return newSealedSubBenchFeed(tb, withSub, subCfg, mode, pubObs, nil)
}

// newSealedSubBenchFeed is newSubBenchFeed whose publisher seals its packets
// when keys is not nil, with keys made for its sessions (the subscriber's
// KeySource, subCfg.Keys, is set to keys).
func newSealedSubBenchFeed(tb testing.TB, withSub bool, subCfg SubscriberConfig, mode ud.Mode, pubObs PublisherObserver, keys *testKeys) *benchFeed {
	tb.Helper()
	if keys != nil {
		subCfg.Keys = keys
	}
	group := benchGroup(tb)
	udpc := udp.Config{Mode: mode, CPU: -1}
	f := &benchFeed{mode: mode, group: group}
	if withSub {
		subCfg.GroupA, subCfg.NewReceiver = group, udp.Receivers(udpc)
		sub, err := NewSubscriber(subCfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { sub.Close() })
		f.sub = sub
	}
	pcfg := PublisherConfig{Channels: benchChannels, GroupA: group, NewSender: udp.Senders(udpc), Observer: pubObs}
	if keys != nil {
		pcfg.Seal, pcfg.SealOverhead = keys.seal, seal.Overhead
	}
	pub, err := NewPublisher(pcfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pub.Close() })
	if keys != nil {
		keys.make(tb, pub.Sessions())
	}
	f.pub = pub
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: benchInstruments, Channels: benchChannels})
	if err != nil {
		tb.Fatal(err)
	}
	var m feed.Msg
	for len(f.msgs) < 4096 {
		if err := src.Next(&m); err != nil {
			tb.Fatal(err)
		}
		if m.Type == feed.TypeDefinition {
			if err := pub.Publish(&m, Now()); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		f.msgs = append(f.msgs, m)
	}
	if err := pub.Flush(Now()); err != nil {
		tb.Fatal(err)
	}
	if withSub {
		f.drain(tb, pub.Stats().Messages)
	}
	return f
}

// publish publishes the next message of the pool and flushes every
// benchFlushEvery messages; it reports whether it flushed.
func (f *benchFeed) publish(tb testing.TB, nowNs int64) (flushed bool) {
	if err := f.pub.Publish(&f.msgs[f.next], nowNs); err != nil {
		tb.Fatal(err)
	}
	if f.next++; f.next == len(f.msgs) {
		f.next = 0
	}
	if f.n++; f.n%benchFlushEvery != 0 {
		return false
	}
	if err := f.pub.Flush(nowNs); err != nil {
		tb.Fatal(err)
	}
	return true
}

// drain polls the subscriber until it has released want messages in all,
// to the handler or to its symbol filter. It spins, yielding between empty polls: under testenv.NoAllocs
// GOMAXPROCS is 1 and the receive loops need the processor to deliver.
func (f *benchFeed) drain(tb testing.TB, want uint64) {
	deadline := time.Now().Add(10 * time.Second)
	poll := func() int { return f.sub.Poll(&f.h, 4096) }
	for empty := 0; f.h.messages+f.sub.filtered() < want; {
		if poll() > 0 {
			empty = 0
			continue
		}
		if f.mode == ud.Direct {
			// Direct receivers are asked only once epoll says their
			// socket is readable: wait as Run does.
			f.sub.notify.Wait(time.Millisecond, nil, poll)
		}
		runtime.Gosched()
		// Reading the clock on every empty poll would dominate the spin.
		if empty++; empty&1023 == 0 && time.Now().After(deadline) {
			tb.Fatalf("received %d of %d messages after 10s: %+v", f.h.messages, want, f.sub.Stats())
		}
	}
	if f.h.missing > 0 {
		tb.Fatalf("%d messages lost with at most %d in flight: %+v", f.h.missing, benchMaxInFlight, f.sub.Stats())
	}
}

// countHandler counts what a Subscriber releases. It keeps nothing, so the
// handler itself adds no allocation to what is measured.
type countHandler struct {
	messages uint64
	missing  uint64
}

func (h *countHandler) Message(ch int, seq uint64, msg []byte, recvNs int64) { h.messages++ }

func (h *countHandler) Event(ev *Event) {
	if ev.Kind == EventGap {
		h.missing += ev.Range.Len()
	}
}

// BenchmarkPublish measures Publisher.Publish and Flush over real UDP
// senders on loopback multicast; one op is one message. No process joined
// the groups, so the kernel discards each datagram after the send path: the
// figure is the publisher's and the send system calls' cost, not a
// receiver's.
func BenchmarkPublish(b *testing.B) {
	f := newBenchFeed(b, false)
	b.ReportAllocs()
	// One clock read per flush batch, as the message timestamps do not
	// matter here and time.Now would be a visible share of a message.
	now := Now()
	n0 := f.pub.Stats().Messages
	start := time.Now()
	for b.Loop() {
		if f.publish(b, now) {
			now = Now()
		}
	}
	if err := f.pub.Flush(now); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	st := f.pub.Stats()
	b.ReportMetric(float64(st.Messages-n0)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(st.Messages)/float64(max(1, st.Packets)), "msgs/packet")
}

// BenchmarkPublishSubscribe measures the whole loopback path in one
// process: Publish and Flush, the kernel, the receive loops (blocking mode)
// and Subscriber.Poll handing every message to a handler. One op is one
// message published; the subscriber is polled whenever more than
// benchMaxInFlight messages are outstanding, and drained at the end, so
// ticks/s counts messages released to the handler. Publisher, consumer and
// the receive loops share the machine's cores.
func BenchmarkPublishSubscribe(b *testing.B) {
	f := newBenchFeed(b, true)
	b.ReportAllocs()
	now := Now()
	n0 := f.h.messages
	start := time.Now()
	for b.Loop() {
		if f.publish(b, now) {
			now = Now()
			if sent := f.pub.Stats().Messages; sent-f.h.messages > benchMaxInFlight {
				f.drain(b, sent-benchMaxInFlight/2)
			}
		}
	}
	if err := f.pub.Flush(now); err != nil {
		b.Fatal(err)
	}
	f.drain(b, f.pub.Stats().Messages)
	elapsed := time.Since(start)
	b.ReportMetric(float64(f.h.messages-n0)/elapsed.Seconds(), "ticks/s")
}

// TestPublishPollAllocs checks the hot-path rule that publishing and
// receiving allocate nothing per message in steady state. Each run moves
// perRun messages, and every allocation of the whole process counts
// (testenv.NoAllocs), so the receive loops' goroutines are included.
//
// It runs in each receive mode but busy-poll (whose spinning receive
// threads would hold the one processor testenv.NoAllocs leaves): in the direct
// modes Poll receives itself, and the Notifier's epoll_wait is part of the
// measured path.
func TestPublishPollAllocs(t *testing.T) {
	for _, mode := range []ud.Mode{ud.Blocking, ud.Direct, ud.DirectSpin} {
		t.Run(mode.String(), func(t *testing.T) {
			checkPublishPollAllocs(t, newModeBenchFeed(t, true, mode, nil, nil))
		})
	}
}

// checkPublishPollAllocs measures the allocations of f's publisher and
// subscriber per message (see TestPublishPollAllocs).
func checkPublishPollAllocs(t *testing.T, f *benchFeed) {
	const perRun = 1000
	publish := func() {
		now := Now()
		for range perRun {
			f.publish(t, now)
		}
		if err := f.pub.Flush(now); err != nil {
			t.Fatal(err)
		}
		if err := f.pub.Poll(Now()); err != nil {
			t.Fatal(err)
		}
	}
	roundTrip := func() {
		publish()
		f.drain(t, f.pub.Stats().Messages)
	}
	// Warm up: let every buffer, ring and scheduler structure reach its
	// steady-state size before counting.
	for range 5 {
		roundTrip()
	}

	// Publish and Flush alone. Nobody polls meanwhile: the at most
	// 3·(5+1)·perRun messages of NoAllocs' measurements fit the receive
	// rings and socket buffers, and are drained after the measurement.
	testenv.NoAllocs(t, "Publish+Flush of a message", 5, perRun, publish)
	f.drain(t, f.pub.Stats().Messages)
	// Publish, Flush, the receive loops and Subscriber.Poll.
	testenv.NoAllocs(t, "Publish+Flush+Poll of a message", 20, perRun, roundTrip)
	if st := f.sub.Stats(); st.Missing != 0 || st.Messages+st.Filtered != f.pub.Stats().Messages {
		t.Fatalf("subscriber released %d of %d messages: %+v", st.Messages, f.pub.Stats().Messages, st)
	}
}
