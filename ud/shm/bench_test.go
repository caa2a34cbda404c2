package shm

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// The benchmarks run writer and reader in one process on the same host,
// as the transport is meant to; on a two-core machine the writer, the
// receive loop and the consumer share the cores, so the figures are a
// bound on one process talking to itself. The UDP pair is the loopback
// multicast transport measured the same way, for comparison.

var benchModes = []ud.Mode{Blocking, BusyPoll, DirectSpin}

// pair is a writer and a reader, of either transport.
type pair struct {
	send func([][]byte) error
	r    ud.Receiver
	fill func() int // nil for receivers with a receive loop
}

func shmPair(b *testing.B, mode ud.Mode) pair {
	c := testConfig(ringDir(b), mode)
	c.MaxDatagram = 1472
	c.Slots = 1 << 13
	c.RingSlots = 1 << 12
	c.Notifier = nil
	s := newSender(b, c)
	r := newReceiver(b, c)
	p := pair{send: s.Send, r: r}
	if !mode.Threaded() {
		p.fill = r.Fill
	}
	return p
}

// udpSender opens a loopback multicast sender to group on a free port,
// closed after b, and returns it with its configuration in mode.
func udpSender(b *testing.B, group string, mode ud.Mode) (*udp.Sender, udp.Config) {
	l, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	c := udp.Config{Group: netip.MustParseAddr(group), Port: port, Mode: mode, CPU: -1}
	s, err := udp.NewSender(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, c
}

func udpPair(b *testing.B, mode ud.Mode) pair {
	s, c := udpSender(b, "239.77.200.1", mode)
	r, err := udp.NewReceiver(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	p := pair{send: s.Send, r: r}
	if !mode.Threaded() {
		p.fill = r.Fill
	}
	return p
}

// take returns how many packets the consumer took (and released) in one
// look, waiting up to a millisecond for a receiver with a receive loop
// when it has none.
func (p pair) take(wait bool) int {
	if p.fill != nil {
		p.fill()
	} else if wait {
		_ = p.r.Wait(time.Millisecond)
	}
	n := 0
	for p.r.Peek(n) != nil {
		n++
	}
	p.r.Release(n)
	if n == 0 {
		runtime.Gosched()
	}
	return n
}

func benchPairs(b *testing.B, run func(b *testing.B, p pair)) {
	for _, mode := range benchModes {
		b.Run("shm/"+mode.String(), func(b *testing.B) { run(b, shmPair(b, mode)) })
	}
	for _, mode := range []ud.Mode{Blocking, BusyPoll} {
		b.Run("udp/"+mode.String(), func(b *testing.B) { run(b, udpPair(b, mode)) })
	}
}

// BenchmarkShmThroughput: one op is a Send of 32 packets of 1,200 bytes;
// the consumer takes what has arrived and keeps at most 1,024 packets in
// flight, so neither the ring nor the socket buffer overflows.
func BenchmarkShmThroughput(b *testing.B) {
	benchPairs(b, func(b *testing.B, p pair) {
		batch := make([][]byte, 32)
		for i := range batch {
			batch[i] = make([]byte, 1200)
		}
		var sent, got uint64
		const inFlight = 1024
		b.ReportAllocs()
		b.SetBytes(32 * 1200)
		start := time.Now()
		for b.Loop() {
			if err := p.send(batch); err != nil {
				b.Fatal(err)
			}
			sent += 32
			for sent-got > inFlight {
				got += uint64(p.take(true))
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for got < sent && time.Now().Before(deadline) {
			got += uint64(p.take(true))
		}
		b.ReportMetric(float64(got)/time.Since(start).Seconds(), "packets/s")
		if st := p.r.Stats(); st.KernelDrops != 0 {
			b.Fatalf("packets lost: %+v", st)
		}
	})
}

// BenchmarkShmLatency: one op sends one 64-byte packet stamped with the
// time and waits until the consumer has it: the one-way latency from Send
// to the consumer's Peek, reader idle before each packet (so it includes
// the wake-up in the waiting modes).
func BenchmarkShmLatency(b *testing.B) {
	benchPairs(b, func(b *testing.B, p pair) {
		pkt := make([]byte, 64)
		batch := [][]byte{pkt}
		var sum, worst int64
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			binary.NativeEndian.PutUint64(pkt, uint64(time.Now().UnixNano()))
			if err := p.send(batch); err != nil {
				b.Fatal(err)
			}
			for {
				if p.fill != nil {
					p.fill()
				} else if p.r.Peek(0) == nil {
					_ = p.r.Wait(time.Millisecond)
				}
				if s := p.r.Peek(0); s != nil {
					d := time.Now().UnixNano() - int64(binary.NativeEndian.Uint64(s.Data()))
					sum += d
					worst = max(worst, d)
					n++
					p.r.Release(1)
					break
				}
			}
		}
		b.ReportMetric(float64(sum)/float64(max(n, 1)), "ns/one-way")
		b.ReportMetric(float64(worst), "ns-max/one-way")
	})
}

// BenchmarkWriterReaders: what readers cost the writer. One op is a Send
// of 32 packets of 1,200 bytes, as fast as the writer goes; 0, 1, 2 or 4
// readers follow it in Direct mode, each consumer on a goroutine of its
// own that sleeps in its Notifier when it has taken everything, as a
// subscriber does: on the ring's futex (futex_waitv) for shm, in
// epoll_wait for the loopback multicast pair measured the same way.
// Nothing holds the writer back: a shm reader too slow is lapped, a UDP
// one loses datagrams in its socket buffer. packets/s is the writer's
// rate; compare it across the reader counts of one run. read-share is the
// fraction of the packets the readers got.
func BenchmarkWriterReaders(b *testing.B) {
	for _, transport := range []string{"shm", "udp"} {
		for _, readers := range []int{0, 1, 2, 4} {
			b.Run(transport+"/readers="+strconv.Itoa(readers), func(b *testing.B) {
				writerReaders(b, transport, readers)
			})
		}
	}
}

func writerReaders(b *testing.B, transport string, readers int) {
	var send func([][]byte) error
	var wakes func() uint64
	var open func() (ud.Receiver, *ud.Notifier)
	switch transport {
	case "shm":
		c := testConfig(ringDir(b), Direct)
		c.MaxDatagram, c.Slots, c.RingSlots = 1472, 1<<13, 1<<12
		s := newSender(b, c)
		send, wakes = s.Send, func() uint64 { return s.Stats().Syscalls }
		open = func() (ud.Receiver, *ud.Notifier) {
			rc := c
			rc.Notifier = ud.NewNotifier()
			return newReceiver(b, rc), rc.Notifier
		}
	default:
		s, c := udpSender(b, "239.77.200.2", Direct)
		send = s.Send
		open = func() (ud.Receiver, *ud.Notifier) {
			rc := c
			rc.Notifier = ud.NewNotifier()
			r, err := udp.NewReceiver(rc)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { r.Close(); rc.Notifier.Close() })
			return r, rc.Notifier
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var got atomic.Uint64
	for range readers {
		r, n := open()
		fill := r.(ud.Filler).Fill
		wg.Add(1)
		go func() {
			defer wg.Done()
			poll := func() int {
				fill()
				k := 0
				for r.Peek(k) != nil {
					k++
				}
				r.Release(k)
				return k
			}
			for {
				select {
				case <-stop:
					got.Add(r.Stats().Datagrams)
					return
				default:
				}
				if poll() == 0 {
					n.Wait(time.Millisecond, stop, poll)
				}
			}
		}()
	}
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = make([]byte, 1200)
	}
	b.ReportAllocs()
	b.SetBytes(32 * 1200)
	sent := uint64(0)
	start := time.Now()
	for b.Loop() {
		if err := send(batch); err != nil {
			b.Fatal(err)
		}
		sent += 32
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "packets/s")
	if readers > 0 {
		b.ReportMetric(float64(got.Load())/float64(uint64(readers)*sent), "read-share")
		if wakes != nil {
			b.ReportMetric(float64(wakes())/float64(sent)*32, "wakes/send")
		}
	}
}

// BenchmarkSendWake: what a Send of one packet costs the writer when a
// reader sleeps on the futex (so the Send wakes it) against none: the
// time of the Send call alone. After each Send the benchmark waits until
// the reader took the packet and went back to sleep, outside the timing.
func BenchmarkSendWake(b *testing.B) {
	for _, sleeper := range []bool{false, true} {
		name := "no-reader"
		if sleeper {
			name = "sleeping-reader"
		}
		b.Run(name, func(b *testing.B) {
			c := testConfig(ringDir(b), Direct)
			s := newSender(b, c)
			var took atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if sleeper {
				r := newReceiver(b, c)
				wg.Add(1)
				go func() {
					defer wg.Done()
					poll := func() int {
						r.Fill()
						k := 0
						for r.Peek(k) != nil {
							k++
						}
						r.Release(k)
						took.Add(uint64(k))
						return k
					}
					for {
						select {
						case <-stop:
							return
						default:
						}
						if poll() == 0 {
							c.Notifier.Wait(time.Second, stop, poll)
						}
					}
				}()
			}
			pkt := [][]byte{make([]byte, 64)}
			var spent time.Duration
			sent := uint64(0)
			for b.Loop() {
				if sleeper {
					// Wait until the reader took the last packet and sleeps.
					for took.Load() < sent || s.r.sleeping.Load() == 0 {
						runtime.Gosched()
					}
				}
				t0 := time.Now()
				if err := s.Send(pkt); err != nil {
					b.Fatal(err)
				}
				spent += time.Since(t0)
				sent++
			}
			close(stop)
			s.Close() // wakes the reader for good
			wg.Wait()
			b.ReportMetric(float64(spent.Nanoseconds())/float64(sent), "ns/Send")
			b.ReportMetric(float64(s.Stats().Syscalls)/float64(sent), "wakes/Send")
		})
	}
}
