package tickcast

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/verify"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// pubHarness is a one-channel publisher whose packets a real UDP receiver
// on the same group reads back.
type pubHarness struct {
	t   *testing.T
	pub *Publisher
	rx  *udp.Receiver
	syn *feed.Synthetic
}

func newPubHarness(t *testing.T, cfg PublisherConfig) *pubHarness {
	t.Helper()
	ga, _ := testGroups(t)
	rx, err := udp.NewReceiver(udp.Config{Group: ga.Addr(), Port: int(ga.Port()), MaxDatagram: 9000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })
	cfg.Channels, cfg.GroupA = 1, ga
	cfg.NewSender = udp.Senders(udp.Config{MaxDatagram: 9000})
	pub, err := NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	syn, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 3, Channels: 1})
	return &pubHarness{t: t, pub: pub, rx: rx, syn: syn}
}

func (h *pubHarness) publish(n int, nowNs int64) {
	h.t.Helper()
	var m feed.Msg
	for i := 0; i < n; i++ {
		h.syn.Next(&m)
		if err := h.pub.Publish(&m, nowNs); err != nil {
			h.t.Fatal(err)
		}
	}
}

// packets returns the datagrams received within a short wait.
func (h *pubHarness) packets(want int) []mold.Packet {
	h.t.Helper()
	var out []mold.Packet
	deadline := time.Now().Add(2 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		s := h.rx.Peek(0)
		if s == nil {
			h.rx.Wait(10 * time.Millisecond)
			continue
		}
		p, err := mold.Parse(append([]byte{}, s.Data()...))
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, p)
		h.rx.Release(1)
	}
	if len(out) != want {
		h.t.Fatalf("received %d packets, want %d", len(out), want)
	}
	// Nothing more may come.
	h.rx.Wait(20 * time.Millisecond)
	if h.rx.Peek(0) != nil {
		h.t.Fatalf("more than %d packets sent", want)
	}
	return out
}

func TestPublisherMaxDelayAndHeartbeat(t *testing.T) {
	h := newPubHarness(t, PublisherConfig{MaxDelay: time.Millisecond, Heartbeat: 50 * time.Millisecond})
	t0 := Now()
	h.publish(3, t0)
	if err := h.pub.Poll(t0 + int64(time.Millisecond) - 1); err != nil {
		t.Fatal(err)
	}
	h.packets(0) // before the deadline: nothing
	before := time.Now().UnixNano()
	h.pub.Poll(t0 + int64(time.Millisecond))
	p := h.packets(1)[0]
	if p.Seq != 1 || p.Messages() != 3 || h.pub.Stats().FlushDeadline != 1 {
		t.Fatalf("deadline flush: seq %d count %d stats %+v", p.Seq, p.Messages(), h.pub.Stats())
	}
	// Every message carries the same send timestamp, taken at the flush,
	// and its per-instrument sequence.
	it := p.Iter()
	var m feed.Msg
	for raw, _, ok := it.Next(); ok; raw, _, ok = it.Next() {
		m.Decode(raw)
		if m.SendNs < before || m.SendNs > time.Now().UnixNano() || m.InstSeq != 1 {
			t.Fatalf("send_ns %d (flush after %d), inst_seq %d", m.SendNs, before, m.InstSeq)
		}
	}
	// Heartbeat after the idle interval, carrying the next sequence.
	flushed := t0 + int64(time.Millisecond)
	h.pub.Poll(flushed + int64(50*time.Millisecond) - 1)
	h.packets(0)
	h.pub.Poll(flushed + int64(50*time.Millisecond))
	hb := h.packets(1)[0]
	if !hb.IsHeartbeat() || hb.Seq != 4 || len(hb.Bytes()) != mold.HeaderLen {
		t.Fatalf("heartbeat %+v", hb.Header)
	}
	// End of session on Close, with the next sequence.
	h.publish(2, flushed+int64(60*time.Millisecond))
	if err := h.pub.Close(); err != nil {
		t.Fatal(err)
	}
	ps := h.packets(2)
	if ps[0].Seq != 4 || ps[0].Messages() != 2 || !ps[1].IsEndOfSession() || ps[1].Seq != 6 {
		t.Fatalf("close sent %+v then %+v", ps[0].Header, ps[1].Header)
	}
}

