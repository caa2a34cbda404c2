package e2e

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud/udp"
)

// TestForgedPackets runs the forgery a script on the network can try:
// while a feed handler publishes at its defaults (authentication on), it
// reads a live packet of channel 0 and sends 20 forgeries under the live
// session, ahead of, at and behind the stream: the genuine packet replayed
// under other sequence numbers, with a message altered, with its tag cut
// short, and packets of its own with no seal. It also sends heartbeats and
// ends of session claiming far more than was published. The verifying
// subscriber must deliver every genuine message and none of the forged,
// count exactly the 20 as unauthenticated, and not end a session early.
func TestForgedPackets(t *testing.T) {
	const count = 60_000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ga, sub, fh := feedAndSubscriber(t, ctx, count)
	cfg := channelConfig(t, ga, 0)
	rx, err := udp.NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	readCtx, stopRead := context.WithTimeout(ctx, 10*time.Second)
	live := readDataPacket(readCtx, rx)
	stopRead()
	if live == nil {
		t.Fatal("no data packet on channel 0 within 10s")
	}
	h, _ := mold.DecodeHeader(live)
	t.Logf("live packet: session %s seq %d, %d messages, %d bytes", h.Session, h.Seq, h.Messages(), len(live))

	var forged [][]byte
	at := func(p []byte, seq uint64) []byte {
		p = append([]byte(nil), p...)
		binary.BigEndian.PutUint64(p[10:], seq)
		return p
	}
	for _, seq := range []uint64{h.Seq + 40, h.Seq + 400, h.Seq + 4000, h.Seq, max(h.Seq, 2) - 1} {
		forged = append(forged, at(live, seq)) // replayed under another sequence (or itself, at)
		p := at(live, seq)
		p[mold.HeaderLen+mold.BlockHdrLen+50] ^= 0x01 // a message altered
		forged = append(forged, p)
		p = at(live, seq)
		p = p[:len(p)-4] // the tag cut short, the framing kept exact
		last := lastBlockOffset(t, append(p[:len(p):len(p)], 0, 0, 0, 0))
		binary.BigEndian.PutUint16(p[last:], binary.BigEndian.Uint16(p[last:])-4)
		forged = append(forged, p)
		b, _ := mold.NewBuilder(1400)
		b.Start(h.Session, seq)
		it, _ := mold.Parse(live)
		iter := it.Iter()
		msg, _, _ := iter.Next()
		b.Add(msg[:min(len(msg), 68)]) // a genuine message, no seal
		forged = append(forged, append([]byte(nil), b.Finish()...))
	}
	// The live packet sent again at its own sequence verifies: a
	// duplicate, not a forgery.
	replayedSelf := at(live, h.Seq)
	var sends [][]byte
	wantUnauth := 0
	for _, p := range forged {
		if string(p) == string(replayedSelf) {
			continue
		}
		sends = append(sends, p)
		wantUnauth++
	}
	for _, seq := range []uint64{h.Seq + 10_000_000, h.Seq + 50} {
		sends = append(sends, mold.AppendHeartbeat(nil, h.Session, seq), mold.AppendEndOfSession(nil, h.Session, seq))
	}
	snd, err := udp.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	for _, p := range sends {
		if err := snd.Send([][]byte{p}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("sent %d forged data packets and %d heartbeats and ends of session", wantUnauth, len(sends)-wantUnauth)

	if code := fh.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	code := sub.wait(t, 20*time.Second)
	s := sub.summary(t)
	t.Logf("subscriber: received %d, missing %d, unauthenticated %d, no_key %d, sessions_ended %d, gaps %d, exit %d",
		num(t, s, "received"), num(t, s, "missing"), num(t, s, "unauthenticated"), num(t, s, "no_key"), num(t, s, "sessions_ended"), num(t, s, "gaps"), code)
	wantEverything(t, sub, code, s, count)
	if got := num(t, s, "unauthenticated"); got != uint64(wantUnauth) {
		t.Errorf("unauthenticated %d, want the %d forged data packets", got, wantUnauth)
	}
	if num(t, s, "sessions_ended") != 4 {
		t.Errorf("sessions_ended %d: want the feed handler's 4", num(t, s, "sessions_ended"))
	}
}

// forge reads a live data packet of channel ch of the A-line base ga and,
// every 20 ms until ctx is done, sends it again under a sequence number
// 1,000 further on: a forgery under the live session. It returns how many
// it sent once ctx is done.
func forge(t *testing.T, ctx context.Context, ga string, ch int) <-chan int {
	t.Helper()
	cfg := channelConfig(t, ga, ch)
	rx, err := udp.NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := udp.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan int, 1)
	go func() {
		defer snd.Close()
		defer rx.Close()
		live := readDataPacket(ctx, rx)
		n := 0
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for live != nil {
			select {
			case <-ctx.Done():
				sent <- n
				return
			case <-tick.C:
			}
			binary.BigEndian.PutUint64(live[10:], binary.BigEndian.Uint64(live[10:])+1000)
			if snd.Send([][]byte{live}) == nil {
				n++
			}
		}
		sent <- n
	}()
	return sent
}

// channelConfig returns the loopback line of channel ch of the A-line base
// ga, to receive or send on.
func channelConfig(t *testing.T, ga string, ch int) udp.Config {
	t.Helper()
	base, err := netip.ParseAddrPort(ga)
	if err != nil {
		t.Fatal(err)
	}
	g, err := tickcast.ChannelGroup(base, ch)
	if err != nil {
		t.Fatal(err)
	}
	return udp.Config{Group: g.Addr(), Port: int(g.Port()), CPU: -1}
}

// readDataPacket returns a copy of the first data packet rx receives, or
// nil if ctx ends first.
func readDataPacket(ctx context.Context, rx *udp.Receiver) []byte {
	for ctx.Err() == nil {
		rx.Wait(20 * time.Millisecond)
		for s := rx.Peek(0); s != nil; s = rx.Peek(0) {
			n, ok := mold.MessageCount(s.Data())
			data := ok && n > 0 && n < mold.EndOfSession
			var p []byte
			if data {
				p = append([]byte(nil), s.Data()...)
			}
			rx.Release(1)
			if data {
				return p
			}
		}
	}
	return nil
}

// lastBlockOffset returns the offset of packet p's last block length.
func lastBlockOffset(t *testing.T, p []byte) int {
	t.Helper()
	h, err := mold.DecodeHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	off := mold.HeaderLen
	for i := 0; i < h.Messages()-1; i++ {
		off += mold.BlockHdrLen + int(binary.BigEndian.Uint16(p[off:]))
	}
	return off
}
