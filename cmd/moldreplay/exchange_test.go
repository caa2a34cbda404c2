package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/mold"
)

// sliceInput serves messages from memory, recorded at stamps, or each 1 µs
// after the last when stamps is nil.
type sliceInput struct {
	msgs   [][]byte
	stamps []int64
	i      int
}

func (s *sliceInput) Next() ([]byte, int64, error) {
	if s.i == len(s.msgs) {
		return nil, 0, io.EOF
	}
	s.i++
	if s.stamps != nil {
		return s.msgs[s.i-1], s.stamps[s.i-1], nil
	}
	return s.msgs[s.i-1], int64(s.i) * 1000, nil
}

// stepClock reads 1 ms later at every call, and remembers its last reading.
type stepClock struct{ now int64 }

func (c *stepClock) read() int64 { c.now += int64(time.Millisecond); return c.now }

// tapeSender records each datagram with the test clock's reading when it
// was sent.
type tapeSender struct {
	clock *stepClock
	pkts  [][]byte
	at    []int64
}

func (s *tapeSender) Send(d [][]byte) error {
	for _, b := range d {
		s.pkts = append(s.pkts, append([]byte(nil), b...))
		s.at = append(s.at, s.clock.now)
	}
	return nil
}

func testExchange(t testing.TB, clock func() int64, lines []*line) *exchange {
	return testExchangeConfig(t, exchangeConfig{Clock: clock}, lines)
}

func testExchangeConfig(t testing.TB, cfg exchangeConfig, lines []*line) *exchange {
	cfg.Session, cfg.MaxDatagram, cfg.EndRepeat, cfg.Log = mold.Session([]byte("SILENCE   ")), 200, 1, zerolog.Nop()
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = time.Hour
	}
	x, err := newExchange(cfg, lines, newStore(0))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestSilenceWindow: a silenced line sends nothing whose send time, from the
// first packet, falls in the window, and everything else; the other line
// sends everything.
func TestSilenceWindow(t *testing.T) {
	clock := &stepClock{}
	want := fileMessages(t, snippet)
	a, b := &tapeSender{clock: clock}, &tapeSender{clock: clock}
	win := Window{From: 5 * time.Millisecond, Until: 12 * time.Millisecond}
	la := &line{out: a, loss: newLossState(Loss{}, 1, 0)}
	lb := &line{out: b, loss: newLossState(Loss{Silence: win}, 1, 1)}
	x := testExchange(t, clock.read, []*line{la, lb})
	if err := x.run(context.Background(), &sliceInput{msgs: want}); err != nil {
		t.Fatal(err)
	}
	first := a.at[0]
	var silenced, silencedMsgs int
	j := 0
	for i, p := range a.pkts {
		since := time.Duration(a.at[i] - first)
		n, _ := mold.MessageCount(p)
		if since >= win.From && since < win.Until {
			silenced++
			silencedMsgs += n
			continue
		}
		if j >= len(b.pkts) || !bytes.Equal(b.pkts[j], p) {
			t.Fatalf("packet %d (at +%v, outside the window) is not line B's next", i, since)
		}
		j++
	}
	if j != len(b.pkts) {
		t.Errorf("line B sent %d packets, %d of them outside the window", len(b.pkts), j)
	}
	if silenced == 0 || lb.stats.SilencedPackets != uint64(silenced) || lb.stats.SilencedMessages != uint64(silencedMsgs) {
		t.Errorf("%d packets (%d messages) sent in the window; line B counts %d silenced (%d messages); want equal and some",
			silenced, silencedMsgs, lb.stats.SilencedPackets, lb.stats.SilencedMessages)
	}
	if la.stats.SilencedPackets != 0 || la.stats.Packets != uint64(len(a.pkts)) {
		t.Errorf("line A: %+v, want all %d packets sent", la.stats, len(a.pkts))
	}
}

// TestITCHInputStamps: the input gives every message of the file, plain or
// gzip, with its ITCH timestamp (bytes 5 to 10, big-endian).
func TestITCHInputStamps(t *testing.T) {
	want := fileMessages(t, snippet)
	for _, path := range []string{snippet, gzipped(t, snippet)} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		in, err := newITCHInput(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			m, ns, err := in.Next()
			var ts int64
			for _, c := range w[5:11] {
				ts = ts<<8 | int64(c)
			}
			if err != nil || !bytes.Equal(m, w) || ns != ts {
				t.Fatalf("%s: message %d: %v, stamp %d; want the file's, stamp %d", path, i+1, err, ns, ts)
			}
		}
		if _, _, err := in.Next(); err != io.EOF {
			t.Errorf("%s: after the last message: %v, want io.EOF", path, err)
		}
		f.Close()
	}
}

