package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/pace"
)

// sender sends datagrams on one line: a *udp.Sender, or a test's stand-in.
type sender interface {
	Send(datagrams [][]byte) error
}

// LineStats counts what one line sent and what it was made to lose.
type LineStats struct {
	Group string `json:"group"`
	// Packets and Messages count what was sent: packets of any kind, and
	// the messages of the data packets among them.
	Packets  uint64 `json:"packets"`
	Messages uint64 `json:"messages"`
	// DroppedPackets and DroppedMessages count data packets lost by
	// --loss and --burst, and their messages.
	DroppedPackets  uint64 `json:"dropped_packets"`
	DroppedMessages uint64 `json:"dropped_messages"`
	// SilencedPackets and SilencedMessages count packets of any kind not
	// sent in the --silence window, and the messages among them.
	SilencedPackets  uint64 `json:"silenced_packets"`
	SilencedMessages uint64 `json:"silenced_messages"`
	// SendErrors counts packets the socket failed to send.
	SendErrors uint64 `json:"send_errors"`
}

// line is one of the feed's multicast lines.
type line struct {
	out   sender
	loss  *lossState
	stats LineStats
}

// exchangeConfig configures an exchange.
type exchangeConfig struct {
	Session mold.Session
	// Speed paces at the recorded times times Speed; Rate paces at Rate
	// messages per second; with neither, as fast as possible.
	Speed, Rate float64
	// Heartbeat is the idle time after which a heartbeat goes out.
	Heartbeat time.Duration
	// MaxDatagram bounds every packet.
	MaxDatagram int
	// EndRepeat is how many times end of session is sent, EndInterval
	// apart.
	EndRepeat   int
	EndInterval time.Duration
	// Clock is the monotonic clock pacing, heartbeats and silence windows
	// are measured on.
	Clock pace.Clock
	Log   zerolog.Logger
}

// maxNap bounds one sleep while waiting for a message to be due, so that
// heartbeats and cancellation are looked at this often.
const maxNap = 10 * time.Millisecond

// exchange publishes an Input as a MoldUDP64 feed on its lines, keeping
// every message it publishes in a store for the re-request server.
type exchange struct {
	cfg   exchangeConfig
	lines []*line
	st    *store
	b     *mold.Builder
	pkt   [][]byte // the one datagram Send is given, reused
	ctl   []byte   // heartbeat and end-of-session buffer

	begun    bool
	start    int64 // clock at the first packet sent
	lastSend int64 // clock at the last packet sent

	// Packets and Messages count data packets and messages published (sent
	// on at least one line, or lost there).
	packets, messages   uint64
	heartbeats, endSent uint64
}

func newExchange(cfg exchangeConfig, lines []*line, st *store) (*exchange, error) {
	b, err := mold.NewBuilder(cfg.MaxDatagram)
	if err != nil {
		return nil, err
	}
	return &exchange{cfg: cfg, lines: lines, st: st, b: b, pkt: make([][]byte, 1), ctl: make([]byte, 0, mold.HeaderLen)}, nil
}

// run publishes in until it ends or ctx is done, then sends end of
// session. It returns in's error, or one about a message no packet can hold;
// the end of in and cancellation are no error.
func (x *exchange) run(ctx context.Context, in Input) error {
	var ns int64 // recorded time of the message being published
	var pacer *pace.Pacer
	switch {
	case x.cfg.Speed > 0:
		pacer = pace.NewSpeed(x.cfg.Speed, func(uint64) (int64, bool) { return ns, true }, x.cfg.Clock, 0)
	default:
		pacer = pace.New(x.cfg.Rate, x.cfg.Clock, 0)
	}
	x.lastSend = x.cfg.Clock()
	x.b.Start(x.cfg.Session, 1)
	var err error
	for i := uint64(0); ; i++ {
		if i&63 == 0 && ctx.Err() != nil {
			break
		}
		var msg []byte
		msg, ns, err = in.Next()
		if err != nil {
			break
		}
		if pacer.Paced() && !x.wait(ctx, pacer, i) {
			break
		}
		if !x.b.Fits(len(msg)) {
			x.flush(x.cfg.Clock())
			if !x.b.Fits(len(msg)) {
				err = fmt.Errorf("message %d of %d bytes does not fit a packet of at most %d bytes", x.b.NextSeq(), len(msg), x.cfg.MaxDatagram)
				break
			}
		}
		x.b.Add(msg)
		x.st.add(msg)
	}
	x.flush(x.cfg.Clock())
	x.end()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// wait waits until message i is due: it sends what is pending at once, then
// heartbeats while the line is idle. It returns false when ctx is done.
func (x *exchange) wait(ctx context.Context, pacer *pace.Pacer, i uint64) bool {
	now := x.cfg.Clock()
	if now >= pacer.Due(i) {
		return true
	}
	if x.b.Count() > 0 {
		// The next message is not due yet: what is pending goes out now,
		// as an exchange sends a packet when its input pauses.
		x.flush(now)
	}
	hb := int64(x.cfg.Heartbeat)
	for due := pacer.Due(i); now < due; now = x.cfg.Clock() {
		if now-x.lastSend >= hb {
			x.heartbeat(now)
		}
		if d := pacer.Coarse(i, now); d > 0 {
			pacer.Nap(min(d, time.Duration(x.lastSend+hb-now), maxNap))
			if ctx.Err() != nil {
				return false
			}
		}
	}
	return true
}

// flush sends the pending packet, if any, at now.
func (x *exchange) flush(now int64) {
	n := x.b.Count()
	if n == 0 {
		return
	}
	pkt := x.b.Finish()
	next := x.b.NextSeq()
	// Published before it is sent: a receiver that sees a gap in it may ask
	// for its messages at once.
	x.st.publish(next)
	x.send(pkt, now, n)
	x.packets++
	x.messages += uint64(n)
	x.b.Start(x.cfg.Session, next)
}

// heartbeat sends a heartbeat at now.
func (x *exchange) heartbeat(now int64) {
	x.ctl = mold.AppendHeartbeat(x.ctl[:0], x.cfg.Session, x.b.NextSeq())
	x.send(x.ctl, now, 0)
	x.heartbeats++
}

// end sends end of session EndRepeat times, EndInterval apart.
func (x *exchange) end() {
	for k := range x.cfg.EndRepeat {
		if k > 0 {
			time.Sleep(x.cfg.EndInterval)
		}
		x.ctl = mold.AppendEndOfSession(x.ctl[:0], x.cfg.Session, x.b.NextSeq())
		x.send(x.ctl, x.cfg.Clock(), 0)
		x.endSent++
	}
}

// send sends pkt, carrying msgs messages, on every line that does not lose
// it.
func (x *exchange) send(pkt []byte, now int64, msgs int) {
	if !x.begun {
		x.begun, x.start = true, now
	}
	x.lastSend = now
	since := time.Duration(now - x.start)
	for _, l := range x.lines {
		switch l.loss.decide(since, msgs > 0) {
		case dropped:
			l.stats.DroppedPackets++
			l.stats.DroppedMessages += uint64(msgs)
		case silenced:
			l.stats.SilencedPackets++
			l.stats.SilencedMessages += uint64(msgs)
		default:
			x.pkt[0] = pkt
			if err := l.out.Send(x.pkt); err != nil {
				if l.stats.SendErrors == 0 {
					x.cfg.Log.Error().Err(err).Str("group", l.stats.Group).Msg("send failed (logged once per line)")
				}
				l.stats.SendErrors++
				continue
			}
			l.stats.Packets++
			l.stats.Messages += uint64(msgs)
		}
	}
}
