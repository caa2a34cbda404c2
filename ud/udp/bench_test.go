package udp

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
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

// BenchmarkSendGSO measures one Send of 46 datagrams of 1,400 bytes, one
// GSO run, to a loopback group nobody joined: "iovecs" with one iovec a
// datagram as Send builds it, "contiguous" with the same bytes copied into
// one buffer first, as a sender that lays its packets out back to back
// would hand them over.
func BenchmarkSendGSO(b *testing.B) {
	const n, size = 46, 1400
	for _, contiguous := range []bool{false, true} {
		name := "iovecs"
		if contiguous {
			name = "contiguous"
		}
		b.Run(name, func(b *testing.B) {
			cfg := testConfig(newGroup(), freePort(b), Blocking)
			cfg.GSO = true
			s := newSender(b, cfg)
			if !s.Segments() {
				b.Skip("this kernel has no UDP GSO")
			}
			batch := make([][]byte, n)
			for i := range batch {
				batch[i] = make([]byte, size)
			}
			one := make([]byte, n*size)
			b.SetBytes(n * size)
			for b.Loop() {
				if !contiguous {
					if err := s.Send(batch); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for i, d := range batch {
					copy(one[i*size:], d)
				}
				if err := sendSegmented(s.fd, one, size); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}

// sendSegmented writes buf as one UDP GSO buffer of size-byte segments.
func sendSegmented(fd int, buf []byte, size int) error {
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = uint16(size)
	_, err := unix.SendmsgN(fd, buf, oob, nil, 0)
	return err
}
