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
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/logging"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/mold"
)

// Settings are the feed handler's settings.
type Settings struct {
	Source      string        `flag:"source" default:"synthetic" help:"upstream feed: synthetic"`
	Count       uint64        `flag:"count" default:"1000000" help:"messages to publish, then end the session (0 = no limit)"`
	Rate        float64       `flag:"rate" default:"100000" help:"messages per second, paced by spinning on the clock (0 = as fast as possible)"`
	Instruments int           `flag:"instruments" default:"100" help:"synthetic instruments"`
	Seed        uint64        `flag:"seed" default:"1" help:"synthetic feed seed"`
	Channels    int           `flag:"channels" default:"4" help:"channels (multicast streams) instruments are spread over"`
	Group       string        `flag:"group" default:"239.77.0.1:31001" help:"A-line group of channel 0; channel c uses the address plus c"`
	GroupB      string        `flag:"group-b" default:"" help:"B-line group of channel 0 (empty: no B line)"`
	Iface       string        `flag:"iface" default:"127.0.0.1" help:"IPv4 address of the interface to send on"`
	TTL         int           `flag:"ttl" default:"0" help:"multicast TTL (0 keeps packets on this host)"`
	MaxDatagram int           `flag:"max-datagram" default:"1472" help:"largest datagram in bytes"`
	MaxDelay    time.Duration `flag:"max-delay" default:"50us" help:"longest a message waits in a partly filled packet while input keeps coming"`
	Heartbeat   time.Duration `flag:"heartbeat" default:"100ms" help:"idle time after which a channel sends a heartbeat"`
	SendBatch   int           `flag:"send-batch" default:"16" help:"packets per channel sent in one sendmmsg call at most"`
	LogFormat   string        `flag:"log-format" default:"auto" help:"auto (console on a terminal, else json), console or json"`
	LogLevel    string        `flag:"log-level" default:"info" help:"debug, info, warn or error"`
	Demo        bool          `flag:"demo" help:"also run a verifying subscriber in this process and print its summary"`

	Origins cliconf.Origins // where each explicitly set setting came from
}

func (s *Settings) validate() error {
	switch {
	case s.Source != "synthetic":
		return cliconf.Invalid("source", "%q: want synthetic", s.Source)
	case s.Rate < 0:
		return cliconf.Invalid("rate", "%v: must not be negative", s.Rate)
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
	case s.Demo && s.Count == 0:
		return cliconf.Invalid("count", "0 (no limit) cannot be combined with --demo, which ends when the feed does")
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

	syn := feed.SyntheticConfig{Seed: s.Seed, Instruments: s.Instruments, Channels: s.Channels, Count: s.Count}
	src, err := feed.NewSynthetic(syn)
	if err != nil {
		fmt.Fprintf(stderr, "feedhandler: %v\n", err)
		return 2
	}
	udpc := tickcast.UDPConfig{Interface: iface, TTL: s.TTL, MaxDatagram: s.MaxDatagram, CPU: -1}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// In demo mode the subscriber joins before the first packet is sent.
	var demo *subapp.App
	demoDone := make(chan int, 1)
	if s.Demo {
		demo, err = subapp.New(subapp.Settings{
			Channels: s.Channels, Group: s.Group, GroupB: s.GroupB, Iface: s.Iface,
			MaxDatagram: s.MaxDatagram, Verify: true, Seed: s.Seed, Instruments: s.Instruments,
			Expect: s.Count, IdleTimeout: 5 * time.Second, Format: "none", Mode: "blocking", CPU: -1,
		}, log.With().Str("role", "demo-subscriber").Logger(), stdout)
		if err != nil {
			log.Error().Err(err).Msg("demo subscriber")
			return 1
		}
		go func() { demoDone <- demo.Run(context.Background()) }()
	}

	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{
		Channels: s.Channels, GroupA: group, GroupB: groupB,
		NewSender:   tickcast.UDPSenders(udpc),
		MaxDatagram: s.MaxDatagram, MaxDelay: s.MaxDelay, Heartbeat: s.Heartbeat, SendBatch: s.SendBatch,
	})
	if err != nil {
		log.Error().Err(err).Msg("cannot start publisher")
		return 1
	}
	sessions := pub.Sessions()
	for ch := 0; ch < s.Channels; ch++ {
		ga, _ := tickcast.ChannelGroup(group, ch)
		ev := log.Info().Int("channel", ch).Str("session", sessions[ch].String()).Str("group", ga.String()).
			Int("instruments", len(src.ChannelInstruments(ch)))
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
	runErr := pub.Run(ctx, src, tickcast.RunConfig{Rate: s.Rate, OnError: func(err error) {
		unknown++
		if unknown <= 10 {
			log.Warn().Err(err).Msg("message dropped")
		}
	}})
	closeErr := pub.Close()
	elapsed := time.Since(start)
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
