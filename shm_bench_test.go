package tickcast

import (
	"encoding/binary"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/shm"
	"github.com/tickcast/tickcast/ud/udp"
)

// tapeSender keeps a copy of every packet a Publisher sends it.
type tapeSender struct {
	max  int
	pkts [][]byte
}

func (s *tapeSender) MaxDatagram() int { return s.max }
func (s *tapeSender) Send(d [][]byte) error {
	for _, p := range d {
		s.pkts = append(s.pkts, append([]byte(nil), p...))
	}
	return nil
}
func (s *tapeSender) Stats() ud.SendStats { return ud.SendStats{} }
func (s *tapeSender) Close() error        { return nil }

// shmTape publishes the synthetic feed's definitions and then n quotes and
// trades on one channel into full packets of maxDG bytes, and returns the
// definitions' packets and the others'.
func shmTape(tb testing.TB, n, maxDG int) (defs, data [][]byte) {
	tb.Helper()
	tape := &tapeSender{max: maxDG}
	pub, err := NewPublisher(PublisherConfig{Channels: 1, GroupA: netip.MustParseAddrPort("239.79.255.1:31999"), MaxDatagram: maxDG,
		NewSender: func(ud.LineID) (ud.Sender, error) { return tape, nil }})
	if err != nil {
		tb.Fatal(err)
	}
	defer pub.Close()
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: benchInstruments, Channels: 1})
	if err != nil {
		tb.Fatal(err)
	}
	var m feed.Msg
	for published := 0; published < n; {
		if err := src.Next(&m); err != nil {
			tb.Fatal(err)
		}
		if m.Type != feed.TypeDefinition {
			if defs == nil {
				if err := pub.Flush(Now()); err != nil {
					tb.Fatal(err)
				}
				defs, tape.pkts = tape.pkts, nil
			}
			published++
		}
		if err := pub.Publish(&m, Now()); err != nil {
			tb.Fatal(err)
		}
	}
	if err := pub.Flush(Now()); err != nil {
		tb.Fatal(err)
	}
	return defs, tape.pkts
}

// BenchmarkTapeRelease measures how fast a subscriber releases ticks from a
// shared-memory ring when the writer is not the limit: the writer sends a
// tape of full packets, made once by a Publisher, with each packet's
// sequence number rewritten, as fast as the subscriber takes them (at most
// half its ring ahead, so that nothing is lapped). One op is one tick
// released to the handler; ticks/s is the rate, writer and subscriber
// sharing the machine's cores.
func BenchmarkTapeRelease(b *testing.B) {
	defs, data := shmTape(b, 40000, 1472)
	for _, mode := range []ud.Mode{ud.DirectSpin, ud.Direct} {
		b.Run("shm/"+mode.String(), func(b *testing.B) {
			dir, err := os.MkdirTemp(shmBenchDir(), "tickcast-bench-")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			sc := shm.Config{Dir: dir, Feed: "bench", MaxDatagram: 1472, Slots: 16384, RingSlots: 4096, Mode: mode, CPU: -1}
			id := ud.LineID{Channel: 0, Line: ud.LineA, Group: netip.MustParseAddrPort("239.79.255.1:31999")}
			// Half the subscriber's ring of packets.
			releaseTape(b, defs, data, id, shm.Senders(sc), shm.Receivers(sc), mode, 2048)
		})
	}
	// The same over loopback multicast, in the same run: the socket
	// buffer is the queue, so the writer keeps fewer packets ahead.
	for _, mode := range []ud.Mode{ud.DirectSpin, ud.Direct} {
		b.Run("udp/"+mode.String(), func(b *testing.B) {
			uc := udp.Config{Mode: mode, CPU: -1, MaxDatagram: 1472, RcvBuf: 4 << 20}
			id := ud.LineID{Channel: 0, Line: ud.LineA, Group: benchGroup(b)}
			releaseTape(b, defs, data, id, udp.Senders(uc), udp.Receivers(uc), mode, 128)
		})
	}
}

// releaseTape is BenchmarkTapeRelease over one transport: the definitions,
// then b.N ticks of the tape, at most inFlight packets ahead of what the
// subscriber released.
func releaseTape(b *testing.B, defs, data [][]byte, id ud.LineID, newSender ud.NewSenderFunc, newReceiver ud.NewReceiverFunc, mode ud.Mode, inFlight uint64) {
	w, err := newSender(id)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	sub, err := NewSubscriber(SubscriberConfig{Channels: 1, GroupA: id.Group, NewReceiver: newReceiver})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	var h countHandler
	var released atomic.Uint64
	if err := w.Send(defs); err != nil {
		b.Fatal(err)
	}
	ndefs := uint64(0)
	for _, p := range defs {
		ndefs += uint64(binary.BigEndian.Uint16(p[18:]))
	}
	perPacket := uint64(binary.BigEndian.Uint16(data[0][18:]))
	ahead := inFlight * perPacket // in ticks
	want := ndefs + uint64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	sent := make(chan error, 1)
	go func() {
		seq := ndefs + 1
		batch := make([][]byte, 0, 32)
		for i := 0; seq <= want; {
			for seq-1-released.Load() > ahead {
				runtime.Gosched() // at most inFlight packets ahead
			}
			batch = batch[:0]
			for len(batch) < cap(batch) && seq <= want {
				p := data[i]
				binary.BigEndian.PutUint64(p[10:], seq)
				seq += uint64(binary.BigEndian.Uint16(p[18:]))
				batch = append(batch, p)
				if i++; i == len(data) {
					i = 0
				}
			}
			if err := w.Send(batch); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	poll := func() int { return sub.Poll(&h, 4096) }
	deadline := time.Now().Add(time.Minute)
	for h.messages < want {
		if n := poll(); n > 0 {
			released.Store(h.messages)
			continue
		}
		if mode == ud.Direct {
			sub.notify.Wait(time.Millisecond, nil, poll)
		}
		if time.Now().After(deadline) {
			b.Fatalf("released %d of %d ticks in a minute: %+v", h.messages, want, sub.Stats())
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := <-sent; err != nil {
		b.Fatal(err)
	}
	if h.missing != 0 {
		b.Fatalf("%d ticks missing: %+v", h.missing, sub.Stats())
	}
	b.ReportMetric(float64(h.messages-ndefs)/elapsed.Seconds(), "ticks/s")
}

// shmBenchDir is where the benchmarks' rings go: the host's tmpfs, as the
// feed handler's default, where there is one.
func shmBenchDir() string {
	if st, err := os.Stat(shm.DefaultDir); err == nil && st.IsDir() {
		return shm.DefaultDir
	}
	return os.TempDir()
}