func TestPublisherFillsPacketsAndBatches(t *testing.T) {
	const maxDG = 500
	h := newPubHarness(t, PublisherConfig{MaxDatagram: maxDG, SendBatch: 4, MaxDelay: time.Hour})
	now := Now()
	// Nothing goes out until four packets are full; then all four go in one
	// batch.
	published := 0
	for h.pub.Stats().Packets == 0 {
		h.publish(1, now)
		published++
		if published > 100 {
			t.Fatal("no batch sent after 100 messages")
		}
	}
	if h.pub.Stats().Packets != 4 {
		t.Fatalf("first send carried %d packets, want a batch of 4", h.pub.Stats().Packets)
	}
	ps := h.packets(4)
	seq := uint64(1)
	for _, p := range ps {
		if len(p.Bytes()) > maxDG {
			t.Fatalf("packet of %d bytes > %d", len(p.Bytes()), maxDG)
		}
		// Full: the next message (at most 70 bytes with its block header)
		// would not have fit.
		if len(p.Bytes())+mold.BlockHdrLen+feed.MaxLen <= maxDG {
			t.Fatalf("packet of %d bytes closed early", len(p.Bytes()))
		}
		if p.Seq != seq {
			t.Fatalf("packet seq %d, want %d", p.Seq, seq)
		}
		seq += uint64(p.Messages())
	}
	if err := h.pub.Flush(now); err != nil {
		t.Fatal(err)
	}
	rest := h.packets(1)[0]
	if rest.Seq != seq || rest.Seq+uint64(rest.Messages()) != uint64(published)+1 || rest.Messages() != 1 {
		t.Fatalf("flush sent seq %d count %d, want the one message that did not fit (of %d)", rest.Seq, rest.Messages(), published)
	}
}

func TestPublisherRejectsUnknownInstrument(t *testing.T) {
	h := newPubHarness(t, PublisherConfig{})
	m := feed.Msg{Header: feed.Header{Type: feed.TypeQuote, Instrument: 99}}
	err := h.pub.Publish(&m, Now())
	if !errors.Is(err, ErrUnknownInstrument) || h.pub.Stats().UnknownInstrument != 1 {
		t.Fatalf("%v, stats %+v", err, h.pub.Stats())
	}
}

