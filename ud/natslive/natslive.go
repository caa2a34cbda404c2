// Package natslive receives a channel's MoldUDP64 datagrams from the feed
// handler's live NATS subject (tickcast.FEED.live.CH, see docs/recovery.md)
// instead of multicast, for hosts that cannot join multicast groups. Its
// Receiver implements ud.Receiver, so the subscriber's hot path (ring →
// sequence tracker → handler) is the same for both transports.
//
// The producer is the NATS subscription's callback, which nats.go runs on
// the subscription's own goroutine, one message at a time: it copies the
// message's payload into the next free ring slot, stamps it and publishes
// it. The consumer borrows and releases slots exactly as with ud/udp.
//
// Back-pressure: when the consumer falls behind and every slot is lent out,
// the callback waits for a slot to be released. Meanwhile nats.go keeps
// reading the connection and queues the subscription's messages in its
// pending queue (Config.PendingMsgs, Config.PendingBytes). Only when that
// queue is full does nats.go drop messages, report a slow-consumer error to
// the connection's error handler and count them; Stats reports that count
// as RecvStats.KernelDrops. The dropped datagrams reach the consumer as a
// sequence gap like any other and are recovered. Nothing is dropped
// silently.
//
// Demand: the feed handler publishes a channel's live subject only while
// someone wants it (docs/recovery.md, "Live over NATS"). A Receiver
// announces its demand on the channel's demand subject, tickcast.FEED.
// demand.CH, when it starts and then every Config.DemandEvery, as a NATS
// request whose answer tells that a feed handler heard it (Demands counts
// both). An unanswered demand is no error: the feed handler may start
// later, and the receiver keeps asking. What is published before a demand
// takes effect does not reach the receiver; the subscriber sees it as a
// gap at the start and recovers it like any other.
//
// Allocations: the ring is allocated once by NewReceiver; the callback's
// copy into a slot and the consumer's Peek, Release and Wait allocate
// nothing. nats.go itself allocates a *nats.Msg and its payload for every
// message it reads from the connection, before the callback runs; that is
// outside this package's control, and is the price of this transport over
// multicast.
package natslive

import (
	"context"
	"errors"
	"fmt"
	"github.com/tickcast/tickcast/config"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/ud"
)

// Defaults applied to Config fields left at their zero value, and limits.
const (
	// DefaultRingSlots is the default Config.RingSlots.
	DefaultRingSlots = 4096
	// DefaultMaxDatagram is the default Config.MaxDatagram: a jumbo-frame
	// datagram, larger than the feed handler's default of 1472 bytes.
	DefaultMaxDatagram = 9000
	// MaxDatagramLimit is the largest Config.MaxDatagram: the largest UDP
	// payload IPv4 can carry, so a live message is never larger than the
	// multicast datagram it copies.
	MaxDatagramLimit = 65507
	// DefaultPendingMsgs is the default Config.PendingMsgs.
	DefaultPendingMsgs = 1 << 20
	// DefaultPendingBytes is the default Config.PendingBytes.
	DefaultPendingBytes = 512 << 20
	// DefaultFlushTimeout is the default Config.FlushTimeout.
	DefaultFlushTimeout = 5 * time.Second
	// DefaultDemandEvery is the default Config.DemandEvery, the feed
	// handler's recovery.DemandEvery (its demand lease is five times as
	// long).
	DefaultDemandEvery = time.Second
	// waitFreeTimeout bounds each wait of the callback for a free slot; the
	// callback re-checks whether the receiver was closed between waits.
	waitFreeTimeout = 100 * time.Millisecond
)

