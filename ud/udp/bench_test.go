package udp

import (
	"testing"
	"time"
)

func benchBatch() [][]byte {
	batch := make([][]byte, DefaultBatch)
	for i := range batch {
		batch[i] = make([]byte, 1200)
	}
	return batch
}

// BenchmarkSend measures one Send of 32 datagrams of 1200 bytes (one
// sendmmsg) to a loopback group nobody on this host joined.
func BenchmarkSend(b *testing.B) {
	s := newSender(b, testConfig(newGroup(), freePort(b), Blocking))
	batch := benchBatch()
	b.ReportAllocs()
	b.SetBytes(int64(len(batch) * len(batch[0])))
	start := time.Now()
	for b.Loop() {
		if err := s.Send(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.Stats().Datagrams)/time.Since(start).Seconds(), "datagrams/s")
}

// BenchmarkSendRecv measures loopback end to end: one op sends 32 datagrams
// of 1200 bytes and the consumer takes what has arrived, keeping at most
// maxInFlight datagrams between the two so the socket buffer never
// overflows. Sender, consumer and the receive loop share the machine's
// cores, so this is a bound on one process talking to itself, not a
// network figure.
func BenchmarkSendRecv(b *testing.B) {
	for _, mode := range modes {
		b.Run(mode.String(), func(b *testing.B) {
			cfg := testConfig(newGroup(), freePort(b), mode)
			r := newReceiver(b, cfg)
			s := newSender(b, cfg)
			batch := benchBatch()
			const maxInFlight = 1024
			var sent, got uint64
			consume := func(until uint64) {
				deadline := time.Now().Add(5 * time.Second)
				for got < until {
					if time.Now().After(deadline) {
						b.Fatalf("received %d of %d: %+v", got, sent, r.Stats())
					}
					// Blocking sleeps until the receive loop publishes;
					// Direct and DirectSpin have no receive loop, and
					// Wait receives on this goroutine.
					if mode != BusyPoll {
						if err := r.Wait(100 * time.Millisecond); err != nil {
							b.Fatal(err)
						}
					}
					n := 0
					for r.Peek(n) != nil {
						n++
					}
					r.Release(n)
					got += uint64(n)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(batch) * len(batch[0])))
			start := time.Now()
			for b.Loop() {
				if err := s.Send(batch); err != nil {
					b.Fatal(err)
				}
				sent += uint64(len(batch))
				if sent-got > maxInFlight {
					consume(sent - maxInFlight/2)
				}
			}
			consume(sent)
			elapsed := time.Since(start)
			b.ReportMetric(float64(got)/elapsed.Seconds(), "datagrams/s")
			if st := r.Stats(); st.KernelDrops != 0 {
				b.Fatalf("kernel drops during the benchmark: %+v", st)
			}
		})
	}
}