func TestPublisherConfigErrors(t *testing.T) {
	ga := netip.MustParseAddrPort("239.77.0.1:31001")
	ns := func(LineID) (ud.Sender, error) { return nil, errors.New("not reached") }
	for _, c := range []PublisherConfig{
		{Channels: 0, GroupA: ga, NewSender: ns},
		{Channels: 2, GroupA: ga},
		{Channels: 2, GroupA: netip.MustParseAddrPort("10.0.0.1:1"), NewSender: ns},
		{Channels: 4, GroupA: ga, GroupB: netip.MustParseAddrPort("239.77.0.3:31001"), NewSender: ns},
		{Channels: 1, GroupA: ga, NewSender: ns, MaxDatagram: 60},
	} {
		if _, err := NewPublisher(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// failingSender is a line whose every send fails, as a line whose route
// went away would.
type failingSender struct{ ud.Sender }

func (f failingSender) Send([][]byte) error { return errors.New("sendmmsg: network is unreachable") }

// TestRunSurvivesALineThatFails: one line failing to send is reported and
// the run goes on; the other line carries every packet.
func TestRunSurvivesALineThatFails(t *testing.T) {
	ga, gb := testGroups(t)
	rx, err := udp.NewReceiver(udp.Config{Group: ga.Addr(), Port: int(ga.Port()), RingSlots: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	open := udp.Senders(udp.Config{})
	pub, err := NewPublisher(PublisherConfig{Channels: 1, GroupA: ga, GroupB: gb, NewSender: func(id LineID) (ud.Sender, error) {
		s, err := open(id)
		if err == nil && id.Line == LineB {
			s = failingSender{s}
		}
		return s, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 5, Channels: 1, Count: 2000})
	var reported []error
	if err := pub.Run(context.Background(), src, RunConfig{Rate: 100000, OnError: func(err error) { reported = append(reported, err) }}); err != nil {
		t.Fatalf("Run stopped: %v", err)
	}
	pub.Close()
	if len(reported) == 0 || !errors.Is(reported[0], ErrSend) {
		t.Fatalf("reported %v, want ErrSend errors", reported)
	}
	// Line A got every data packet, the end of session too.
	got := 0
	for deadline := time.Now().Add(2 * time.Second); uint64(got) < pub.Stats().Packets+1 && time.Now().Before(deadline); {
		if rx.Peek(0) == nil {
			rx.Wait(10 * time.Millisecond)
			continue
		}
		rx.Release(1)
		got++
	}
	if uint64(got) < pub.Stats().Packets+1 {
		t.Fatalf("line A carried %d datagrams, the publisher sent %d packets and an end of session", got, pub.Stats().Packets)
	}
}

// idleSource is a live source: its messages come from syn, and between the
// first half and the rest it has nothing for idle calls of Next, each
// waiting a millisecond and returning feed.ErrIdle (idle < 0: for ever).
type idleSource struct {
	syn          *feed.Synthetic
	half, served int
	idle         int
	idled        chan struct{} // closed at the first idle call, if set
}

func (s *idleSource) Next(m *feed.Msg) error {
	if s.served == s.half && s.idle != 0 {
		if s.idled != nil {
			close(s.idled)
			s.idled = nil
		}
		s.idle--
		time.Sleep(time.Millisecond)
		return feed.ErrIdle
	}
	s.served++
	return s.syn.Next(m)
}

// TestRunKeepsHeartbeatsWhileSourceIdle: while a live source has nothing
// (feed.ErrIdle), Run keeps going and sends heartbeats; a cancel then ends
// it.
func TestRunKeepsHeartbeatsWhileSourceIdle(t *testing.T) {
	h := newPubHarness(t, PublisherConfig{MaxDelay: time.Millisecond, Heartbeat: 5 * time.Millisecond})
	syn, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 3, Channels: 1, Count: 30})
	src := &idleSource{syn: syn, half: 10, idle: 100}
	if err := h.pub.Run(context.Background(), &limited{src, 20}, RunConfig{}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := h.pub.Stats(); st.Messages != 20 || st.Heartbeats == 0 {
		t.Fatalf("published %d messages and %d heartbeats across 100 idle calls, want 20 and some", st.Messages, st.Heartbeats)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	idled := make(chan struct{})
	go func() { done <- h.pub.Run(ctx, &idleSource{syn: syn, half: 5, idle: -1, idled: idled}, RunConfig{}) }()
	<-idled
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end on cancel while the source was idle")
	}
}

// limited ends a source after n messages.
type limited struct {
	feed.Source
	n int
}

func (l *limited) Next(m *feed.Msg) error {
	if l.n == 0 {
		return io.EOF
	}
	err := l.Source.Next(m)
	if err == nil {
		l.n--
	}
	return err
}

// flakySender fails every send whose call number (from 0) is in a failing
// third of each run of six, as a line whose port goes down now and then.
type flakySender struct {
	ud.Sender
	calls *int
}

func (f flakySender) Send(pkts [][]byte) error {
	n := *f.calls
	*f.calls++
	if n%6 >= 4 {
		return errors.New("rdma: send: port not active")
	}
	return f.Sender.Send(pkts)
}

// TestPublishKeepsMessageWhenSendFails: when Publish finds the open packet
// full and the send that makes room fails, the message still goes into the
// next packet. The retransmission store (OnPacket) must see every message
// of the source, in order, under the sequence and instrument sequence it
// should have: a failed send is recovered from the store, never a message
// that silently vanished between the source and the sequencer.
func TestPublishKeepsMessageWhenSendFails(t *testing.T) {
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) {
			ga, _ := testGroups(t)
			const count = 3000
			cfg := feed.SyntheticConfig{Seed: 7, Instruments: 9, Channels: 1, Count: count}
			v, err := verify.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			open := udp.Senders(udp.Config{})
			calls := 0
			next := uint64(1)
			var bad error
			pub, err := NewPublisher(PublisherConfig{
				Channels: 1, GroupA: ga, MaxDatagram: 200, SendBatch: batch,
				NewSender: func(id LineID) (ud.Sender, error) {
					s, err := open(id)
					return flakySender{s, &calls}, err
				},
				OnPacket: func(_ int, _ mold.Session, first uint64, pkt []byte) {
					p, err := mold.Parse(pkt)
					if err != nil {
						t.Fatal(err)
					}
					it := p.Iter()
					for b, seq, ok := it.Next(); ok; b, seq, ok = it.Next() {
						if seq != next && bad == nil {
							bad = fmt.Errorf("stored sequence %d, want %d", seq, next)
						}
						if err := v.Check(0, seq, b); err != nil && bad == nil {
							bad = err
						}
						next = seq + 1
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			src, _ := feed.NewSynthetic(cfg)
			failed := 0
			if err := pub.Run(context.Background(), src, RunConfig{OnError: func(err error) {
				if !errors.Is(err, ErrSend) {
					t.Errorf("reported %v, want only send errors", err)
				}
				failed++
			}}); err != nil {
				t.Fatalf("Run stopped: %v", err)
			}
			if failed == 0 || pub.Stats().FlushFull == 0 {
				t.Fatalf("%d send errors, %d full packets: the test did not exercise a failed send on a full packet", failed, pub.Stats().FlushFull)
			}
			if bad != nil {
				t.Fatalf("after %d failed sends: %v", failed, bad)
			}
			if next != count+1 {
				t.Fatalf("the store holds sequences 1..%d, want 1..%d", next-1, count)
			}
			t.Logf("%d messages stored in order across %d failed sends and %d full packets", count, failed, pub.Stats().FlushFull)
		})
	}
}

// TestPublishRejectsUnknownType: a message of a type the wire format does
// not define is refused with an error naming it, before it takes an
// instrument sequence number: the next message of the instrument gets the
// one it would have had.
func TestPublishRejectsUnknownType(t *testing.T) {
	h := newPubHarness(t, PublisherConfig{})
	h.publish(3, 1) // the three definitions
	var m feed.Msg
	h.syn.Next(&m)
	good := m
	m.Type = 'Z'
	err := h.pub.Publish(&m, 1)
	if err == nil || !strings.Contains(err.Error(), "unknown type") || errors.Is(err, ErrSend) {
		t.Fatalf("Publish of type 'Z': %v, want an unknown type error", err)
	}
	if err := h.pub.Publish(&good, 1); err != nil {
		t.Fatal(err)
	}
	if good.InstSeq != 2 {
		t.Fatalf("the instrument's next message got inst_seq %d, want 2", good.InstSeq)
	}
}

// TestPublisherPadsForSegmentation: with senders that segment (UDP GSO),
// every full packet is padded to the packet size inside its last message,
// so a batch goes out as one run; the padding decodes away (feed.Trim) and
// the sender reports the run as segmented. With segmentation off nothing
// is padded.
func TestPublisherPadsForSegmentation(t *testing.T) {
	const maxDG = 500
	for _, gso := range []bool{true, false} {
		t.Run(fmt.Sprintf("GSO=%v", gso), func(t *testing.T) {
			disable := !gso
			ga, _ := testGroups(t)
			rx, err := udp.NewReceiver(udp.Config{Group: ga.Addr(), Port: int(ga.Port()), MaxDatagram: 9000})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rx.Close() })
			var sender *udp.Sender
			newSender := udp.Senders(udp.Config{MaxDatagram: maxDG, GSO: gso})
			pub, err := NewPublisher(PublisherConfig{Channels: 1, GroupA: ga, SendBatch: 4, MaxDelay: time.Hour,
				NewSender: func(id ud.LineID) (ud.Sender, error) {
					s, err := newSender(id)
					if err == nil {
						sender = s.(*udp.Sender)
					}
					return s, err
				}})
			if err != nil {
				t.Fatal(err)
			}
			if !disable && !sender.Segments() {
				t.Skip("this kernel has no UDP GSO: nothing is padded")
			}
			syn, _ := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 3, Channels: 1})
			h := &pubHarness{t: t, pub: pub, rx: rx, syn: syn}
			now := Now()
			for pub.Stats().Packets == 0 {
				h.publish(1, now)
			}
			ps := h.packets(4)
			var pad uint64
			for i, p := range ps {
				b := p.Bytes()
				if disable {
					if len(b)+mold.BlockHdrLen+feed.MaxLen <= maxDG || len(b) > maxDG {
						t.Fatalf("packet %d: %d bytes: not full", i, len(b))
					}
				} else if len(b) != maxDG {
					t.Fatalf("packet %d: %d bytes, want every full packet padded to %d", i, len(b), maxDG)
				}
				it := p.Iter()
				for raw, seq, ok := it.Next(); ok; raw, seq, ok = it.Next() {
					var m feed.Msg
					if err := m.Decode(raw); err != nil {
						t.Fatalf("message %d: %v", seq, err)
					}
					msg := feed.Trim(raw)
					if len(msg) != feed.Size(m.Type) {
						t.Fatalf("message %d: %d bytes after Trim, want %d for a %s", seq, len(msg), feed.Size(m.Type), m.Type)
					}
					if extra := raw[len(msg):]; len(extra) > 0 {
						if it.Remaining() != 0 {
							t.Fatalf("message %d: padded, but not the packet's last", seq)
						}
						for _, c := range extra {
							if c != 0 {
								t.Fatalf("message %d: padding %x is not zeros", seq, extra)
							}
						}
						pad += uint64(len(extra))
					}
				}
			}
			st, ss := pub.Stats(), sender.Stats()
			if st.PadBytes != pad {
				t.Errorf("PadBytes %d, padding found %d", st.PadBytes, pad)
			}
			if disable {
				if pad != 0 || ss.Segmented != 0 {
					t.Errorf("with GSO off: %d bytes padded, %d datagrams segmented", pad, ss.Segmented)
				}
			} else if pad == 0 || ss.Segmented != 4 || ss.Syscalls != 1 {
				t.Errorf("%d bytes padded, sender stats %+v: want padding and the 4 packets in one segmented write", pad, ss)
			}
			pub.Close()
		})
	}
}