// Config sizes a Receiver. The zero value of every field selects its
// default.
type Config struct {
	// RingSlots is the number of receive slots, a power of two up to
	// ud.MaxRingSlots; default DefaultRingSlots.
	RingSlots int
	// MaxDatagram is each slot's size in bytes, 1..MaxDatagramLimit;
	// default DefaultMaxDatagram. Set it to the feed handler's
	// --max-datagram or more: a longer message is dropped and counted in
	// RecvStats.Truncated (it then shows as a sequence gap).
	MaxDatagram int
	// PendingMsgs and PendingBytes are the subscription's pending limits:
	// how much nats.go queues for the callback while the ring is full
	// before it drops messages as a slow consumer (counted in
	// RecvStats.KernelDrops). 0 selects DefaultPendingMsgs and
	// DefaultPendingBytes; -1 means no limit.
	PendingMsgs, PendingBytes int
	// FlushTimeout bounds how long NewReceiver waits for the server to
	// confirm the subscription when the connection is up; default
	// DefaultFlushTimeout.
	FlushTimeout time.Duration
	// Notifier, when set, is signalled after each datagram is published
	// (see ud.Ring.SetNotifier).
	Notifier *ud.Notifier
	// DemandSubject is where the receiver announces its demand for the
	// live subject; empty: the live subject's demand subject when it is a
	// feed handler's, tickcast.FEED.live.CH → tickcast.FEED.demand.CH
	// (DemandSubject), else none.
	DemandSubject string
	// DemandEvery is how often the receiver repeats its demand; default
	// DefaultDemandEvery; -1: it announces none (a feed handler that
	// publishes always, or that sees its subscribers, needs none).
	DemandEvery time.Duration
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.RingSlots, DefaultRingSlots)
	config.Default(&c.MaxDatagram, DefaultMaxDatagram)
	config.Default(&c.PendingMsgs, DefaultPendingMsgs)
	config.Default(&c.PendingBytes, DefaultPendingBytes)
	config.Default(&c.FlushTimeout, DefaultFlushTimeout)
	config.Default(&c.DemandEvery, DefaultDemandEvery)
	return c
}

// ConfigError reports a Config field with an invalid value: the module's
// configuration error, config.Error.
type ConfigError = config.Error

var check = config.Checker{Pkg: "natslive", Struct: "Config"}

// validate checks a Config whose defaults are set.
func (c Config) validate() error {
	switch {
	case c.RingSlots < 1 || c.RingSlots > ud.MaxRingSlots || c.RingSlots&(c.RingSlots-1) != 0:
		return check.Invalid("RingSlots", c.RingSlots, "want a power of two between 1 and %d", ud.MaxRingSlots)
	case c.MaxDatagram < 1 || c.MaxDatagram > MaxDatagramLimit:
		return check.Invalid("MaxDatagram", c.MaxDatagram, "want 1..%d", MaxDatagramLimit)
	case c.PendingMsgs < -1:
		return check.Invalid("PendingMsgs", c.PendingMsgs, "want a positive limit, 0 (default) or -1 (no limit)")
	case c.PendingBytes < -1:
		return check.Invalid("PendingBytes", c.PendingBytes, "want a positive limit, 0 (default) or -1 (no limit)")
	case c.FlushTimeout < 0:
		return check.Invalid("FlushTimeout", c.FlushTimeout, "must not be negative")
	case c.DemandEvery < 0 && c.DemandEvery != -1:
		return check.Invalid("DemandEvery", c.DemandEvery, "want a positive interval, 0 (default) or -1 (no demand)")
	case strings.ContainsAny(c.DemandSubject, " \t\r\n*>"):
		return check.Invalid("DemandSubject", c.DemandSubject, "want a NATS subject without white space or wildcards")
	}
	return nil
}

// Receiver receives the datagrams published on one NATS subject into a ring
// of pre-allocated slots. It implements ud.Receiver.
//
// The subscription's callback is the ring's only producer; Peek, Release and
// Wait belong to a single consumer goroutine; Stats and Close may be called
// from any goroutine.
type Receiver struct {
	ud.Lender // Peek, Release, Wait, RingLen, RingCap

	cfg     Config
	subject string
	ring    *ud.Ring
	sub     *nats.Subscription

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// Owned by the callback.
	full bool // in a ring-full episode

	datagrams, bytes, ringFull, truncated atomic.Uint64
	// dropped is the latest slow-consumer drop count read from the
	// subscription, kept so that Stats still reports it after Close.
	dropped atomic.Uint64

	// The demand announcer: demand is its subject ("" without one);
	// stopDemand ends it, demandDone is closed when it has returned.
	demand             string
	stopDemand         context.CancelFunc
	demandDone         chan struct{}
	demandsSent, heard atomic.Uint64
}

