package upstream

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

var testSession = mold.Session{'T', 'E', 'S', 'T', 'S', 'E', 'S', 'S', '0', '1'}

// message returns the test message of sequence seq.
func message(seq uint64) []byte { return fmt.Appendf(nil, "message %06d", seq) }

// packet returns a MoldUDP64 packet of messages from..to of the test
// session.
func packet(t testing.TB, from, to uint64) []byte {
	b, err := mold.NewBuilder(65507)
	if err != nil {
		t.Fatal(err)
	}
	b.Start(testSession, from)
	for s := from; s <= to; s++ {
		if !b.Add(message(s)) {
			t.Fatalf("message %d does not fit", s)
		}
	}
	return append([]byte(nil), b.Finish()...)
}

// exchange is a re-request server: it answers each request with at most
// perAnswer of the messages 1..last (as an exchange answers one packet's
// worth), unless answer says otherwise for the n-th request (from 0).
type exchange struct {
	conn      *net.UDPConn
	last      uint64
	perAnswer uint64
	answer    func(n int, r mold.Request) []byte // nil: the default answer; return nil to send nothing
	mu        sync.Mutex
	requests  []mold.Request
	done      chan struct{}
}

func newExchange(t *testing.T, last, perAnswer uint64, answer func(n int, r mold.Request) []byte) *exchange {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	x := &exchange{conn: c, last: last, perAnswer: perAnswer, answer: answer, done: make(chan struct{})}
	go x.serve(t)
	t.Cleanup(func() { c.Close(); <-x.done })
	return x
}

func (x *exchange) addr() netip.AddrPort { return x.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (x *exchange) serve(t *testing.T) {
	defer close(x.done)
	buf := make([]byte, 100)
	for {
		n, from, err := x.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		r, err := mold.ParseRequest(buf[:n])
		if err != nil {
			t.Errorf("request %x: %v", buf[:n], err)
			continue
		}
		x.mu.Lock()
		k := len(x.requests)
		x.requests = append(x.requests, r)
		x.mu.Unlock()
		var ans []byte
		if x.answer != nil {
			ans = x.answer(k, r)
		} else if r.Seq <= x.last {
			ans = packet(t, r.Seq, min(r.Seq+uint64(r.Count)-1, r.Seq+x.perAnswer-1, x.last))
		}
		if ans != nil {
			x.conn.WriteToUDPAddrPort(ans, from)
		}
	}
}

func (x *exchange) sent() []mold.Request {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]mold.Request(nil), x.requests...)
}

// openTest opens a feed on a group nobody sends to: the test hands it its
// packets with Feed.packet.
func openTest(t testing.TB, cfg Config) *Feed {
	t.Helper()
	cfg.A = netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 79, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), uint16(20000+rand.IntN(20000)))
	f, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// drain calls Next until it ends, after feedPackets(k) before the k-th call
// until it returns false, and returns what it yielded: the sequences of the
// messages (each checked against its content) and, as 0, each loss.
func drain(t *testing.T, f *Feed, feedPackets func(k int) bool) ([]uint64, error) {
	t.Helper()
	var got []uint64
	deadline := time.Now().Add(20 * time.Second)
	for k := 0; ; k++ {
		if feedPackets != nil && !feedPackets(k) {
			feedPackets = nil
		}
		msg, off, err := f.Next()
		switch {
		case err == nil:
			if string(msg) != string(message(uint64(off))) {
				t.Fatalf("message %d is %q", off, msg)
			}
			got = append(got, uint64(off))
		case errors.Is(err, itch.ErrLost):
			got = append(got, 0)
		case err == feed.ErrIdle:
			if time.Now().After(deadline) {
				t.Fatalf("no end after %d messages; stats %+v", len(got), f.Stats())
			}
		default:
			return got, err
		}
	}
}

