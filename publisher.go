package tickcast

import (
	"context"
	"errors"
	"fmt"
	"github.com/tickcast/tickcast/config"
	"io"
	"net/netip"
	"runtime"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/pace"
	"github.com/tickcast/tickcast/ud"
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Channels is the number of channels instruments are spread over,
	// 1..config.MaxChannels.
	Channels int
	// GroupA is channel 0's A-line group; channel c uses ChannelGroup(GroupA, c).
	GroupA netip.AddrPort
	// GroupB is channel 0's B-line group, or the zero value for no B line.
	// A publisher of line B alone (a second host's, see docs/operations.md)
	// leaves GroupA zero.
	GroupB netip.AddrPort
	// NewSender opens the transport of one line: the channel, A or B, and
	// the line's group (ChannelGroup of GroupA or GroupB). Each transport
	// package provides one (udp.Senders, rdma.Senders). Required.
	NewSender ud.NewSenderFunc
	// MaxDatagram caps the packet size; 0 means the transport's maximum.
	MaxDatagram int
	// MaxDelay bounds how long a message may wait in a partly filled packet
	// when input keeps coming (packets are flushed at once when input
	// drains). It is checked by the publishing loop, not by a timer.
	// Default DefaultMaxDelay.
	MaxDelay time.Duration
	// Heartbeat is how long a channel may be idle before a heartbeat is
	// sent. Default DefaultHeartbeat.
	Heartbeat time.Duration
	// SendBatch is how many finished packets of a channel may be queued for
	// one batched send system call. Default DefaultSendBatch.
	SendBatch int
	// OnPacket, if set, is called with every data packet just before it is
	// sent (for the retransmission store, which must hold a packet before
	// any subscriber can see it): what goes on the wire before Seal, so
	// that the messages are in the clear when Seal encrypts them. The
	// bytes are valid only during the call.
	OnPacket func(ch int, session mold.Session, firstSeq uint64, pkt []byte)
	// OnSent, if set, is called with every data packet byte-identical to
	// what goes on the wire (after Seal), after OnPacket and before the
	// send (for the live NATS subjects). The bytes are valid only during
	// the call.
	OnSent func(ch int, pkt []byte)
	// OnControl, if set, is called with every heartbeat and end-of-session
	// datagram after it was sent; nextSeq is the sequence it carries.
	OnControl func(ch int, session mold.Session, nextSeq uint64, datagram []byte)
	// Observer, if set, is told about every flush and every data packet
	// sent (see tickprom.PublisherMetrics). It is called once per packet,
	// never per message.
	Observer PublisherObserver
	// Seal, if set, seals every data packet after OnPacket, just before
	// it goes to OnSent and the lines (package seal): it returns pkt with
	// SealOverhead bytes more, written in pkt's spare capacity, which the
	// publisher keeps free. nowNs is the Unix time of the send. An error
	// ends the run: no packet is sent unsealed.
	Seal func(ch int, pkt []byte, nowNs int64) ([]byte, error)
	// SealOverhead is the bytes Seal adds to a packet.
	SealOverhead int
	// Sessions, if set, are the channels' sessions, one per channel, each
	// naming its channel (SessionChannel): a publisher that joins the
	// sessions of another, as a second feed handler of the same feed does.
	// Without it every channel starts a new session (NewSession).
	Sessions []mold.Session
}

// Defaults of PublisherConfig.
const (
	// DefaultMaxDelay is the default PublisherConfig.MaxDelay.
	DefaultMaxDelay = 50 * time.Microsecond
	// DefaultHeartbeat is the default PublisherConfig.Heartbeat.
	DefaultHeartbeat = 100 * time.Millisecond
	// DefaultSendBatch is the default PublisherConfig.SendBatch.
	DefaultSendBatch = 16
)

var publisherCheck = config.Checker{Pkg: "tickcast", Struct: "PublisherConfig"}

// withDefaults returns c with its zero fields set to their defaults.
func (c PublisherConfig) withDefaults() PublisherConfig {
	config.Default(&c.MaxDelay, DefaultMaxDelay)
	config.Default(&c.Heartbeat, DefaultHeartbeat)
	config.Default(&c.SendBatch, DefaultSendBatch)
	return c
}

