// Command feedhandler publishes a normalized market-data feed as sequenced
// MoldUDP64 packets over UDP multicast.
//
// Settings come from flags, TICKCAST_* environment variables and an optional
// YAML config file (--config), in that order of precedence; run with --help
// for the list. On SIGINT or SIGTERM it flushes, sends end of session on
// every channel and exits 0. Bad flags or configuration exit 2 with a
// message naming the setting.
//
// With --demo it also runs a verifying subscriber in the same process and
// prints the subscriber's summary: one command that shows the whole path
// working on loopback.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/logging"
	"github.com/tickcast/tickcast/internal/metricsrv"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/udp"
)

// Settings are the feed handler's settings.
type Settings struct {
	Source      string        `flag:"source" default:"synthetic" help:"upstream feed: synthetic, or itch:PATH (NASDAQ ITCH 5.0 file, plain or gzip)"`
	DryRun      bool          `flag:"dry-run" help:"with itch:PATH, read the whole file and print counts as JSON, publishing nothing"`
	ITCHOrders  int           `flag:"itch-orders" default:"1048576" help:"with itch:PATH, capacity of the order table (live orders; occupancy is logged and in --dry-run)"`
	Count       uint64        `flag:"count" default:"1000000" help:"messages to publish, then end the session (0 = no limit)"`
	Duration    time.Duration `flag:"duration" default:"0s" help:"publish for this long, then end the session (0 = no limit; with --count, whichever comes first)"`
	Rate        float64       `flag:"rate" default:"100000" help:"messages per second (0 = as fast as possible), paced by a kernel sleep and a spin on the clock for the last --pace-spin before each message"`
	PaceSpin    time.Duration `flag:"pace-spin" default:"60us" help:"how long before each message the pacer spins instead of sleeping (negative: always spin, one core busy)"`
	Pregenerate bool          `flag:"pregenerate" help:"with the synthetic source, generate every message (--count of them, at most 10,000,000; 160 bytes each) before publishing starts, so that benchmarks measure distribution without generation"`
	Instruments int           `flag:"instruments" default:"100" help:"synthetic instruments"`
	Seed        uint64        `flag:"seed" default:"1" help:"synthetic feed seed"`
	Channels    int           `flag:"channels" default:"4" help:"channels (multicast streams) instruments are spread over"`
	Group       string        `flag:"group" default:"239.77.0.1:31001" help:"A-line group of channel 0; channel c uses the address plus c"`
	GroupB      string        `flag:"group-b" default:"" help:"B-line group of channel 0 (empty: no B line)"`
	Iface       string        `flag:"iface" default:"127.0.0.1" help:"IPv4 address of the interface to send on"`
	Transport   string        `flag:"transport" default:"udp" help:"udp (multicast) or rdma (RDMA UD multicast; a binary built with -tags rdma, --iface the RDMA netdev's address, datagrams at most the port's MTU)"`
	TTL         int           `flag:"ttl" default:"0" help:"multicast TTL (0 keeps packets on this host)"`
	MaxDatagram int           `flag:"max-datagram" default:"1472" help:"largest datagram in bytes"`
	MaxDelay    time.Duration `flag:"max-delay" default:"50us" help:"longest a message waits in a partly filled packet while input keeps coming"`
	Heartbeat   time.Duration `flag:"heartbeat" default:"100ms" help:"idle time after which a channel sends a heartbeat"`
	SendBatch   int           `flag:"send-batch" default:"16" help:"packets per channel sent in one sendmmsg call at most"`
	LogFormat   string        `flag:"log-format" default:"auto" help:"auto (console on a terminal, else json), console or json"`
	LogLevel    string        `flag:"log-level" default:"info" help:"debug, info, warn or error"`
	Demo        bool          `flag:"demo" help:"also run a verifying subscriber in this process and print its summary"`

	FeedName      string        `flag:"feed-name" default:"tickcast" help:"feed name in the NATS subjects (tickcast.FEED.retransmit.CH, ...)"`
	NATSURL       string        `flag:"nats-url" default:"" help:"external NATS server or cluster to serve recovery on (empty: run an embedded server on --nats-listen)"`
	NATSListen    string        `flag:"nats-listen" default:"127.0.0.1:4222" help:"address of the embedded NATS server (port 0: a free port)"`
	NATSUsers     string        `flag:"nats-users" default:"" help:"embedded server users, name:password:role (feedhandler or subscriber), comma separated, or @FILE with one per line"`
	NATSLive      bool          `flag:"nats-live" default:"true" help:"also publish every datagram on tickcast.FEED.live.CH for subscribers without multicast (with the embedded server, only while a subscriber listens)"`
	Linger        time.Duration `flag:"linger" default:"5s" help:"after end of session, keep serving recovery (and repeating end of session) this long"`
	StoreMessages int           `flag:"store-messages" default:"1048576" help:"retransmission store limit per channel, in messages"`
	StoreBytes    int           `flag:"store-bytes" default:"67108864" help:"retransmission store limit per channel, in message bytes"`
	MaxRetransmit int           `flag:"max-retransmit" default:"10000" help:"most messages one retransmit request may ask for"`
	RateLimit     float64       `flag:"rate-limit" default:"1000000" help:"messages per second one requester may be sent"`
	MetricsAddr   string        `flag:"metrics-addr" default:"127.0.0.1:9464" help:"serve Prometheus metrics on http://ADDR/metrics (empty: no metrics; port 0: a free port)"`
	natsconn.Flags

	Origins cliconf.Origins // where each explicitly set setting came from
}