// TestStoreBound: a bounded store keeps at least its limit of the newest
// messages, byte for byte, and answers nothing older or unpublished.
func TestStoreBound(t *testing.T) {
	const limit, total = 5000, 20000
	s := newStore(limit)
	msg := func(seq uint64) []byte { return []byte(fmt.Sprintf("message %d", seq)) }
	for seq := uint64(1); seq <= total; seq++ {
		s.add(msg(seq))
	}
	s.publish(total - 9) // the last 10 are in a packet not yet sent
	if old := s.oldest(); old > total-limit+1 || old == 1 {
		t.Fatalf("oldest held %d: want some dropped and the newest %d kept", s.oldest(), limit)
	}
	seq := s.oldest()
	n := s.get(seq, func(m []byte) bool {
		if !bytes.Equal(m, msg(seq)) {
			t.Fatalf("message %d is %q", seq, m)
		}
		seq++
		return true
	})
	if seq != total-9 || n != int(total-9-s.oldest()) {
		t.Errorf("read up to %d (%d messages), want up to the published %d", seq, n, total-9)
	}
	if n := s.get(s.oldest()-1, func([]byte) bool { return true }); n != 0 {
		t.Errorf("a dropped message was read (%d)", n)
	}
}

// TestExchangeAllocs: publishing allocates nothing per message; only a new
// store chunk (4096 messages) allocates.
func TestExchangeAllocs(t *testing.T) {
	want := fileMessages(t, snippet)
	var msgs [][]byte
	for len(msgs) < 100_000 {
		msgs = append(msgs, want...)
	}
	discard := discardSender{}
	var clock stepClock
	allocs := testing.AllocsPerRun(1, func() {
		x := testExchange(t, clock.read, []*line{{out: discard, loss: newLossState(Loss{P: 0.01}, 1, 0)}})
		x.run(context.Background(), &sliceInput{msgs: msgs})
	})
	if per := allocs / float64(len(msgs)); per > 0.002 {
		t.Errorf("%v allocations for %d messages: %.4f per message, want none but a store chunk's", allocs, len(msgs), per)
	}
}

type discardSender struct{}

func (discardSender) Send([][]byte) error { return nil }

// TestRecordedSpeed: at --speed F each message goes out at its recorded time
// since the first message divided by F, on the exchange's clock, to within
// the few readings (of 1 ms each) a send takes; a message not yet due sends
// what is pending; a long pause in the recording is filled with
// heartbeats. The clock is the test's (1 ms a reading), so nothing here
// depends on how fast the host is.
func TestRecordedSpeed(t *testing.T) {
	msgs := fileMessages(t, snippet)[:60]
	stamps := make([]int64, len(msgs))
	for i := range stamps {
		stamps[i] = 34200e9 + int64(i)*10e3 // 10 µs apart, from 09:30
		if i >= 40 {
			stamps[i] += 200e3 // a pause of 200 µs before message 41
		}
	}
	const speed = 0.002 // 10 µs recorded: 5 ms here; the pause: 100 ms
	clock := &stepClock{}
	a := &tapeSender{clock: clock}
	la := &line{out: a, loss: newLossState(Loss{}, 1, 0)}
	x := testExchangeConfig(t, exchangeConfig{Clock: clock.read, Speed: speed, Heartbeat: 20 * time.Millisecond}, []*line{la})
	if err := x.run(context.Background(), &sliceInput{msgs: msgs, stamps: stamps}); err != nil {
		t.Fatal(err)
	}
	var first int64
	var heartbeats int
	for i, b := range a.pkts {
		p, err := mold.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if p.IsHeartbeat() {
			heartbeats++
			continue
		}
		if p.IsEndOfSession() {
			continue
		}
		if p.Seq == 1 {
			first = a.at[i]
		}
		// Each message is due by the time the next is: one per packet.
		if p.Messages() != 1 {
			t.Errorf("packet at %d holds %d messages, want 1 (each is sent before the next is due)", p.Seq, p.Messages())
		}
		due := time.Duration(float64(stamps[p.Seq-1]-stamps[0]) / speed)
		got := time.Duration(a.at[i] - first)
		if got < due-3*time.Millisecond || got > due+3*time.Millisecond {
			t.Errorf("message %d sent at +%v, due at +%v", p.Seq, got, due)
		}
	}
	// The 100 ms pause holds 4 or 5 heartbeat intervals of 20 ms.
	if heartbeats < 3 || uint64(heartbeats) != x.heartbeats {
		t.Errorf("%d heartbeats sent (%d counted), want some in the 100 ms pause", heartbeats, x.heartbeats)
	}
}

// TestRatePacing: at --rate N message i goes out i/N after the first, on the
// exchange's clock, to within the few readings a send takes.
func TestRatePacing(t *testing.T) {
	msgs := fileMessages(t, snippet)[:40]
	clock := &stepClock{}
	a := &tapeSender{clock: clock}
	x := testExchangeConfig(t, exchangeConfig{Clock: clock.read, Rate: 200}, []*line{{out: a, loss: newLossState(Loss{}, 1, 0)}})
	if err := x.run(context.Background(), &sliceInput{msgs: msgs}); err != nil {
		t.Fatal(err)
	}
	var first int64
	for i, b := range a.pkts {
		p, err := mold.Parse(b)
		if err != nil || p.Messages() == 0 {
			continue
		}
		if p.Seq == 1 {
			first = a.at[i]
		}
		due := time.Duration(p.Seq-1) * 5 * time.Millisecond // 200/s
		if got := time.Duration(a.at[i] - first); p.Messages() != 1 || got < due-3*time.Millisecond || got > due+3*time.Millisecond {
			t.Errorf("packet at %d (%d messages) sent at +%v, due at +%v", p.Seq, p.Messages(), got, due)
		}
	}
	if x.messages != uint64(len(msgs)) {
		t.Errorf("%d messages published, want %d", x.messages, len(msgs))
	}
}