// validate checks a PublisherConfig whose defaults are set.
func (c PublisherConfig) validate() error {
	bad := publisherCheck.Invalid
	if err := publisherCheck.Channels("Channels", c.Channels); err != nil {
		return err
	}
	if c.NewSender == nil {
		return bad("NewSender", nil, "required")
	}
	if c.GroupA.IsValid() || !c.GroupB.IsValid() {
		if _, err := ChannelGroup(c.GroupA, c.Channels-1); err != nil {
			return bad("GroupA", c.GroupA, "%v", err)
		}
	}
	if c.GroupB.IsValid() {
		if _, err := ChannelGroup(c.GroupB, c.Channels-1); err != nil {
			return bad("GroupB", c.GroupB, "%v", err)
		}
		if c.GroupA.IsValid() && groupsOverlap(c.GroupA, c.GroupB, c.Channels) {
			return bad("GroupB", c.GroupB, "overlaps GroupA %s for %d channels", c.GroupA, c.Channels)
		}
	}
	if c.Seal != nil && c.SealOverhead <= 0 {
		return bad("SealOverhead", c.SealOverhead, "want the bytes Seal adds, > 0")
	}
	if c.Sessions != nil && len(c.Sessions) != c.Channels {
		return bad("Sessions", len(c.Sessions), "want one session per channel (%d)", c.Channels)
	}
	for ch, s := range c.Sessions {
		if SessionChannel(s) != ch {
			return bad("Sessions", s, "session %d names channel %d", ch, SessionChannel(s))
		}
	}
	switch {
	case c.MaxDatagram < 0 || c.MaxDatagram != 0 && c.MaxDatagram < mold.HeaderLen+mold.BlockHdrLen+feed.MaxLen:
		return bad("MaxDatagram", c.MaxDatagram, "cannot hold one %d-byte message", feed.MaxLen)
	case c.MaxDelay < 0:
		return bad("MaxDelay", c.MaxDelay, "negative")
	case c.Heartbeat < 0:
		return bad("Heartbeat", c.Heartbeat, "negative")
	case c.SendBatch < 0:
		return bad("SendBatch", c.SendBatch, "negative")
	}
	return nil
}

// PublisherStats are a publisher's cumulative counters.
type PublisherStats struct {
	Messages          uint64 // messages published
	Packets           uint64 // data packets sent (per line counted once)
	PacketBytes       uint64 // bytes of those packets, MoldUDP64 header included
	Heartbeats        uint64
	UnknownInstrument uint64 // messages dropped: instrument never defined
	FlushDrain        uint64 // flushes because input drained
	FlushFull         uint64 // packets closed because the next message did not fit
	FlushDeadline     uint64 // flushes forced by MaxDelay
	// PadBytes counts the zero bytes added to full packets' last messages
	// so that runs of full packets have one length, as the lines'
	// segmentation offload needs (ud.Segmenter; docs/wire-format.md,
	// "Padding"). They are among PacketBytes.
	PadBytes uint64
	// CaughtUp counts the messages CatchUp published without sending them
	// (they are among Messages; their packets are not among Packets).
	CaughtUp uint64
}

// Publisher turns normalized messages into sequenced MoldUDP64 packets, one
// stream per channel, sent on the A line and the optional B line.
//
// A Publisher is used by one goroutine.
type Publisher struct {
	cfg      PublisherConfig
	chans    []*pubChannel
	instChan []int32  // instrument id → channel, -1 while undefined
	instSeq  []uint32 // instrument id → last per-instrument sequence
	stats    PublisherStats
	pending  int  // channels with unsent messages
	ended    bool // End was called: no more data
	closed   bool
	muted    bool        // CatchUp is running: packets go to OnPacket only
	in       [256]uint64 // messages given to Publish, by feed.Type
	snap     pubSnapshot // the counters as last published for other goroutines
}