// seqs returns from..to.
func seqs(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func equal(t *testing.T, got, want []uint64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// TestLateStartReplaysFromOne: a feed met at sequence 501, beyond the
// window, asks for 1..500 from the exchange in requests of at most MaxCount,
// continuing where each partial answer ended, takes the live packets
// beyond the window only as word of how far the stream goes, and yields
// every message once, in order.
func TestLateStartReplaysFromOne(t *testing.T) {
	x := newExchange(t, 600, 7, nil)
	f := openTest(t, Config{Rerequest: x.addr(), MaxCount: 50, Window: 64})
	got, err := drain(t, f, func(k int) bool {
		if k < 10 {
			s := 501 + uint64(k)*10
			f.packet(k&1, packet(t, s, s+9), 0)
			return true
		}
		f.packet(0, mold.AppendEndOfSession(nil, testSession, 601), 0)
		return false
	})
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	equal(t, got, seqs(1, 600))
	st := f.Stats()
	for _, r := range x.sent() {
		if r.Count > 50 || r.Session != testSession {
			t.Errorf("request %+v: more than MaxCount 50, or another session", r)
		}
	}
	if st.Deferred == 0 || st.Tracker.Recovered < 500 || st.Lost != [numReasons]uint64{} {
		t.Errorf("stats %+v", st)
	}
}

// TestStartFrom: the stream starts at StartFrom; what lies before it is one
// loss, reason skipped, reported before the first message.
func TestStartFrom(t *testing.T) {
	var events []seqgap.Event
	f := openTest(t, Config{StartFrom: 100, OnEvent: func(ev *seqgap.Event) { events = append(events, *ev) }})
	got, err := drain(t, f, func(k int) bool {
		switch k {
		case 0:
			f.packet(0, packet(t, 90, 105), 0)
		case 1:
			f.packet(0, packet(t, 106, 110), 0)
		default:
			f.packet(0, mold.AppendEndOfSession(nil, testSession, 111), 0)
			return false
		}
		return true
	})
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	equal(t, got, append([]uint64{0}, seqs(100, 110)...))
	if st := f.Stats(); st.Lost[seqgap.LossSkipped] != 99 {
		t.Errorf("lost %v, want 99 skipped", st.Lost)
	}
	found := false
	for _, ev := range events {
		found = found || ev.Kind == seqgap.EventLost && ev.Range == (seqgap.Range{From: 1, To: 99}) && ev.Reason == seqgap.LossSkipped
	}
	if !found {
		t.Errorf("no loss of 1..99 reported: %+v", events)
	}
}

// TestRetriesThenGiveUp: requests the exchange drops are sent again after
// Timeout; one never answered is given up after Retries and its range is
// lost (refused), flagged where it lies; everything else arrives.
func TestRetriesThenGiveUp(t *testing.T) {
	var errs []error
	x := newExchange(t, 40, 100, func(n int, r mold.Request) []byte {
		switch {
		case r.Seq == 11 && n == 0:
			return nil // the first request for 11.. is lost once
		case r.Seq == 21:
			return nil // 21.. is never answered
		}
		return packet(t, r.Seq, r.Seq+uint64(r.Count)-1)
	})
	f := openTest(t, Config{Rerequest: x.addr(), Timeout: 20 * time.Millisecond, Retries: 2,
		OnError: func(err error) { errs = append(errs, err) }})
	got, err := drain(t, f, func(k int) bool {
		switch k {
		case 0:
			f.packet(0, packet(t, 1, 10), 0)
		case 1:
			f.packet(0, packet(t, 16, 20), 0) // 11..15 missing
		case 2:
			f.packet(0, packet(t, 26, 40), 0) // 21..25 missing
		default:
			f.packet(0, mold.AppendEndOfSession(nil, testSession, 41), 0)
			return false
		}
		return true
	})
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	want := append(seqs(1, 20), 0)
	equal(t, got, append(want, seqs(26, 40)...))
	st := f.Stats()
	if st.Retries < 1 || st.GaveUp != 1 || st.Lost[seqgap.LossRefused] != 5 {
		t.Errorf("stats: retries %d, given up %d, lost %v", st.Retries, st.GaveUp, st.Lost)
	}
	tries := 0
	for _, r := range x.sent() {
		if r.Seq == 21 {
			tries++
		}
	}
	var gu *GiveUpError
	if tries != 3 || len(errs) != 1 || !errors.As(errs[0], &gu) || gu.Range != (seqgap.Range{From: 21, To: 25}) || gu.Tries != 3 {
		t.Errorf("21..25 asked %d times (want 1 + 2 retries); errors %v", tries, errs)
	}
}

// TestGarbageAnswers: answers that are not MoldUDP64 packets are counted,
// reported with their source and reason, and dropped; the range they
// failed to bring is lost, nothing else.
func TestGarbageAnswers(t *testing.T) {
	var errs []error
	x := newExchange(t, 20, 100, func(n int, r mold.Request) []byte {
		return []byte("not a MoldUDP64 packet")
	})
	f := openTest(t, Config{Rerequest: x.addr(), Timeout: 10 * time.Millisecond, Retries: 1,
		OnError: func(err error) { errs = append(errs, err) }})
	got, err := drain(t, f, func(k int) bool {
		switch k {
		case 0:
			f.packet(0, packet(t, 1, 5), 0)
		case 1:
			f.packet(1, []byte{1, 2, 3}, 0) // malformed on line B
			f.packet(0, packet(t, 8, 20), 0)
		default:
			f.packet(0, mold.AppendEndOfSession(nil, testSession, 21), 0)
			return false
		}
		return true
	})
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	equal(t, got, append(append(seqs(1, 5), 0), seqs(8, 20)...))
	st := f.Stats()
	if st.BadAnswers != 2 || st.Malformed != 1 || st.Lost[seqgap.LossRefused] != 2 {
		t.Errorf("stats: bad answers %d, malformed %d, lost %v", st.BadAnswers, st.Malformed, st.Lost)
	}
	var de *DatagramError
	if len(errs) == 0 || !errors.As(errs[0], &de) || de.Source != "line B" {
		t.Errorf("errors %v", errs)
	}
}

// TestIdle: with nothing arriving, Next returns feed.ErrIdle after about
// IdleWait, again and again, without ending.
func TestIdle(t *testing.T) {
	f := openTest(t, Config{IdleWait: 5 * time.Millisecond})
	for range 3 {
		if _, _, err := f.Next(); err != feed.ErrIdle {
			t.Fatalf("Next: %v, want feed.ErrIdle", err)
		}
	}
}

// TestNextDoesNotAllocate: taking packets in order and yielding their
// messages allocates nothing per message.
func TestNextDoesNotAllocate(t *testing.T) {
	f := openTest(t, Config{})
	const per = 10
	pkts := make([][]byte, 200)
	for i := range pkts {
		s := uint64(i*per) + 1
		pkts[i] = packet(t, s, s+per-1)
	}
	i := 0
	allocs := testing.AllocsPerRun(len(pkts)-1, func() {
		f.packet(i&1, pkts[i], 0)
		i++
		for range per {
			if _, _, err := f.Next(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per packet of %d messages", allocs, per)
	}
}

// TestPending: Pending says whether Next returns at once. After a packet
// of three messages it does for three calls, then not (Next would wait
// for the network), and the stream's end is pending too.
func TestPending(t *testing.T) {
	f := openTest(t, Config{IdleWait: 5 * time.Millisecond})
	if f.Pending() {
		t.Fatal("pending before any packet")
	}
	f.packet(0, packet(t, 1, 3), 0)
	for seq := uint64(1); seq <= 3; seq++ {
		if !f.Pending() {
			t.Fatalf("message %d of a packet taken is not pending", seq)
		}
		if msg, off, err := f.Next(); err != nil || uint64(off) != seq || string(msg) != string(message(seq)) {
			t.Fatalf("Next: %q, %d, %v; want message %d", msg, off, err, seq)
		}
	}
	if f.Pending() {
		t.Fatal("pending with every message of the packet returned")
	}
	if _, _, err := f.Next(); err != feed.ErrIdle {
		t.Fatalf("Next with nothing pending: %v, want feed.ErrIdle", err)
	}
	f.err = io.EOF
	if !f.Pending() {
		t.Fatal("the end of the stream is not pending")
	}
}

// TestRecvNs: RecvNs is when the datagram that carried the message Next
// returned arrived: the first of its copies on lines A and B, a message
// held behind a gap its own datagram's time, and a message recovered
// upstream its answer's.
func TestRecvNs(t *testing.T) {
	x := newExchange(t, 30, 100, func(int, mold.Request) []byte { return nil }) // answers by hand below
	f := openTest(t, Config{Rerequest: x.addr(), IdleWait: 5 * time.Millisecond})
	steps := []func(){
		func() { f.packet(0, packet(t, 1, 5), 1000); f.packet(1, packet(t, 1, 5), 1100) },
		func() { f.packet(1, packet(t, 6, 10), 2000); f.packet(0, packet(t, 6, 10), 2100) },
		func() { f.packet(0, packet(t, 16, 20), 3000); f.packet(0, packet(t, 11, 15), 3100) },
		func() { f.packet(1, packet(t, 26, 30), 4000) }, // 21..25 only from the re-request server
		func() { f.answer(packet(t, 21, 25), 3500) },
		func() { f.packet(0, mold.AppendEndOfSession(nil, testSession, 31), 5000) },
	}
	var got []int64
	deadline := time.Now().Add(20 * time.Second)
	for k := 0; ; k++ {
		if k < len(steps) {
			steps[k]()
		}
		msg, off, err := f.Next()
		if err == io.EOF {
			break
		}
		if err == feed.ErrIdle {
			if time.Now().After(deadline) {
				t.Fatalf("no end; got %v", got)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if uint64(off) != uint64(len(got))+1 || string(msg) != string(message(uint64(off))) {
			t.Fatalf("message %d is %q, after %d", off, msg, len(got))
		}
		got = append(got, f.RecvNs())
	}
	var want []int64
	for _, ns := range []int64{1000, 2000, 3100, 3000, 3500, 4000} {
		want = append(want, ns, ns, ns, ns, ns)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("RecvNs of messages 1..30:\n got %v\nwant %v", got, want)
	}
}
