package tickprom

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// Shape of the test feed: the feed handler's defaults (100 synthetic
// instruments over 4 channels).
const (
	testInstruments = 100
	testChannels    = 4
)

// testFeed is a publisher and a subscriber joined to all its channels on
// loopback multicast, fed by a synthetic source.
type testFeed struct {
	pub *tickcast.Publisher
	sub *tickcast.Subscriber
	src *feed.Synthetic
	h   countHandler
}

// newTestFeed opens the subscriber and the publisher, with the observers
// given (either may be nil).
func newTestFeed(t testing.TB, pubObs tickcast.PublisherObserver, subObs tickcast.Observer) *testFeed {
	t.Helper()
	group := testenv.MulticastGroups(t, 80)[0] // kept apart from the other packages' groups
	// Blocking receive mode: a spinning receive thread would compete with
	// the publisher and the consumer, which run in this same process.
	udpc := udp.Config{Mode: ud.Blocking, CPU: -1}
	sub, err := tickcast.NewSubscriber(tickcast.SubscriberConfig{Channels: testChannels, GroupA: group,
		NewReceiver: udp.Receivers(udpc), Observer: subObs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{Channels: testChannels, GroupA: group,
		NewSender: udp.Senders(udpc), Observer: pubObs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: testInstruments, Channels: testChannels})
	if err != nil {
		t.Fatal(err)
	}
	return &testFeed{pub: pub, sub: sub, src: src}
}

// publish publishes the next n messages of the source and flushes them.
func (f *testFeed) publish(t testing.TB, n int) {
	t.Helper()
	var m feed.Msg
	now := tickcast.Now()
	for range n {
		if err := f.src.Next(&m); err != nil {
			t.Fatal(err)
		}
		if err := f.pub.Publish(&m, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.pub.Flush(now); err != nil {
		t.Fatal(err)
	}
}

// drain polls the subscriber until it has released every message
// published.
func (f *testFeed) drain(t testing.TB) {
	t.Helper()
	want := f.pub.Stats().Messages
	deadline := time.Now().Add(10 * time.Second)
	for f.h.messages < want {
		if f.sub.Poll(&f.h, 4096) > 0 {
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("released %d of %d messages after 10s: %+v", f.h.messages, want, f.sub.Stats())
		}
		time.Sleep(100 * time.Microsecond)
	}
	if f.h.missing > 0 {
		t.Fatalf("%d messages lost: %+v", f.h.missing, f.sub.Stats())
	}
}

// settle drains the subscriber, then polls the publisher and the
// subscriber until both snapshots (published about every 100 ms) count
// every message published.
func (f *testFeed) settle(t testing.TB) {
	t.Helper()
	f.drain(t)
	want := f.pub.Stats().Messages
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.sub.Poll(&f.h, 4096)
		if err := f.pub.Poll(tickcast.Now()); err != nil {
			t.Fatal(err)
		}
		pubTotal, _, _ := f.pub.StatsSnapshot(nil)
		subTotal, _ := f.sub.StatsSnapshot(nil)
		if subTotal.Messages == want && pubTotal.Messages == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots count %d (subscriber) and %d (publisher) of %d messages after 10s",
				subTotal.Messages, pubTotal.Messages, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// countHandler counts what a Subscriber releases.
type countHandler struct {
	messages uint64
	missing  uint64
}

func (h *countHandler) Message(ch int, seq uint64, msg []byte, recvNs int64) { h.messages++ }

func (h *countHandler) Event(ev *tickcast.Event) {
	if ev.Kind == tickcast.EventGap {
		h.missing += ev.Range.Len()
	}
}

// gather returns the registry's samples as name{labels} → value, with the
// labels sorted by name (histograms by their sample count), and fails on a
// gathering error.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var b strings.Builder
			b.WriteString(mf.GetName())
			if len(m.GetLabel()) > 0 {
				b.WriteByte('{')
				for i, l := range m.GetLabel() {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l.GetName() + "=" + l.GetValue())
				}
				b.WriteByte('}')
			}
			var v float64
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			out[b.String()] = v
		}
	}
	return out
}
