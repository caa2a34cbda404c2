package tickcast

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/tickcast/tickcast/seqgap"
)

// shortStatsInterval makes the polling goroutines publish their counters on
// every poll for the rest of the test.
func shortStatsInterval(t *testing.T) {
	old := statsInterval
	statsInterval = 0
	t.Cleanup(func() { statsInterval = old })
}

// gather returns the registry's samples as name{labels} → value, with the
// labels sorted by name, and fails on a gathering error.
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

// TestMetricsWhileRunning scrapes the collectors of a publisher and a
// subscriber continuously while they move messages on other goroutines
// (run it with -race), then checks the totals and that every known label
// value is exported, at 0 when nothing was counted.
func TestMetricsWhileRunning(t *testing.T) {
	shortStatsInterval(t)
	lat, pm := NewLatencyMetrics(), NewPublisherMetrics()
	f := newObservedBenchFeed(t, true, pm, lat)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewSubscriberCollector(f.sub), NewPublisherCollector(f.pub, "synthetic"), lat, pm)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapes atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
				return
			}
			scrapes.Add(1)
		}
	})
	// Rounds of 256 messages, each drained, until enough scrapes ran
	// meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	n := 0
	for n < 20000 || (scrapes.Load() < 100 && time.Now().Before(deadline)) {
		now := Now()
		for range 256 {
			f.publish(t, now)
			n++
		}
		if err := f.pub.Flush(now); err != nil {
			t.Fatal(err)
		}
		f.pub.Poll(now)
		f.drain(t, f.pub.Stats().Messages)
	}
	f.sub.Poll(&f.h, 4096) // publishes the final counters
	close(stop)
	wg.Wait()
	t.Logf("%d scrapes while %d messages were published and received", scrapes.Load(), n)

	got := gather(t, reg)
	sum := func(prefix string) float64 {
		s := 0.0
		for k, v := range got {
			if strings.HasPrefix(k, prefix+"{") || k == prefix {
				s += v
			}
		}
		return s
	}
	published := float64(f.pub.Stats().Messages)
	for name, want := range map[string]float64{
		"tickcast_subscriber_messages_total":                   published,
		"tickcast_publisher_messages_total":                    published,
		"tickcast_subscriber_send_to_release_seconds":          published,
		"tickcast_subscriber_messages_lost_total":              0,
		"tickcast_subscriber_gaps_total":                       0,
		"tickcast_publisher_messages_per_packet":               float64(f.pub.Stats().Packets),
		"tickcast_subscriber_packets_total":                    float64(f.pub.Stats().Packets),
		"tickcast_publisher_unknown_instrument_messages_total": 0,
	} {
		if s := sum(name); s != want {
			t.Errorf("sum of %s = %v, want %v", name, s, want)
		}
	}
	// Definitions were published before, quotes and trades in the loop.
	if got["tickcast_publisher_messages_in_total{source=synthetic,type=quote}"] == 0 ||
		got["tickcast_publisher_messages_in_total{source=synthetic,type=definition}"] != benchInstruments {
		t.Errorf("messages in by type: %v", got)
	}
	for _, want := range []string{
		"tickcast_subscriber_messages_lost_total{channel=0,reason=timeout}",
		"tickcast_subscriber_messages_lost_total{channel=3,reason=window-full}",
		"tickcast_subscriber_messages_total{channel=2,line=recovery}",
		"tickcast_subscriber_packets_total{channel=1,line=B}",
		"tickcast_subscriber_kernel_drops_total{channel=3,line=A}",
		"tickcast_subscriber_ring_full_total{channel=0,line=A}",
		"tickcast_subscriber_channel_stale{channel=1}",
		"tickcast_subscriber_recovery_failures_total",
		"tickcast_publisher_messages_in_total{source=synthetic,type=level-delta}",
		"tickcast_publisher_messages_in_total{source=synthetic,type=other}",
		"tickcast_publisher_flushes_total{reason=deadline}",
	} {
		if v, ok := got[want]; !ok || v != 0 {
			t.Errorf("%s: %v (present %v), want present and 0", want, v, ok)
		}
	}
	if v := got["tickcast_subscriber_ring_slots{channel=0,line=A}"]; v < 1 {
		t.Errorf("ring_slots = %v", v)
	}
}

