package recovery

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
	"golang.org/x/sys/unix"
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

// BenchmarkSharedLoss measures what one loss seen by many subscribers costs:
// each iteration has 20 clients, each on a connection of its own, ask for
// the same range at once (one datagram's messages), through an embedded
// NATS server, until every one has its answer. With repairs the server
// publishes the range once, and the clients, after the first loss, back off
// (ClientConfig.RepairBackoff) so that most never ask; repair-no-backoff
// asks at once, each request answered by a pointer; inline
// (ClientConfig.InlineOnly, the protocol before repairs) it replies to
// each. It reports the process's CPU time
// per loss (server, NATS server and clients, all in this process), the
// answers the server sent and the requests it received per loss, and the
// p99 of the clients' latencies.
func BenchmarkSharedLoss(b *testing.B) {
	const clients, gap, published = 20, 8, 200_000
	c := newTestChannel(b, StoreConfig{})
	st := newStream(b, "SL00000001", 1000, 5, false)
	publishTo(b, c, st, nil, published, nil)
	for _, mode := range []struct {
		name    string
		inline  bool
		backoff time.Duration
	}{{"repair", false, 0}, {"repair-no-backoff", false, -1}, {"inline", true, 0}} {
		b.Run(mode.name, func(b *testing.B) {
			ns := startNATS(b, natsconn.ServerConfig{})
			srvConn, _ := connectNATS(b, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "feedhandler"})
			srv := newServer(b, srvConn, ServerConfig{Channels: []*Channel{c}, RateLimit: 1e15})
			var clis []*Client
			var notes []chan struct{}
			for range clients {
				nc, _ := connectNATS(b, natsconn.ConnConfig{URL: ns.ClientURL(), Name: "subscriber"})
				cli := newClient(b, nc, ClientConfig{Timeout: 10 * time.Second, InlineOnly: mode.inline, RepairBackoff: mode.backoff})
				clis = append(clis, cli)
				notes = append(notes, newNotify(cli))
			}
			lat := make([]time.Duration, 0, 1<<16)
			before := srv.Stats()
			cpu0 := cpuTime()
			i := uint64(0)
			for b.Loop() {
				first := 1 + (i*7919)%(published-gap)
				i++
				req := seqgap.Request{Session: st.session, Range: seqgap.Range{From: first, To: first + gap - 1}}
				for _, cli := range clis {
					cli.Request(0, req)
				}
				for k, cli := range clis {
					for got := false; !got; {
						cli.Drain(func(r *Result) {
							if r.Err != nil {
								b.Fatalf("client %d: %v", k, r.Err)
							}
							lat = append(lat, r.Latency)
							got = true
						})
						if !got {
							<-notes[k]
						}
					}
				}
			}
			cpu := cpuTime() - cpu0
			after := srv.Stats()
			slices.Sort(lat)
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/loss")
			b.ReportMetric(float64(after.Answers-before.Answers)/float64(b.N), "answers/loss")
			b.ReportMetric(float64(after.Requests-before.Requests)/float64(b.N), "requests/loss")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// cpuTime returns the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