func (s *Settings) validate() error {
	if err := validateSource(s); err != nil {
		return err
	}
	switch {
	case s.ITCHOrders < 1:
		return cliconf.Invalid("itch-orders", "%d: must be positive", s.ITCHOrders)
	case s.Rate < 0:
		return cliconf.Invalid("rate", "%v: must not be negative", s.Rate)
	case s.Duration < 0:
		return cliconf.Invalid("duration", "%v: must not be negative", s.Duration)
	case s.Instruments < 1 || s.Instruments > 456976:
		return cliconf.Invalid("instruments", "%d: want 1..456976", s.Instruments)
	case s.Channels < 1 || s.Channels > 1296:
		return cliconf.Invalid("channels", "%d: want 1..1296", s.Channels)
	case s.TTL < 0 || s.TTL > 255:
		return cliconf.Invalid("ttl", "%d: want 0..255", s.TTL)
	case s.MaxDatagram < mold.HeaderLen+mold.BlockHdrLen+feed.MaxLen || s.MaxDatagram > 65507:
		return cliconf.Invalid("max-datagram", "%d: want %d..65507", s.MaxDatagram, mold.HeaderLen+mold.BlockHdrLen+feed.MaxLen)
	case s.MaxDelay <= 0:
		return cliconf.Invalid("max-delay", "%v: must be positive", s.MaxDelay)
	case s.Heartbeat <= 0:
		return cliconf.Invalid("heartbeat", "%v: must be positive", s.Heartbeat)
	case s.SendBatch < 1 || s.SendBatch > 1024:
		return cliconf.Invalid("send-batch", "%d: want 1..1024", s.SendBatch)
	case s.Linger < 0:
		return cliconf.Invalid("linger", "%v: must not be negative", s.Linger)
	case s.StoreMessages < 1:
		return cliconf.Invalid("store-messages", "%d: must be positive", s.StoreMessages)
	case s.StoreBytes < 65535:
		return cliconf.Invalid("store-bytes", "%d: at least 65535, so any message fits", s.StoreBytes)
	case s.MaxRetransmit < 1 || s.MaxRetransmit > mold.MaxCount:
		return cliconf.Invalid("max-retransmit", "%d: want 1..%d", s.MaxRetransmit, mold.MaxCount)
	case s.RateLimit <= 0:
		return cliconf.Invalid("rate-limit", "%v: must be positive", s.RateLimit)
	case s.Demo && s.Count == 0:
		return cliconf.Invalid("count", "0 (no limit) cannot be combined with --demo, which ends when the feed does")
	case metricsrv.CheckAddr(s.MetricsAddr) != nil:
		return cliconf.Invalid("metrics-addr", "%v", metricsrv.CheckAddr(s.MetricsAddr))
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var s Settings
	err := cliconf.Load("feedhandler", args, getenv, &s)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, cliconf.Usage("feedhandler", &s))
		return 0
	}
	if err == nil {
		err = s.validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "feedhandler: %v\n", err)
		return 2
	}
	group, err := tickcast.ParseGroup(s.Group)
	if err != nil {
		fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("group", "%v", err))
		return 2
	}
	var groupB netip.AddrPort
	if s.GroupB != "" {
		if groupB, err = tickcast.ParseGroup(s.GroupB); err != nil {
			fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("group-b", "%v", err))
			return 2
		}
	}
	iface, err := netip.ParseAddr(s.Iface)
	if err != nil || !iface.Is4() {
		fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("iface", "%q is not an IPv4 address", s.Iface))
		return 2
	}
	log, err := logging.New(s.LogFormat, s.LogLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "feedhandler: %v\n", err)
		return 2
	}

	if s.DryRun {
		return dryRun(&s, log, stdout, stderr)
	}
	src, releaseSrc, err := openSource(&s, log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "feedhandler: %v\n", err)
		return 2
	}
	defer releaseSrc()
	newSender := udp.Senders(udp.Config{Interface: iface, TTL: s.TTL, MaxDatagram: s.MaxDatagram, CPU: -1})
	pubMaxDatagram := s.MaxDatagram
	switch s.Transport {
	case "udp":
	case "rdma":
		if !rdma.Available {
			fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("transport", "%v", rdma.ErrNotBuilt))
			return 2
		}
		// The packet size comes from the port's active MTU unless
		// --max-datagram was set explicitly (a larger one fails: too large).
		rc := rdma.Config{Interface: iface, CPU: -1}
		pubMaxDatagram = 0
		if _, set := s.Origins["max-datagram"]; set {
			rc.MaxDatagram, pubMaxDatagram = s.MaxDatagram, s.MaxDatagram
		}
		newSender = rdma.Senders(rc)
	default:
		fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("transport", "%q: want udp or rdma", s.Transport))
		return 2
	}

	if err := recovery.ValidateFeed(s.FeedName); err != nil {
		fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("feed-name", "%v", err))
		return 2
	}
	var users []natsconn.User
	if s.NATSUsers != "" {
		if s.NATSURL != "" {
			fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("nats-users", "configures the embedded server, which --nats-url replaces"))
			return 2
		}
		if strings.HasPrefix(s.NATSUsers, "@") {
			users, err = natsconn.LoadUsersFile(s.NATSUsers[1:])
		} else {
			users, err = natsconn.ParseUsers(s.NATSUsers)
		}
		if err != nil {
			fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("nats-users", "%v", err))
			return 2
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Recovery: a store per channel, served over NATS (embedded unless
	// --nats-url names a server).
	natsURL := s.NATSURL
	var liveInterest func(string) bool // embedded server: publish live only to listeners
	if natsURL == "" {
		host, portStr, err := net.SplitHostPort(s.NATSListen)
		port, perr := strconv.Atoi(portStr)
		if err != nil || perr != nil || port < 0 || port > 65535 {
			fmt.Fprintf(stderr, "feedhandler: %v\n", cliconf.Invalid("nats-listen", "%q: want host:port", s.NATSListen))
			return 2
		}
		srv, err := natsconn.StartServer(natsconn.ServerConfig{Host: host, Port: port, Feed: s.FeedName, Users: users,
			Log: func(level, msg string) {
				if level != "info" {
					log.Warn().Str("nats", level).Msg(msg)
				}
			}})
		if err != nil {
			log.Error().Err(err).Msg("cannot start the embedded NATS server")
			return 1
		}
		defer srv.Shutdown()
		natsURL = srv.ClientURL()
		liveInterest = srv.Interest
		log.Info().Str("url", natsURL).Int("users", len(users)).Msg("embedded NATS server listening")
	}
	nc, err := natsconn.Connect(s.Flags.ConnConfig(natsURL, "feedhandler", ""), func(event string, err error) {
		log.Warn().Str("event", event).Err(err).Msg("nats")
	})
	if err != nil {
		log.Error().Err(err).Str("url", natsURL).Msg("cannot connect to NATS")
		return 1
	}
	defer nc.Close()
	stores := make([]*recovery.Channel, s.Channels)
	for ch := range stores {
		if stores[ch], err = recovery.NewChannel(recovery.StoreConfig{MaxMessages: s.StoreMessages, MaxBytes: s.StoreBytes}); err != nil {
			fmt.Fprintf(stderr, "feedhandler: %v\n", err)
			return 2
		}
	}
	rsrv, err := recovery.NewServer(nc, recovery.ServerConfig{Feed: s.FeedName, Channels: stores,
		MaxRetransmit: s.MaxRetransmit, RateLimit: s.RateLimit, LiveInterest: liveInterest,
		Log: log.With().Str("role", "recovery").Logger()})
	if err != nil {
		log.Error().Err(err).Msg("cannot serve recovery")
		return 1
	}
	defer rsrv.Close()
	metrics, err := startMetrics(&s, log, rsrv, stores)
	if err != nil {
		log.Error().Err(err).Str("metrics_addr", s.MetricsAddr).Msg("cannot serve metrics")
		return 1
	}
	defer metrics.Close()
	storeErrs := 0
	onPacket := func(ch int, session mold.Session, firstSeq uint64, pkt []byte) {
		if err := stores[ch].OnPacket(session, firstSeq, pkt); err != nil {
			// The store refuses only what breaks the stream; say so, rarely.
			if storeErrs++; storeErrs <= 10 {
				log.Error().Err(err).Int("channel", ch).Msg("retransmission store")
			}
		}
		if s.NATSLive {
			rsrv.Live(ch, pkt)
		}
	}

	// In demo mode the subscriber joins before the first packet is sent.
	var demo *subapp.App
	demoDone := make(chan int, 1)
	if s.Demo {
		demo, err = subapp.New(subapp.Settings{
			Channels: s.Channels, Group: s.Group, GroupB: s.GroupB, Iface: s.Iface,
			MaxDatagram: s.MaxDatagram, Verify: true, Seed: s.Seed, Instruments: s.Instruments,
			Expect: s.Count, IdleTimeout: 5 * time.Second, Format: "none", Mode: "auto", CPU: -1,
			Window: 131072, StaleAfter: 300 * time.Millisecond,
			Recovery: true, NATSURL: natsURL, FeedName: s.FeedName, RecoveryTimeout: 2 * time.Second,
		}, log.With().Str("role", "demo-subscriber").Logger(), stdout)
		if err != nil {
			log.Error().Err(err).Msg("demo subscriber")
			return 1
		}
		go func() { demoDone <- demo.Run(context.Background()) }()
	}

	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{
		Channels: s.Channels, GroupA: group, GroupB: groupB,
		NewSender:   newSender,
		MaxDatagram: pubMaxDatagram, MaxDelay: s.MaxDelay, Heartbeat: s.Heartbeat, SendBatch: s.SendBatch,
		OnPacket: onPacket,
		Observer: metrics.observer,
		OnControl: func(ch int, session mold.Session, nextSeq uint64, datagram []byte) {
			// Heartbeats and end of session go to the store too: one before
			// the first message starts its session (snapshots can be served
			// from the start), and the end tells probing subscribers that
			// nothing more will come.
			stores[ch].OnPacket(session, nextSeq, datagram)
			if s.NATSLive {
				rsrv.Live(ch, datagram)
			}
		},
	})
	if err != nil {
		log.Error().Err(err).Msg("cannot start publisher")
		return 1
	}
	metrics.addPublisher(pub)
	sessions := pub.Sessions()
	for ch := 0; ch < s.Channels; ch++ {
		ga, _ := tickcast.ChannelGroup(group, ch)
		ev := log.Info().Int("channel", ch).Str("session", sessions[ch].String()).Str("group", ga.String()).
			Int("instruments", channelInstruments(src, ch))
		if groupB.IsValid() {
			gb, _ := tickcast.ChannelGroup(groupB, ch)
			ev = ev.Str("group_b", gb.String())
		}
		ev.Msg("channel open")
	}
	log.Info().Str("source", s.Source).Uint64("count", s.Count).Float64("rate", s.Rate).
		Uint64("seed", s.Seed).Int("instruments", s.Instruments).Str("settings_from", s.Origins.String()).Msg("publishing")

	start := time.Now()
	unknown := 0
	runCtx := ctx
	if s.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, s.Duration)
		defer cancel()
	}
	runErr := pub.Run(runCtx, src, tickcast.RunConfig{Rate: s.Rate, Spin: s.PaceSpin, OnError: func(err error) {
		unknown++
		if unknown <= 10 || unknown%10000 == 0 {
			log.Warn().Err(err).Int("errors", unknown).Msg("publish error (the run goes on)")
		}
	}})
	endErr := pub.End()
	elapsed := time.Since(start)
	// Linger: keep serving recovery, and repeat the end of session every
	// heartbeat interval so a subscriber that lost it still learns where the
	// session ended. A second signal ends the linger at once.
	if s.Linger > 0 && ctx.Err() == nil {
		log.Info().Dur("linger", s.Linger).Msg("session ended; serving recovery")
		lingerCtx, lingerStop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		tick := time.NewTicker(s.Heartbeat)
		deadline := time.NewTimer(s.Linger)
	linger:
		for {
			select {
			case <-tick.C:
				pub.End()
			case <-deadline.C:
				break linger
			case <-lingerCtx.Done():
				break linger
			}
		}
		tick.Stop()
		lingerStop()
	}
	closeErr := pub.Close()
	if closeErr == nil {
		closeErr = endErr
	}
	rst := rsrv.Stats()
	st := pub.Stats()
	for ch := 0; ch < s.Channels; ch++ {
		log.Info().Int("channel", ch).Str("session", sessions[ch].String()).Uint64("next_seq", pub.NextSeq(ch)).
			Uint64("packets", pub.ChannelPackets(ch)).Msg("end of session sent")
	}
	summary := map[string]any{
		"role": "feedhandler", "messages": st.Messages, "packets": st.Packets, "heartbeats": st.Heartbeats,
		"elapsed_s": elapsed.Seconds(), "msgs_per_s": float64(st.Messages) / elapsed.Seconds(),
		"msgs_per_packet": float64(st.Messages) / max(1, float64(st.Packets)),
		"flush_drain":     st.FlushDrain, "flush_full": st.FlushFull, "flush_deadline": st.FlushDeadline,
		"unknown_instrument": st.UnknownInstrument, "interrupted": ctx.Err() != nil,
		"duration_reached":    ctx.Err() == nil && runCtx.Err() != nil,
		"retransmit_requests": rst.Requests, "retransmitted": rst.MessagesServed, "snapshots": rst.Snapshots,
		"recovery_rejected": rst.Rejected, "live_published": rst.LivePublished, "live_skipped": rst.LiveSkipped,
	}
	level := zerolog.InfoLevel
	code := 0
	for _, err := range []error{runErr, closeErr} {
		if err != nil {
			log.Error().Err(err).Msg("publishing failed")
			level, code = zerolog.ErrorLevel, 1
		}
	}
	log.WithLevel(level).Fields(summary).Msg("feed handler done")
	if !s.Demo {
		b, _ := json.Marshal(summary)
		fmt.Fprintln(stdout, string(b))
		return code
	}
	subCode := <-demoDone
	if code == 0 {
		code = subCode
	}
	return code
}
