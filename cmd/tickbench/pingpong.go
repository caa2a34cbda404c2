package main

// Ping-pong round trips, one pair of processes per transport: raw UDP
// (udp-echo, udp-ping: blocking send and receive on 127.0.0.1 unicast, the
// shape sockperf's ping-pong has), tickcast (tc-echo, tc-ping: each a
// tickcast.Publisher and a tickcast.Subscriber of the public API on its own
// group, the echo republishing every message it receives) and NATS
// request/reply (nats-echo, nats-ping in natsbench.go). The pinger sends
// the next ping when the previous answer arrived, and times each round trip
// on its own monotonic clock.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// udpEchoReadyMark starts the udp-echo role's readiness line; its port
// follows.
const udpEchoReadyMark = "tickbench udp-echo: ready "

// udpEcho is the udp-echo role: a socket on 127.0.0.1 (a free port) that
// sends every datagram back to where it came from, until --max-life or
// SIGTERM.
func udpEcho(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("udp-echo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("role", "udp-echo", "")
	maxLife := fs.Duration("max-life", time.Minute, "stop after this long at most")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: loopback}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	tv := unix.NsecToTimeval(rcvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	fmt.Fprintf(stderr, "%s%d\n", udpEchoReadyMark, sa.(*unix.SockaddrInet4).Port)
	buf := make([]byte, 65536)
	end := time.Now().Add(*maxLife)
	var echoed uint64
	for time.Now().Before(end) {
		select {
		case <-sig:
			end = time.Now()
			continue
		default:
		}
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // SO_RCVTIMEO or EINTR: check the deadline and signals
		}
		if err := unix.Sendto(fd, buf[:n], 0, from); err == nil {
			echoed++
		}
	}
	return json.NewEncoder(stdout).Encode(map[string]uint64{"echoed": echoed})
}

// udpPing is the udp-ping role: --count round trips of --size bytes to
// 127.0.0.1:--port, back to back, blocking.
func udpPing(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("udp-ping", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("role", "udp-ping", "")
	port := fs.Int("port", 0, "echo port on 127.0.0.1")
	size := fs.Int("size", 100, "datagram bytes")
	count := fs.Uint64("count", 10000, "round trips")
	hgrm := fs.String("hgrm", "", "write the round-trip histogram here (.hgrm, µs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port < 1 || *port > 65535 || *size < stampLen || *size > 65507 {
		return fmt.Errorf("--port %d, --size %d: want 1..65535 and %d..65507", *port, *size, stampLen)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: loopback, Port: *port}); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	out, in := make([]byte, *size), make([]byte, *size+1)
	hist := newLatHist()
	var rep pingReport
	for i := uint64(0); i < *count; i++ {
		binary.BigEndian.PutUint64(out, i)
		t0 := monoNs()
		rep.Pings++
		if _, err := unix.Write(fd, out); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		for {
			n, err := unix.Read(fd, in)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				rep.Timeout++
				break
			}
			if n >= 8 && binary.BigEndian.Uint64(in) == i {
				recordLat(hist, monoNs()-t0)
				rep.Pongs++
				break
			}
		}
	}
	return printLatReport(stdout, &rep, &rep.latStats, hist, *hgrm)
}

// tcFlags parses the flags of the tickcast ping-pong roles.
type tcFlags struct {
	fs        *flag.FlagSet
	in, out   string
	mode      string
	maxLife   time.Duration
	inG, outG netip.AddrPort
}