type pubChannel struct {
	idx      int
	session  mold.Session
	lines    []ud.Sender
	lineOf   []Line          // which line each of lines is
	segs     []ud.Segmenter  // lines, when every one segments; else nil
	builders []*mold.Builder // queue of packets; the last one is open
	queued   int             // finished packets waiting to be sent
	sendList [][]byte        // scratch for Send, to avoid per-flush allocation
	openNs   int64           // when the oldest unsent message was added; 0 if none
	lastNs   int64           // when the channel last sent anything
	packets  uint64
	messages uint64 // messages published on the channel
	beats    uint64 // heartbeats sent on the channel
}

// NewPublisher opens the senders of every channel and starts a new session
// on each.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg}
	now := time.Now()
	for ch := 0; ch < cfg.Channels; ch++ {
		pc := &pubChannel{idx: ch, session: NewSession(ch, now), lastNs: Now()}
		if cfg.Sessions != nil {
			pc.session = cfg.Sessions[ch]
		}
		p.chans = append(p.chans, pc)
		maxDG := cfg.MaxDatagram
		for _, id := range channelLines(cfg.GroupA, cfg.GroupB, ch) {
			g := id.Group
			s, err := cfg.NewSender(id)
			if err != nil {
				p.closeSenders()
				return nil, fmt.Errorf("tickcast: channel %d: open sender for %s: %w", ch, g, err)
			}
			pc.lines = append(pc.lines, s)
			pc.lineOf = append(pc.lineOf, id.Line)
			if maxDG == 0 || s.MaxDatagram() < maxDG {
				if cfg.MaxDatagram != 0 && s.MaxDatagram() < cfg.MaxDatagram {
					p.closeSenders()
					return nil, fmt.Errorf("tickcast: channel %d: max-datagram %d exceeds the transport's %d for %s", ch, cfg.MaxDatagram, s.MaxDatagram(), g)
				}
				maxDG = s.MaxDatagram()
			}
		}
		for _, s := range pc.lines {
			seg, ok := s.(ud.Segmenter)
			if !ok {
				pc.segs = nil
				break
			}
			pc.segs = append(pc.segs, seg)
		}
		for i := 0; i < cfg.SendBatch; i++ {
			b, err := mold.NewBuilder(maxDG)
			if err == nil && cfg.Seal != nil {
				err = b.SetTail(cfg.SealOverhead)
			}
			if err != nil {
				p.closeSenders()
				return nil, fmt.Errorf("tickcast: channel %d: %w", ch, err)
			}
			pc.builders = append(pc.builders, b)
		}
		pc.sendList = make([][]byte, 0, cfg.SendBatch)
		pc.builders[0].Start(pc.session, 1)
	}
	p.initSnapshot()
	return p, nil
}

func (p *Publisher) closeSenders() {
	for _, pc := range p.chans {
		for _, s := range pc.lines {
			s.Close()
		}
	}
}

// Sessions returns each channel's current session.
func (p *Publisher) Sessions() []mold.Session {
	out := make([]mold.Session, len(p.chans))
	for i, pc := range p.chans {
		out[i] = pc.session
	}
	return out
}

// NextSeq returns the sequence number channel ch's next message will get.
func (p *Publisher) NextSeq(ch int) uint64 {
	pc := p.chans[ch]
	return pc.builders[pc.queued].NextSeq()
}

// Stats returns the counters.
func (p *Publisher) Stats() PublisherStats { return p.stats }

// ChannelPackets returns how many data packets channel ch has sent.
func (p *Publisher) ChannelPackets(ch int) uint64 { return p.chans[ch].packets }

// ErrSend wraps a transport's error when a line could not send a packet.
// The packet is in the retransmission store (OnPacket ran first), so a
// subscriber can still recover it; Run reports such errors and goes on.
var ErrSend = errors.New("send failed")

// ErrUnknownInstrument is returned by Publish for a message about an
// instrument whose definition was never published.
var ErrUnknownInstrument = errors.New("instrument has no definition")

