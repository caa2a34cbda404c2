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
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/internal/logging"
	"github.com/tickcast/tickcast/ud/udp"
)

// usageText heads --help's output.
const usageText = "Usage: moldreplay --itch FILE [flags]\n       moldreplay --pcap FILE[:GROUP:PORT] [flags]\n\nServes an ITCH 5.0 file, or a capture of MoldUDP64 packets carrying ITCH 5.0, as a\nMoldUDP64 feed on an A and an optional B multicast line, with injected loss, and\nanswers MoldUDP64 re-requests (docs/moldreplay.md). Settings come from flags only.\n\n"

// run is the program: it returns the exit code. ready, if not nil, is given
// the re-request server's address (or the zero address) once the sockets
// are open, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(netip.AddrPort)) int {
	cfg, code, ok := parseArgs(args, stdout, stderr)
	if !ok {
		return code
	}
	log, err := logging.New(cfg.logFormat, cfg.logLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "moldreplay: --log: %v\n", err)
		return 2
	}
	r := &replay{cfg: cfg, log: log}
	defer r.close()
	if code, err := r.open(); err != nil {
		fmt.Fprintf(stderr, "moldreplay: %v\n", err)
		return code
	}
	if ready != nil {
		var addr netip.AddrPort
		if r.srv != nil {
			addr = r.srv.Addr()
		}
		ready(addr)
	}
	log.Info().Str(cfg.inputFlag, cfg.path).Str("session", cfg.exchange.Session.String()).Str("groups", fmt.Sprint(cfg.groups)).
		Float64("speed", cfg.exchange.Speed).Float64("rate", cfg.exchange.Rate).Msg("serving")
	start := time.Now()
	runErr := r.x.run(ctx, r.in)
	code = 0
	if runErr != nil {
		log.Error().Err(runErr).Msg("input")
		code = 1
	}
	sum := r.finish(ctx, runErr)
	sum.ElapsedS = time.Since(start).Seconds()
	b, _ := json.Marshal(sum)
	fmt.Fprintln(stdout, string(b))
	return code
}

// parseArgs parses and checks the flags. When ok is false the run ends
// with code: 0 after --help, 2 after a bad flag, which it has reported on
// stderr.
func parseArgs(args []string, stdout, stderr io.Writer) (cfg config, code int, ok bool) {
	var s settings
	fs := newFlagSet(&s, stderr)
	// The flag package prints a bad flag's error (naming it) to stderr; the
	// usage goes to stdout, and only when asked for.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return cfg, 0, false
		}
		fmt.Fprintln(stderr, "moldreplay: run with --help for the flags")
		return cfg, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "moldreplay: unexpected argument %q (the file goes after --itch or --pcap)\n", fs.Arg(0))
		return cfg, 2, false
	}
	s.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { s.set[f.Name] = true })
	o, err := s.check()
	if err != nil {
		fmt.Fprintf(stderr, "moldreplay: %v\n", err)
		return cfg, 2, false
	}
	return s.config(o), 0, true
}

// config is what a run serves and how: the checked settings in the form
// the runner takes them.
type config struct {
	inputFlag string // "itch" or "pcap": the flag that named the input
	path      string // the input file
	pcapSpec  string // --pcap, with its filter; empty for an ITCH file
	groups    []netip.AddrPort
	senders   []udp.Config // one per line
	loss      [2]Loss
	seed      uint64
	store     uint64
	// serveRerequest starts a re-request server on rerequestAddr.
	serveRerequest bool
	rerequestAddr  netip.AddrPort
	rerequest      rerequestConfig // without its Log
	exchange       exchangeConfig  // without its Clock and Log
	linger         time.Duration
	logFormat      string
	logLevel       string
}

