package tickprom

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/internal/testenv"
)

// TestMetricsWhileRunning scrapes the collectors of a publisher and a
// subscriber continuously while they move messages on other goroutines
// (run it with -race), then checks the totals and that every known label
// value is exported, at 0 when nothing was counted.
func TestMetricsWhileRunning(t *testing.T) {
	lat, pm := NewLatencyMetrics(), NewPublisherMetrics()
	f := newTestFeed(t, pm, lat)
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
		f.publish(t, 256)
		n += 256
		if err := f.pub.Poll(tickcast.Now()); err != nil {
			t.Fatal(err)
		}
		f.drain(t)
	}
	f.settle(t) // the final counters are published
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
	if published != float64(n) {
		t.Fatalf("published %v messages, want %d", published, n)
	}
	for name, want := range map[string]float64{
		"tickcast_subscriber_messages_total":                   published,
		"tickcast_publisher_messages_total":                    published,
		"tickcast_subscriber_send_to_release_seconds":          published,
		"tickcast_subscriber_messages_lost_total":              0,
		"tickcast_subscriber_filtered_messages_total":          0,
		"tickcast_subscriber_gaps_total":                       0,
		"tickcast_publisher_messages_per_packet":               float64(f.pub.Stats().Packets),
		"tickcast_publisher_unknown_instrument_messages_total": 0,
	} {
		if s := sum(name); s != want {
			t.Errorf("sum of %s = %v, want %v", name, s, want)
		}
	}
	// Every data packet arrives; so may the heartbeats of a channel that
	// was idle for a heartbeat interval (a slow machine), up to the last
	// one, which may still be on its way.
	if pk, st := sum("tickcast_subscriber_packets_total"), f.pub.Stats(); pk < float64(st.Packets) || pk > float64(st.Packets+st.Heartbeats) {
		t.Errorf("sum of tickcast_subscriber_packets_total = %v, want the %d data packets sent and at most the %d heartbeats", pk, st.Packets, st.Heartbeats)
	}
	// The synthetic source defines every instrument before its first quote.
	if got["tickcast_publisher_messages_in_total{source=synthetic,type=quote}"] == 0 ||
		got["tickcast_publisher_messages_in_total{source=synthetic,type=definition}"] != testInstruments {
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
	lat, pm := NewLatencyMetrics(), NewPublisherMetrics()
	f := newTestFeed(t, pm, lat)
	f.publish(t, 1000)
	f.settle(t)
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

// TestObserversNoAllocs checks that the observers' per-message and
// per-packet methods allocate nothing: they run on the hot paths.
func TestObserversNoAllocs(t *testing.T) {
	lat, pm := NewLatencyMetrics(), NewPublisherMetrics()
	now := tickcast.Now()
	testenv.NoAllocs(t, "LatencyMetrics.Released", 5, 1000, func() {
		for i := range int64(1000) {
			lat.Released(int(i&3), now-20000-i, now-5000, now)
		}
	})
	testenv.NoAllocs(t, "LatencyMetrics.Recovered+Flush", 5, 1, func() {
		lat.Recovered(0, time.Millisecond)
		lat.Flush()
	})
	testenv.NoAllocs(t, "PublisherMetrics.Flushed+Packet", 5, 1000, func() {
		for i := range int64(1000) {
			pm.Flushed(int(i&3), i*1000)
			pm.Packet(int(i&3), int(i&31))
		}
	})
}

// TestLossReasonNames checks that every loss reason has a name for the
// reason label.
func TestLossReasonNames(t *testing.T) {
	if len(lossReasonNames) < 2 {
		t.Fatalf("loss reason names: %q", lossReasonNames)
	}
	for r := 1; r < len(lossReasonNames); r++ {
		if n := lossReasonNames[r]; n == "" || strings.HasPrefix(n, "reason(") {
			t.Errorf("loss reason %d has no name: %q", r, n)
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
	now := tickcast.Now()
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		m.Released(0, now-20000-i&1023, now-5000, now)
	}
}