// Publish adds m to its channel's open packet, assigning the per-instrument
// sequence number. nowNs, like the argument of Flush and Poll, is Now(). A definition assigns the instrument to its channel. The
// packet goes out when it is full (this call may send) or at the next Flush
// or Poll. Publish does not allocate, except to grow the instrument table
// when a definition names a new, larger instrument id.
//
// An error wrapping ErrSend means m was published all the same: it is
// sequenced and in its packet, and the packets a line failed to send were
// handed to OnPacket first, so subscribers recover them.
func (p *Publisher) Publish(m *feed.Msg, nowNs int64) error {
	if p.ended {
		return ErrEnded
	}
	p.in[m.Type]++
	n := feed.Size(m.Type)
	if n == 0 {
		return fmt.Errorf("tickcast: message of unknown type %s for instrument %d", m.Type, m.Instrument)
	}
	id := int(m.Instrument)
	if m.Type == feed.TypeDefinition {
		for id >= len(p.instChan) {
			p.instChan = append(p.instChan, -1)
			p.instSeq = append(p.instSeq, 0)
		}
		p.instChan[id] = int32(feed.ChannelOf(m.Def.Symbol, p.cfg.Channels))
	}
	if id >= len(p.instChan) || p.instChan[id] < 0 {
		p.stats.UnknownInstrument++
		return fmt.Errorf("tickcast: %s for instrument %d: %w", m.Type, id, ErrUnknownInstrument)
	}
	pc := p.chans[p.instChan[id]]
	b := pc.builders[pc.queued]
	dst := b.Reserve(n)
	// A send that fails while making room (ErrSend) has still sequenced
	// and stored the full packets: m goes into the next one all the same,
	// and the error is returned once m is in. Returning before that would
	// drop m between the source and the sequencer, where no recovery can
	// find it.
	var sendErr error
	if dst == nil {
		p.stats.FlushFull++
		sendErr = p.closePacket(pc, nowNs)
		b = pc.builders[pc.queued]
		if dst = b.Reserve(n); dst == nil {
			return hardAfterSend(fmt.Errorf("tickcast: channel %d: a %d-byte message does not fit an empty packet", pc.idx, n), sendErr)
		}
	}
	p.instSeq[id]++
	m.InstSeq = p.instSeq[id]
	if _, err := m.Encode(dst); err != nil {
		// Cannot happen: the type has a size, and dst holds it.
		b.Unreserve()
		p.instSeq[id]--
		return hardAfterSend(err, sendErr)
	}
	if pc.openNs == 0 {
		pc.openNs = nowNs
		p.pending++
	}
	p.stats.Messages++
	pc.messages++
	return sendErr
}

// hardAfterSend returns err, an error that ends a run, naming the failed
// send that came before it, if any, without wrapping ErrSend (which would
// make the run carry on).
func hardAfterSend(err, sendErr error) error {
	if sendErr == nil {
		return err
	}
	return fmt.Errorf("%w (after a failed send: %v)", err, sendErr)
}

// closePacket finishes the open packet and opens the next one in the queue,
// sending the queue when it is full. The next packet is open even when the
// send fails: send's error is a transport's, after the packets were
// sequenced and stored.
func (p *Publisher) closePacket(pc *pubChannel, nowNs int64) error {
	b := pc.builders[pc.queued]
	next := b.NextSeq()
	if pc.segments() {
		p.stats.PadBytes += uint64(b.PadTo(b.MaxDatagram()))
	}
	b.Finish()
	pc.queued++
	var err error
	if pc.queued == len(pc.builders) {
		err = p.send(pc, nowNs)
	}
	pc.builders[pc.queued].Start(pc.session, next)
	return err
}

// segments reports whether every line of pc sends runs of equal-length
// datagrams by segmentation offload, so that full packets are padded to one
// length.
func (pc *pubChannel) segments() bool {
	for _, s := range pc.segs {
		if !s.Segments() {
			return false
		}
	}
	return len(pc.segs) > 0
}