// config returns the run that s, checked as o, asks for.
func (s *settings) config(o options) config {
	c := config{inputFlag: "itch", path: s.path(), pcapSpec: s.pcap, groups: o.groups, loss: o.loss, seed: s.seed,
		store: s.store, serveRerequest: o.serveRerequest, rerequestAddr: o.rerequest, linger: s.linger,
		logFormat: s.logFormat, logLevel: s.logLevel}
	if s.pcap != "" {
		c.inputFlag = "pcap"
	}
	for _, g := range o.groups {
		c.senders = append(c.senders, udp.Config{Group: g.Addr(), Port: int(g.Port()), Interface: o.iface, TTL: s.ttl, MaxDatagram: s.maxDatagram})
	}
	c.rerequest = rerequestConfig{Session: o.session, MaxCount: s.maxCount, MaxDatagram: s.maxDatagram,
		Off: s.rerequestOff, StopAfter: s.rerequestStopAfter, Garbage: s.rerequestGarbage}
	c.exchange = exchangeConfig{Session: o.session, Speed: s.speed, Rate: s.rate, Heartbeat: s.heartbeat,
		MaxDatagram: s.maxDatagram, EndRepeat: s.endRepeat, EndInterval: min(s.heartbeat, 100*time.Millisecond)}
	return c
}

// replay is one run: its input, its lines, its re-request server and the
// exchange that serves the input on the lines.
type replay struct {
	cfg     config
	log     zerolog.Logger
	file    *os.File
	in      Input
	capture *pcapInput // nil for an ITCH file
	senders []*udp.Sender
	lines   []*line
	srv     *rerequestServer // nil without --rerequest
	x       *exchange
}

// open opens the input, the lines' sockets, the re-request server and the
// exchange. On failure it returns the exit code and the error, naming the
// flag at fault; close releases what was opened.
func (r *replay) open() (int, error) {
	c := &r.cfg
	f, err := os.Open(c.path)
	if err != nil {
		return 2, fmt.Errorf("--%s: %w", c.inputFlag, err)
	}
	r.file = f
	if r.in, r.capture, err = openInput(f, c.pcapSpec, r.log); err != nil {
		return 1, fmt.Errorf("--%s %s: %w", c.inputFlag, c.path, err)
	}
	st := newStore(c.store)
	for i, sc := range c.senders {
		snd, err := udp.NewSender(sc)
		if err != nil {
			return 2, fmt.Errorf("%s: %w", []string{"--group", "--group-b"}[i], err)
		}
		r.senders = append(r.senders, snd)
		r.lines = append(r.lines, &line{out: snd, loss: newLossState(c.loss[i], c.seed, i), stats: LineStats{Group: c.groups[i].String()}})
	}
	if c.serveRerequest {
		rc := c.rerequest
		rc.Log = r.log
		if r.srv, err = listenRerequest(c.rerequestAddr, rc, st); err != nil {
			return 2, fmt.Errorf("--rerequest: %w", err)
		}
	}
	xc := c.exchange
	xc.Clock, xc.Log = monoClock(), r.log
	if r.x, err = newExchange(xc, r.lines, st); err != nil {
		return 2, err
	}
	return 0, nil
}

// finish ends the run after the exchange stopped with runErr: it lets the
// re-request server answer for --linger (or until ctx ends), closes it,
// and returns the summary, less the elapsed time.
func (r *replay) finish(ctx context.Context, runErr error) Summary {
	x := r.x
	sum := Summary{Session: r.cfg.exchange.Session.String(), Packets: x.packets, Messages: x.messages, Heartbeats: x.heartbeats,
		EndOfSession: x.endSent, Lines: map[string]any{}}
	for i, l := range r.lines {
		sum.Lines[[]string{"a", "b"}[i]] = l.stats
	}
	if r.capture != nil {
		st := r.capture.Stats()
		sum.Capture = &st
	}
	if r.srv != nil {
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.linger):
		}
		st := r.srv.Close()
		r.srv = nil
		sum.Rerequest = &st
	}
	if runErr != nil {
		sum.Error = runErr.Error()
	}
	return sum
}

// close releases what open opened.
func (r *replay) close() {
	if r.srv != nil {
		r.srv.Close()
	}
	for _, s := range r.senders {
		s.Close()
	}
	if r.file != nil {
		r.file.Close()
	}
}