// DemandSubject returns the demand subject of a feed handler's live
// subject, tickcast.FEED.demand.CH for tickcast.FEED.live.CH (as
// recovery.DemandSubject names it), or "" when live is not of that form.
func DemandSubject(live string) string {
	t := strings.Split(live, ".")
	if len(t) != 4 || t[0] != "tickcast" || t[1] == "" || t[2] != "live" || t[3] == "" {
		return ""
	}
	for _, c := range t[3] {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return "tickcast." + t[1] + ".demand." + t[3]
}

var _ ud.Receiver = (*Receiver)(nil)

// NewReceiver subscribes to subject on nc and returns a Receiver that puts
// every message's payload into its ring. When nc is connected, NewReceiver
// waits (up to Config.FlushTimeout) for the server to confirm the
// subscription, so every message published after it returns is delivered.
// When nc is still trying to reach a server (natsconn.Connect returns such a
// connection), the subscription takes effect once it connects.
//
// Messages published while the connection is down (between a disconnect and
// the reconnect, which resubscribes) are lost to this receiver; they show up
// as a sequence gap, as a multicast loss would.
func NewReceiver(nc *nats.Conn, subject string, cfg Config) (*Receiver, error) {
	if nc == nil {
		return nil, errors.New("natslive: NewReceiver: nil NATS connection")
	}
	if subject == "" {
		return nil, errors.New("natslive: NewReceiver: empty subject")
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	ring, err := ud.NewRing(c.RingSlots, c.MaxDatagram)
	if err != nil {
		return nil, fmt.Errorf("natslive: Config.RingSlots: %w", err)
	}
	if c.Notifier != nil {
		ring.SetNotifier(c.Notifier)
	}
	r := &Receiver{Lender: ud.NewLender(ring), cfg: c, subject: subject, ring: ring}
	sub, err := nc.Subscribe(subject, r.onMsg)
	if err != nil {
		return nil, fmt.Errorf("natslive: subscribe to %q: %w", subject, err)
	}
	r.sub = sub
	if err := sub.SetPendingLimits(c.PendingMsgs, c.PendingBytes); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("natslive: set pending limits of %q to %d messages, %d bytes: %w", subject, c.PendingMsgs, c.PendingBytes, err)
	}
	if nc.IsConnected() {
		if err := nc.FlushTimeout(c.FlushTimeout); err != nil {
			sub.Unsubscribe()
			return nil, fmt.Errorf("natslive: subscribe to %q: server did not confirm within %v: %w", subject, c.FlushTimeout, err)
		}
	}
	r.demand = c.DemandSubject
	if r.demand == "" {
		r.demand = DemandSubject(subject)
	}
	if r.demand != "" && c.DemandEvery > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		r.stopDemand, r.demandDone = cancel, make(chan struct{})
		go r.announce(ctx, nc)
	}
	return r, nil
}