// send stamps and sends every finished packet of pc (and the open one if it
// holds messages), then reopens an empty packet.
func (p *Publisher) send(pc *pubChannel, nowNs int64) error {
	open := pc.builders[min(pc.queued, len(pc.builders)-1)]
	if pc.queued < len(pc.builders) && open.Count() > 0 {
		open.Finish()
		pc.queued++
	}
	if pc.queued == 0 {
		return nil
	}
	next := pc.builders[pc.queued-1].NextSeq()
	// The send timestamp is taken once per batch, as late as possible.
	sendNs := time.Now().UnixNano()
	if obs := p.cfg.Observer; obs != nil && !p.muted {
		if pc.openNs != 0 {
			obs.Flushed(pc.idx, Now()-pc.openNs)
		}
		for _, b := range pc.builders[:pc.queued] {
			obs.Packet(pc.idx, b.Count())
		}
	}
	list := pc.sendList[:0]
	var nbytes int
	for _, b := range pc.builders[:pc.queued] {
		it := b.Messages()
		for msg, _, ok := it.Next(); ok; msg, _, ok = it.Next() {
			feed.PutSendNs(msg, sendNs)
		}
		pkt := b.Finish()
		// The retransmission store gets the packets before the wire
		// does: a subscriber that sees a packet and asks for what
		// preceded it must find it stored.
		if p.cfg.OnPacket != nil {
			p.cfg.OnPacket(pc.idx, pc.session, b.FirstSeq(), pkt)
		}
		if p.cfg.Seal != nil {
			sealed, err := p.cfg.Seal(pc.idx, pkt, sendNs)
			if err != nil {
				// Cannot happen: the builder kept the room, and the
				// packet is well formed. Nothing goes out unsealed.
				return fmt.Errorf("tickcast: channel %d: %w", pc.idx, err)
			}
			pkt = sealed
		}
		nbytes += len(pkt)
		list = append(list, pkt)
	}
	if p.cfg.OnSent != nil {
		for _, pkt := range list {
			p.cfg.OnSent(pc.idx, pkt)
		}
	}
	var firstErr error
	if !p.muted {
		for _, s := range pc.lines {
			if err := s.Send(list); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("tickcast: channel %d session %s: %w: %w", pc.idx, pc.session, ErrSend, err)
			}
		}
		pc.packets += uint64(pc.queued)
		p.stats.Packets += uint64(pc.queued)
		p.stats.PacketBytes += uint64(nbytes)
	}
	pc.queued = 0
	pc.builders[0].Start(pc.session, next)
	if pc.openNs != 0 {
		pc.openNs = 0
		p.pending--
	}
	pc.lastNs = nowNs
	return firstErr
}

