package recovery

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
)

// BenchmarkRecoveryLatency measures a subscriber's recovery of a gap over
// NATS: each iteration is one Client.Retransmit of gap messages from a
// channel's store, through an embedded NATS server on loopback, until the
// reply's final marker. It reports the latency percentiles of the
// iterations and the messages recovered per second.
func BenchmarkRecoveryLatency(b *testing.B) {
	const published = 200_000
	c := newTestChannel(b, StoreConfig{})
	st := newStream(b, "BL00000001", 1000, 5, false)
	publishTo(b, c, st, nil, published, nil)
	// No rate limit: the benchmark asks for far more than a subscriber
	// should.
	e := newEnv(b, ServerConfig{Channels: []*Channel{c}, RateLimit: 1e15}, ClientConfig{Timeout: 10 * time.Second})

	for _, gap := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("gap=%d", gap), func(b *testing.B) {
			lat := make([]time.Duration, 0, 1<<16)
			var msgs, bytes uint64
			span := uint64(published - gap + 1)
			i := uint64(0)
			for b.Loop() {
				// Spread the ranges over the store.
				first := 1 + (i*7919)%span
				i++
				t0 := time.Now()
				parts, err := e.cli.Retransmit(0, mold.Request{Session: st.session, Seq: first, Count: uint16(gap)})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatalf("Retransmit %d+%d: %v", first, gap, err)
				}
				msgs += uint64(gap)
				for _, p := range parts {
					bytes += uint64(len(p))
				}
			}
			elapsed := b.Elapsed()
			slices.Sort(lat)
			pct := func(p float64) float64 {
				k := int(p*float64(len(lat))+0.5) - 1
				return float64(lat[max(0, min(len(lat)-1, k))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			b.ReportMetric(float64(msgs)/elapsed.Seconds(), "msgs/s")
			b.SetBytes(int64(bytes / uint64(len(lat))))
		})
	}
}