// announce sends a demand request now (the subscription is in place) and
// then every Config.DemandEvery, until ctx is done. Each request waits for
// its answer at most one interval; no answer is counted, nothing more.
func (r *Receiver) announce(ctx context.Context, nc *nats.Conn) {
	defer close(r.demandDone)
	t := time.NewTicker(r.cfg.DemandEvery)
	defer t.Stop()
	for {
		r.demandsSent.Add(1)
		rctx, cancel := context.WithTimeout(ctx, r.cfg.DemandEvery)
		m, err := nc.RequestWithContext(rctx, r.demand, nil)
		cancel()
		if err == nil && m.Header.Get("Tickcast-Error") == "" {
			r.heard.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Demands returns how many demand messages the receiver has sent, and how
// many of them a feed handler answered. Both stay 0 without a demand
// subject (see Config.DemandSubject).
func (r *Receiver) Demands() (sent, answered uint64) {
	return r.demandsSent.Load(), r.heard.Load()
}

// Demand returns the subject the receiver announces its demand on, or ""
// when it announces none.
func (r *Receiver) Demand() string {
	if r.stopDemand == nil {
		return ""
	}
	return r.demand
}

// onMsg is the subscription's callback, the ring's only producer. It runs on
// the subscription's goroutine, one message at a time.
func (r *Receiver) onMsg(m *nats.Msg) {
	r.deliver(m.Data)
}

// deliver copies one datagram into the next free slot and publishes it,
// waiting for the consumer while the ring is full. Counters are updated
// before Publish, so a consumer that has seen a datagram also sees the
// counters that include it.
func (r *Receiver) deliver(data []byte) {
	if r.closed.Load() {
		return
	}
	if len(data) > r.cfg.MaxDatagram {
		r.truncated.Add(1)
		return
	}
	s := r.ring.FreeSlot(0)
	for s == nil {
		if !r.full {
			r.full = true
			r.ringFull.Add(1)
		}
		// nats.go queues what arrives meanwhile in the subscription's
		// pending queue, and counts what it cannot hold.
		if err := r.ring.WaitFree(waitFreeTimeout); err != nil || r.closed.Load() {
			return // closed
		}
		s = r.ring.FreeSlot(0)
	}
	r.full = false
	s.N = copy(s.Buf, data)
	s.RecvNs = time.Now().UnixNano()
	r.datagrams.Add(1)
	r.bytes.Add(uint64(len(data)))
	r.ring.Publish(1)
}

// Subject returns the NATS subject the receiver is subscribed to.
func (r *Receiver) Subject() string { return r.subject }

// MaxDatagram returns the slot size, Config.MaxDatagram.
func (r *Receiver) MaxDatagram() int { return r.cfg.MaxDatagram }

// Stats returns cumulative counters. It is safe to call from any goroutine.
//
// For this transport KernelDrops is the number of messages the NATS client
// dropped for this subscription as a slow consumer (its pending queue was
// full), as nats.Subscription.Dropped reports; the kernel's own socket
// drops do not apply (NATS runs over TCP). Syscalls and RcvBuf are 0: the
// NATS client reads the connection, not the receiver.
func (r *Receiver) Stats() ud.RecvStats {
	r.readDropped()
	return ud.RecvStats{
		Datagrams:   r.datagrams.Load(),
		Bytes:       r.bytes.Load(),
		KernelDrops: r.dropped.Load(),
		RingFull:    r.ringFull.Load(),
		Truncated:   r.truncated.Load(),
	}
}

// readDropped refreshes the slow-consumer drop count from the
// subscription. Once the subscription is gone (after Close, or after the
// connection was closed) nats.go no longer reports it, and the last value
// read stands.
func (r *Receiver) readDropped() {
	if d, err := r.sub.Dropped(); err == nil && d >= 0 {
		for {
			old := r.dropped.Load()
			if uint64(d) <= old || r.dropped.CompareAndSwap(old, uint64(d)) {
				return
			}
		}
	}
}

// Close stops announcing demand, unsubscribes and closes the ring: a callback waiting for a free slot
// returns, and the consumer may drain the datagrams already received, after
// which Wait returns ud.ErrClosed. Close is idempotent; it does not close the
// NATS connection, which belongs to the caller. Unsubscribing from a
// connection that is already closed is not an error.
func (r *Receiver) Close() error {
	r.closeOnce.Do(func() {
		if r.stopDemand != nil {
			r.stopDemand()
			<-r.demandDone
		}
		r.readDropped()
		r.closed.Store(true)
		r.ring.Close()
		if err := r.sub.Unsubscribe(); err != nil &&
			!errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			r.closeErr = fmt.Errorf("natslive: unsubscribe from %q: %w", r.subject, err)
		}
	})
	return r.closeErr
}