// Flush sends every channel's unsent messages. Call it when input drains.
func (p *Publisher) Flush(nowNs int64) error {
	if p.pending == 0 {
		return nil
	}
	p.stats.FlushDrain++
	var firstErr error
	for _, pc := range p.chans {
		if pc.openNs != 0 {
			if err := p.send(pc, nowNs); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// Poll enforces the deadlines: it flushes channels whose oldest unsent
// message has waited MaxDelay, and sends heartbeats on channels idle for the
// heartbeat interval. The publishing loop calls it as often as it can.
func (p *Publisher) Poll(nowNs int64) error {
	var firstErr error
	maxDelay, hb := int64(p.cfg.MaxDelay), int64(p.cfg.Heartbeat)
	for _, pc := range p.chans {
		var err error
		switch {
		case pc.openNs != 0 && nowNs-pc.openNs >= maxDelay:
			p.stats.FlushDeadline++
			err = p.send(pc, nowNs)
		case pc.openNs == 0 && nowNs-pc.lastNs >= hb:
			err = p.control(pc, nowNs, false)
			p.stats.Heartbeats++
			pc.beats++
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if nowNs >= p.snap.due {
		p.publishStats(nowNs)
	}
	return firstErr
}

// control sends a heartbeat or end of session on every line of pc.
func (p *Publisher) control(pc *pubChannel, nowNs int64, eos bool) error {
	b := pc.builders[pc.queued]
	var hdr [mold.HeaderLen]byte
	h := mold.Header{Session: pc.session, Seq: b.NextSeq()}
	if eos {
		h.Count = mold.EndOfSession
	}
	h.Put(hdr[:])
	list := append(pc.sendList[:0], hdr[:])
	var firstErr error
	for _, s := range pc.lines {
		if err := s.Send(list); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("tickcast: channel %d session %s: control packet: %w: %w", pc.idx, pc.session, ErrSend, err)
		}
	}
	pc.lastNs = nowNs
	if p.cfg.OnControl != nil {
		p.cfg.OnControl(pc.idx, pc.session, h.Seq, hdr[:])
	}
	return firstErr
}

// End sends what is unsent and an end of session on every channel and line.
// Calling it again repeats the end of session (useful while lingering, so a
// subscriber that lost it still learns where the session ended); Publish
// after End fails.
func (p *Publisher) End() error {
	now := Now()
	firstErr := p.Flush(now)
	p.ended = true
	for _, pc := range p.chans {
		if err := p.control(pc, now, true); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	p.publishStats(now)
	return firstErr
}

// CatchUp publishes src without sending anything until every channel's
// next sequence is at least next[ch] (a channel beyond len(next) has no
// target), or src ends, in which case it returns io.EOF. Its packets go to
// PublisherConfig.OnPacket, so that a retransmission store fills as if they
// had been sent, but to no line and no observer, and it sends no heartbeat.
// A feed handler that rejoins the sessions of a peer replays its input this
// way up to the peer's position, then publishes the rest with Run. It
// returns the messages it published; unknown instruments are counted and
// skipped, as Run does.
func (p *Publisher) CatchUp(src feed.Source, next []uint64) (uint64, error) {
	if p.ended {
		return 0, ErrEnded
	}
	p.muted = true
	defer func() { p.muted = false }()
	var m feed.Msg
	var n uint64
	for !p.reached(next) {
		err := src.Next(&m)
		if err == feed.ErrIdle {
			continue // a live source waited (bounded) and has nothing yet
		}
		if err == io.EOF {
			if ferr := p.Flush(Now()); ferr != nil {
				return n, ferr
			}
			return n, io.EOF
		}
		if err != nil {
			return n, fmt.Errorf("tickcast: source: %w", err)
		}
		if err := p.Publish(&m, Now()); err != nil {
			if errors.Is(err, ErrUnknownInstrument) {
				continue
			}
			return n, err
		}
		n++
		p.stats.CaughtUp++
	}
	return n, p.Flush(Now())
}

// reached reports whether every channel's next sequence is at least its
// target in next.
func (p *Publisher) reached(next []uint64) bool {
	for ch, seq := range next {
		if ch < len(p.chans) && p.NextSeq(ch) < seq {
			return false
		}
	}
	return true
}

// ErrEnded is returned by Publish after End.
var ErrEnded = errors.New("tickcast: publisher ended its sessions")

// Leave closes the senders without ending the sessions: another publisher
// of the same sessions (PublisherConfig.Sessions) carries them on, and an
// end of session would tell subscribers that nothing more comes. What is
// unsent is dropped; Publish fails after it.
func (p *Publisher) Leave() error {
	if p.closed {
		return nil
	}
	p.closed, p.ended = true, true
	var firstErr error
	for _, pc := range p.chans {
		for _, s := range pc.lines {
			if err := s.Close(); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// Close ends the sessions (see End) unless that was done, and closes the
// senders.
func (p *Publisher) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var firstErr error
	if !p.ended {
		firstErr = p.End()
	}
	for _, pc := range p.chans {
		for _, s := range pc.lines {
			if err := s.Close(); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// RunConfig paces Run.
type RunConfig struct {
	// Rate is messages per second; 0 publishes as fast as possible.
	Rate float64
	// Speed, when positive, paces the source at its messages' recorded
	// times (feed.Header.ExchangeNs, relative to the first message) times
	// Speed, and Rate is ignored: a replayed file keeps its bursts and lulls
	// (pace.NewSpeed). Run then reads each message before it is due, and
	// moves its RecvNs on by the time it was held.
	Speed float64
	// Spin is how long before a message is due Run stops sleeping in the
	// kernel and spins on the clock; 0 means pace.DefaultSpin, a negative
	// value spins the whole time (the lowest jitter, one core busy).
	Spin time.Duration
	// OnError is called with errors that do not stop the run: a message
	// about an unknown instrument, a line that failed to send (ErrSend; the
	// other line and recovery still carry the packet); nil ignores them
	// (they are counted).
	OnError func(error)
}

// maxNap bounds one kernel sleep of Run's pacer, so that heartbeats and
// cancellation are checked at least this often at low rates.
const maxNap = time.Millisecond

// Run publishes src until it ends (io.EOF) or ctx is done, then returns
// without closing the publisher (call Close for the end of session).
//
// A live source (feed.ErrIdle) waits a bounded time in its Next; each time
// it returns ErrIdle, Run flushes, sends what heartbeats are due and checks
// ctx, then calls Next again, so an idle upstream keeps the channels'
// heartbeats flowing.
//
// Pacing (package pace): while the next message is not yet due, Run flushes
// what is pending (input drained), checks deadlines, sleeps in the kernel
// with clock_nanosleep until shortly before the message is due (in steps of
// at most a millisecond), and spins on the clock for the last stretch
// (RunConfig.Spin), because Go timers here resolve to about a millisecond. A
// core is therefore busy only at rates where messages are closer together
// than the spin stretch. Run calls runtime.LockOSThread: the pacer's timer
// slack is a per-thread setting.
func (p *Publisher) Run(ctx context.Context, src feed.Source, rc RunConfig) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m feed.Msg
	pacer := pace.New(rc.Rate, Now, rc.Spin)
	if rc.Speed > 0 {
		ahead := &readAhead{src: src}
		src, pacer = ahead, pace.NewSpeed(rc.Speed, ahead.stamp, Now, rc.Spin)
	}
	done := ctx.Done()
	// soft passes ErrSend to OnError and carries on; a closed transport or
	// any other error ends the run.
	soft := func(err error) error {
		if err == nil || !errors.Is(err, ErrSend) || errors.Is(err, ud.ErrClosed) {
			return err
		}
		if rc.OnError != nil {
			rc.OnError(err)
		}
		return nil
	}
	for i := uint64(0); ; i++ {
		if i&63 == 0 {
			select {
			case <-done:
				return soft(p.Flush(Now()))
			default:
			}
		}
		now := Now()
		if pacer.Paced() {
			for due := pacer.Due(i); now < due; now = Now() {
				if err := soft(p.Flush(now)); err != nil {
					return err
				}
				if err := soft(p.Poll(now)); err != nil {
					return err
				}
				if d := pacer.Coarse(i, now); d > 0 {
					pacer.Nap(min(d, maxNap))
					select {
					case <-done:
						return soft(p.Flush(Now()))
					default:
					}
				}
			}
		}
		err := src.Next(&m)
		if err == feed.ErrIdle {
			// A live source waited and has nothing yet: send what is due
			// (heartbeats), and do not count the turn as a message.
			select {
			case <-done:
				return soft(p.Flush(Now()))
			default:
			}
			if err := soft(p.Flush(Now())); err != nil {
				return err
			}
			if err := soft(p.Poll(Now())); err != nil {
				return err
			}
			i--
			continue
		}
		if err == io.EOF {
			return soft(p.Flush(Now()))
		}
		if err != nil {
			p.Flush(Now())
			return fmt.Errorf("tickcast: source: %w", err)
		}
		nowNs := now
		if err := p.Publish(&m, nowNs); err != nil {
			if errors.Is(err, ErrUnknownInstrument) {
				if rc.OnError != nil {
					rc.OnError(err)
				}
				continue
			}
			if err := soft(err); err != nil {
				return err
			}
		}
		if err := soft(p.Poll(nowNs)); err != nil {
			return err
		}
	}
}

// readAhead is a source read one message ahead, so that a recorded-speed
// pacer learns when the next message was recorded before Run waits for it.
// It is allocated once per Run and copies messages, never allocating.
type readAhead struct {
	src  feed.Source
	m    feed.Msg
	err  error
	held bool  // m (or err) is read and not yet returned by Next
	at   int64 // Now when m was read
}

// stamp is the pace.Stamp of the next message: its ExchangeNs.
func (r *readAhead) stamp(uint64) (int64, bool) {
	if !r.held {
		r.err, r.held, r.at = r.src.Next(&r.m), true, Now()
	}
	return r.m.ExchangeNs, r.err == nil
}

// Next implements feed.Source.
func (r *readAhead) Next(m *feed.Msg) error {
	if !r.held {
		return r.src.Next(m)
	}
	r.held = false
	if r.err != nil {
		return r.err
	}
	*m = r.m
	m.RecvNs += Now() - r.at // held until due: received when released
	return nil
}