// TestMetricsLint runs Prometheus's metric linter over every collector.
func TestMetricsLint(t *testing.T) {
	shortStatsInterval(t)
	lat, pm := NewLatencyMetrics(), NewPublisherMetrics()
	f := newObservedBenchFeed(t, true, pm, lat)
	for name, c := range map[string]prometheus.Collector{"subscriber": NewSubscriberCollector(f.sub),
		"publisher": NewPublisherCollector(f.pub, "synthetic"), "latency": lat, "publisher histograms": pm} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
	}
}

// TestPublishPollAllocsWithMetrics is TestPublishPollAllocs with the latency
// and packet observers set and the counters published on every poll: the
// metrics add no allocation per message.
func TestPublishPollAllocsWithMetrics(t *testing.T) {
	shortStatsInterval(t)
	f := newObservedBenchFeed(t, true, NewPublisherMetrics(), NewLatencyMetrics())
	checkPublishPollAllocs(t, f)
}

func TestChannelCountsEvents(t *testing.T) {
	var c channelCounts
	c.event(&seqgap.Event{Kind: seqgap.EventLost, Reason: seqgap.LossTimeout, Range: seqgap.Range{From: 5, To: 9}})
	c.event(&seqgap.Event{Kind: seqgap.EventLost, Reason: seqgap.LossWindowFull, Range: seqgap.Range{From: 20, To: 20}})
	c.event(&seqgap.Event{Kind: seqgap.EventStale})
	if c.lost[seqgap.LossTimeout] != 5 || c.lost[seqgap.LossWindowFull] != 1 || !c.stale {
		t.Fatalf("%+v", c)
	}
	c.event(&seqgap.Event{Kind: seqgap.EventFresh})
	if c.stale {
		t.Fatal("still stale after fresh")
	}
	for r := 1; r < lossReasons; r++ {
		if strings.HasPrefix(lossReasonNames[r], "reason(") {
			t.Errorf("loss reason %d has no name", r)
		}
	}
}

// TestLatencyHistMatchesPrometheus checks the plain latency histogram
// against a prometheus.Histogram with the same buckets, bounds included.
func TestLatencyHistMatchesPrometheus(t *testing.T) {
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref_seconds", Help: "x", Buckets: LatencyBuckets})
	var h latencyHist
	vals := []int64{-5, 0, 1, 999, 1000, 1001, 1999, 2000, 2001, 4000, 4001, 123456, 8_388_608_000, 8_388_608_001, 1e12}
	for _, le := range LatencyBuckets {
		ns := int64(le*1e9 + 0.5)
		vals = append(vals, ns-1, ns, ns+1)
	}
	for _, v := range vals {
		h.add(v)
		ref.Observe(seconds(v))
	}
	var got, want dto.Metric
	if err := h.metric(prometheus.NewDesc("x_seconds", "x", nil, nil)).Write(&got); err != nil {
		t.Fatal(err)
	}
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	gb, wb := got.GetHistogram().GetBucket(), want.GetHistogram().GetBucket()
	if len(gb) != len(wb) || got.GetHistogram().GetSampleCount() != want.GetHistogram().GetSampleCount() {
		t.Fatalf("buckets %d vs %d, count %d vs %d", len(gb), len(wb), got.GetHistogram().GetSampleCount(), want.GetHistogram().GetSampleCount())
	}
	for i := range gb {
		if gb[i].GetUpperBound() != wb[i].GetUpperBound() || gb[i].GetCumulativeCount() != wb[i].GetCumulativeCount() {
			t.Errorf("bucket le=%g: %d, prometheus says %d", wb[i].GetUpperBound(), gb[i].GetCumulativeCount(), wb[i].GetCumulativeCount())
		}
	}
	if d := got.GetHistogram().GetSampleSum() - want.GetHistogram().GetSampleSum(); d > 1e-6 || d < -1e-6 {
		t.Errorf("sum %v, prometheus says %v", got.GetHistogram().GetSampleSum(), want.GetHistogram().GetSampleSum())
	}
}

// BenchmarkLatencyObserve is the per-message cost of the latency observer
// (the clock is read once per packet, not here).
func BenchmarkLatencyObserve(b *testing.B) {
	m := NewLatencyMetrics()
	now := Now()
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		m.Released(0, now-20000-i&1023, now-5000, now)
	}
}