func newTCFlags(role string) *tcFlags {
	f := &tcFlags{fs: flag.NewFlagSet(role, flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.fs.String("role", role, "")
	f.fs.StringVar(&f.in, "in", "", "group:port to subscribe to (one channel)")
	f.fs.StringVar(&f.out, "out", "", "group:port to publish on (one channel)")
	f.fs.StringVar(&f.mode, "mode", "blocking", "the subscriber's receive mode")
	f.fs.DurationVar(&f.maxLife, "max-life", time.Minute, "stop after this long at most")
	return f
}

func (f *tcFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	var err error
	for _, g := range []struct {
		s   string
		dst *netip.AddrPort
	}{{f.in, &f.inG}, {f.out, &f.outG}} {
		if *g.dst, err = netip.ParseAddrPort(g.s); err != nil || !allowedGroup(g.dst.Addr()) {
			return fmt.Errorf("group %q: want an address:port in 239.77.0.0/16-239.79.0.0/16", g.s)
		}
	}
	return nil
}

// open returns the role's publisher and subscriber, on the loopback
// interface with TTL 0.
func (f *tcFlags) open() (*tickcast.Publisher, *tickcast.Subscriber, error) {
	mode, err := ud.ParseMode(f.mode)
	if err != nil {
		return nil, nil, err
	}
	lo := netip.AddrFrom4(loopback)
	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{Channels: 1, GroupA: f.outG,
		NewSender: udp.Senders(udp.Config{Interface: lo, TTL: 0})})
	if err != nil {
		return nil, nil, err
	}
	sub, err := tickcast.NewSubscriber(tickcast.SubscriberConfig{Channels: 1, GroupA: f.inG,
		NewReceiver: udp.Receivers(udp.Config{Interface: lo, Mode: mode, CPU: -1}),
		Tracker:     seqgap.Config{LostAfter: 10 * time.Millisecond}})
	if err != nil {
		pub.Close()
		return nil, nil, err
	}
	return pub, sub, nil
}

// echoHandler republishes every message it is given.
type echoHandler struct {
	pub    *tickcast.Publisher
	m      feed.Msg
	echoed uint64
	err    error
}

func (h *echoHandler) Message(ch int, seq uint64, msg []byte, recvNs int64) {
	if h.m.Decode(msg) != nil {
		return
	}
	now := tickcast.Now()
	if err := h.pub.Publish(&h.m, now); err != nil && h.err == nil {
		h.err = err
	}
	if err := h.pub.Flush(now); err != nil && h.err == nil {
		h.err = err
	}
	h.echoed++
}

func (h *echoHandler) Event(*tickcast.Event) {}

// tcEcho is the tc-echo role: it republishes on --out every message it
// receives on --in, until the pinger's session ends, --max-life or SIGTERM.
func tcEcho(args []string, stdout, stderr io.Writer) error {
	f := newTCFlags("tc-echo")
	if err := f.parse(args); err != nil {
		return err
	}
	pub, sub, err := f.open()
	if err != nil {
		return err
	}
	defer pub.Close()
	defer sub.Close()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, f.maxLife)
	defer cancel2()
	h := &echoHandler{pub: pub}
	fmt.Fprintln(stderr, "tickbench tc-echo: ready")
	_ = sub.Run(ctx, h, func() bool { return h.err != nil || sub.AllEnded() })
	if h.err != nil {
		return h.err
	}
	return json.NewEncoder(stdout).Encode(map[string]uint64{"echoed": h.echoed})
}

// pingHandler notes the ping id (the exchange timestamp) of each answer.
type pingHandler struct {
	m    feed.Msg
	got  uint64
	last int64
}

func (h *pingHandler) Message(ch int, seq uint64, msg []byte, recvNs int64) {
	if h.m.Decode(msg) == nil {
		h.got++
		h.last = h.m.ExchangeNs
	}
}

func (h *pingHandler) Event(*tickcast.Event) {}

// tcPing is the tc-ping role: it publishes an instrument definition on
// --out until the echo answers on --in, then --count quotes, each once the
// previous came back, timing the round trips.
func tcPing(args []string, stdout io.Writer) error {
	f := newTCFlags("tc-ping")
	count := f.fs.Uint64("count", 10000, "round trips")
	hgrm := f.fs.String("hgrm", "", "write the round-trip histogram here (.hgrm, µs)")
	if err := f.parse(args); err != nil {
		return err
	}
	pub, sub, err := f.open()
	if err != nil {
		return err
	}
	defer sub.Close()
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.maxLife)
	defer cancel()
	sym, _ := feed.MakeSymbol("PING")
	def := feed.Msg{Header: feed.Header{Type: feed.TypeDefinition, Instrument: 1}, Def: feed.Definition{Symbol: sym, PriceScale: 4, RoundLot: 100}}
	h := &pingHandler{}
	var deadline int64
	until := func(d time.Duration, done func() bool) func() bool {
		deadline = monoNs() + int64(d)
		return func() bool { return done() || monoNs() > deadline }
	}
	// The echo may not have joined when the first definition goes out: send
	// it until one comes back.
	for h.got == 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer from the echo within %v", f.maxLife)
		}
		if err := pub.Publish(&def, tickcast.Now()); err != nil {
			return err
		}
		if err := pub.Flush(tickcast.Now()); err != nil {
			return err
		}
		_ = sub.Run(ctx, h, until(50*time.Millisecond, func() bool { return h.got > 0 }))
	}
	hist := newLatHist()
	var rep pingReport
	q := feed.Msg{Header: feed.Header{Type: feed.TypeQuote, Instrument: 1, Flags: feed.FlagBidPresent | feed.FlagAskPresent},
		Quote: feed.Quote{BidPx: 1000000, BidSize: 100, AskPx: 1000100, AskSize: 200}}
	for i := uint64(1); i <= *count && ctx.Err() == nil; i++ {
		q.ExchangeNs = int64(i)
		stop := until(time.Second, func() bool { return h.last == int64(i) })
		t0 := monoNs()
		rep.Pings++
		if err := pub.Publish(&q, tickcast.Now()); err != nil {
			return err
		}
		if err := pub.Flush(tickcast.Now()); err != nil {
			return err
		}
		_ = sub.Run(ctx, h, stop)
		if h.last != int64(i) {
			rep.Timeout++
			continue
		}
		recordLat(hist, monoNs()-t0)
		rep.Pongs++
	}
	return printLatReport(stdout, &rep, &rep.latStats, hist, *hgrm)
}
