// Package subapp is the reference subscriber program: it joins a feed's
// channels, optionally verifies every message against the synthetic feed's
// definition, prints messages or a live summary, and ends with one JSON
// summary line. cmd/subscriber runs it from its settings; the feed handler's
// --demo mode runs it in process.
package subapp

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/verify"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/tracing"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seal"
	"github.com/tickcast/tickcast/seal/natskeys"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/faults"
	"github.com/tickcast/tickcast/ud/natslive"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/shm"
	"github.com/tickcast/tickcast/ud/udp"
	"golang.org/x/term"
)

// Settings are the subscriber's settings.
type Settings struct {
	Channels        int           `flag:"channels" default:"4" help:"the feed's number of channels (as the feed handler's --channels)"`
	JoinChannels    []string      `flag:"join-channels" default:"" help:"channels to join, comma separated (default: all)"`
	Symbols         []string      `flag:"symbols" default:"" help:"receive only these symbols, comma separated: join the channels carrying them and hand only their messages on (the others count as filtered)"`
	Group           string        `flag:"group" default:"239.77.0.1:31001" help:"A-line group of channel 0, as the feed handler's"`
	GroupB          string        `flag:"group-b" default:"" help:"B-line group of channel 0 (empty: A line only)"`
	Transport       string        `flag:"transport" default:"udp" help:"udp (multicast), rdma (RDMA UD multicast; a binary built with -tags rdma, --iface the RDMA netdev's address) nats (the feed handler's live NATS subjects, for hosts without multicast) or shm (the shared-memory rings of a feed handler on this host started with --shm, in --shm-dir)"`
	SHMDir          string        `flag:"shm-dir" default:"/dev/shm" help:"with --transport shm, the directory of the feed handler's ring files (its --shm-dir)"`
	Iface           string        `flag:"iface" default:"127.0.0.1" help:"IPv4 address of the interface to join on"`
	ListDevices     bool          `flag:"list-devices" help:"print this host's RDMA devices (ports and their state, link layer, netdevs, NUMA node, whether port counters exist) and the device --iface leads to, then exit 0; built into every binary, with or without -tags rdma"`
	Mode            string        `flag:"mode" default:"auto" help:"receive mode (udp, rdma and shm; see docs/operations.md): auto (direct with udp and shm, blocking with rdma or with --conflate), direct (the handler's goroutine waits in one epoll_wait over every line's socket, with rdma every line's completion channel, with shm one futex_waitv over every channel's ring, and receives itself; no hand-off between threads), direct-spin (the same goroutine polls every socket or completion queue in turn, one core for the whole subscriber), blocking (a receive thread per line sleeps in the kernel and wakes the handler) or busy-poll (a receive thread per line spins, one core each)"`
	SpinWait        time.Duration `flag:"spin-wait" default:"0s" help:"with --mode direct or blocking, keep polling this long after the last message before sleeping (spin, then wait): messages closer together than this are taken without a wake-up, for a core kept busy meanwhile; best with --transport shm, where a poll is a memory read (0: sleep at once; at most 1s)"`
	CPU             int           `flag:"cpu" default:"-1" help:"pin busy-poll receive threads to this CPU (-1: no pinning)"`
	RcvBuf          int           `flag:"rcvbuf" default:"0" help:"socket receive buffer to request in bytes (0: as large as allowed)"`
	RingSlots       int           `flag:"ring-slots" default:"8192" help:"receive ring slots per line (power of two)"`
	MaxDatagram     int           `flag:"max-datagram" default:"1472" help:"largest datagram in bytes, as the feed handler's"`
	GRO             bool          `flag:"gro" help:"with udp, ask the kernel for UDP GRO: a feed handler's --gso runs then arrive as one buffer each, which the subscriber cuts into its packets, and the kernel's work per packet on both hosts mostly goes (docs/bench.md, \"UDP GRO\"); packets from a feed handler without --gso arrive as before, each with one more copy. A kernel without UDP GRO (before Linux 5.0) receives as without it"`
	Format          string        `flag:"format" default:"auto" help:"output: auto (summary on a terminal, else none), summary (live one-screen view), text or json (one line per message), none"`
	Verify          bool          `flag:"verify" help:"check every message against the synthetic feed made with --seed, --instruments and --channels"`
	Seed            uint64        `flag:"seed" default:"1" help:"synthetic feed seed, for --verify"`
	Instruments     int           `flag:"instruments" default:"100" help:"synthetic instruments, for --verify"`
	Expect          uint64        `flag:"expect" default:"0" help:"exit once this many messages arrived (with --conflate: received or conflated); fewer at exit is a failure (0: no expectation)"`
	IdleTimeout     time.Duration `flag:"idle-timeout" default:"5s" help:"exit after this long without a packet"`
	Window          int           `flag:"window" default:"131072" help:"messages that can wait out of order per channel (power of two); memory is about 80 bytes each"`
	GapDelay        time.Duration `flag:"gap-delay" default:"50us" help:"how long a gap waits for a late packet (or the other line's copy) before it is requested from recovery"`
	LostAfter       time.Duration `flag:"lost-after" default:"0s" help:"how long a gap may stay unfilled before it is reported lost (0: 10ms without recovery, 5s with)"`
	StaleAfter      time.Duration `flag:"stale-after" default:"300ms" help:"silence (not even a heartbeat) after which a channel is reported stale"`
	ReplayFrom      string        `flag:"replay-from" default:"" help:"replay the feed's archive (feedhandler --archive) instead of joining the groups: from an RFC 3339 time (the first record stored at or after it), SESSION:SEQ (the packet holding that message) or start; the packets go through the same path as live ones (gap accounting, --symbols, --verify), sealed ones opened with the archive's key records; recovery is off during a replay that ends (see --replay-to live)"`
	ReplayTo        string        `flag:"replay-to" default:"" help:"with --replay-from, end at this time or SESSION:SEQ; live: replay up to the live stream and then take the live multicast, with no gap and no duplicate at the switch (recovery and authentication as for a live subscriber); empty: the last record stored when the replay starts"`
	ReplayFile      string        `flag:"replay-file" default:"" help:"with --replay-from, replay this archive file (tickarchive export --format archive) instead of the archive in JetStream: no NATS server is needed or contacted; a time in --replay-from or --replay-to is compared with the times the packets were recorded, as the file keeps no stored times"`
	ReplaySpeed     string        `flag:"replay-speed" default:"max" help:"with --replay-from: max (as fast as the subscriber takes the packets), recorded (at the pace they were recorded) or a factor such as 10x"`
	Recovery        bool          `flag:"recovery" default:"true" help:"recover gaps over NATS from the feed handler (--recovery=false: report them lost after --lost-after)"`
	NATSURL         string        `flag:"nats-url" default:"nats://127.0.0.1:4222" help:"NATS server the feed handler serves recovery on"`
	FeedName        string        `flag:"feed-name" default:"tickcast" help:"feed name in the NATS subjects, as the feed handler's"`
	RecoveryTimeout time.Duration `flag:"recovery-timeout" default:"2s" help:"longest wait for one recovery reply"`
	Auth            bool          `flag:"auth" default:"true" help:"open every data packet's seal with the channel's keys, fetched over NATS from the feed handler (tickcast.FEED.keys.CH), and drop what does not verify (docs/security.md); --auth=false takes packets unverified, for a feed handler run with --auth=false"`
	KeyTimeout      time.Duration `flag:"key-timeout" default:"2s" help:"longest wait for one key reply; at start, a channel whose keys do not come in time is fetched again in the background, and its first packets wait for them in the ring (at most 2s)"`
	// Shared losses (docs/recovery.md, "Recovery without storms").
	RecoveryBackoff time.Duration `flag:"recovery-backoff" default:"100ms" help:"bound of the random wait before a missing range is asked for while this subscriber's losses are shared with others: the wait adapts from 1ms so that about one request repeats the first per shared loss, and a repair heard during it answers the range without a request; a subscriber that has seen no shared loss in 10s asks at once (negative: never wait)"`
	RecoveryInline  bool          `flag:"recovery-inline" help:"take every recovery answer on the request's own reply subject and do not listen to the feed's repair subjects: for NATS users who may not subscribe to tickcast.FEED.repair.> (each request then costs the feed handler an answer of its own)"`
	natsconn.Flags
	LogFormat   string `flag:"log-format" default:"auto" help:"auto (console on a terminal, else json), console or json"`
	LogLevel    string `flag:"log-level" default:"info" help:"debug, info, warn or error"`
	MetricsAddr string `flag:"metrics-addr" default:"127.0.0.1:9465" help:"serve Prometheus metrics on http://ADDR/metrics (empty: no metrics; port 0: a free port); left at this default, a port in use moves on to the next free one of 9465..9564, so several subscribers run on one host; an address given explicitly must be free"`
	LatencyOut  string `flag:"latency-out" default:"" help:"at exit, write the send-to-release latency histogram to this file as an HdrHistogram percentile distribution (.hgrm, microseconds)"`
	Trace       string `flag:"trace" default:"" help:"write a Go execution trace (runtime/trace) of the run to this file, for finding stalls: go tool trace FILE (it costs some latency while on)"`
	CPUProfile  string `flag:"cpuprofile" default:"" help:"write a CPU profile (runtime/pprof) of the run to this file, for finding where the time per message goes: go tool pprof FILE"`

	// Several subscribers per host: docs/operations.md, "Several subscribers on one host".
	MetricsSDDir string `flag:"metrics-sd-dir" default:"" help:"register the metrics address for Prometheus's file-based service discovery (file_sd_configs): write DIR/subscriber-HOST-PORT.json, an existing directory, and remove it at exit (empty: no file)"`
	// Conflation (docs/slow-consumers.md).
	Conflate          bool `flag:"conflate" help:"while a channel is behind (its backlog above --conflate-threshold), deliver each instrument's latest quote instead of every quote (and each price level's latest state instead of every level delta); trades, busts, status changes and definitions are never conflated. Superseded messages count as conflated, not missing"`
	ConflateThreshold int  `flag:"conflate-threshold" default:"128" help:"backlog in messages past which --conflate conflates a channel's quotes: messages released since the channel's rings and sockets were last found empty"`
	ConflateInterval  int  `flag:"conflate-interval" default:"1024" help:"while --conflate conflates a channel, deliver its held quotes every this many messages of the backlog (and all of them once it has caught up)"`

	// Fault injection: a test facility (package ud/faults), off unless set.
	InjectLoss     float64 `flag:"inject-loss" help:"test facility: drop each received datagram with this probability (0..1), on every line, before the subscriber sees it"`
	InjectBurst    float64 `flag:"inject-burst" help:"test facility: probability (0..1) that an --inject-loss drop starts a burst that drops --inject-burst-len datagrams in a row"`
	InjectBurstLen int     `flag:"inject-burst-len" default:"10" help:"test facility: datagrams dropped per burst, counting the one that starts it"`
	InjectDup      float64 `flag:"inject-dup" help:"test facility: deliver each received datagram twice with this probability (0..1)"`
	InjectReorder  float64 `flag:"inject-reorder" help:"test facility: swap each received datagram with the next one with this probability (0..1), when the next has already arrived"`
	SilenceLine    string  `flag:"silence-line" help:"test facility: drop every datagram of one line on every joined channel: LINE[:AFTER[+FOR]], LINE is A or B; AFTER and FOR are durations from the line's first datagram: A = all of line A, B:1s = line B from 1s on, B:1s+2s = line B from 1s for 2s, A:+3s = the first 3s of line A"`
	InjectSeed     uint64  `flag:"inject-seed" default:"1" help:"test facility: seed of the injected faults (each channel and line derives its own from it)"`

	Origins cliconf.Origins // filled by cliconf.Load: the settings given explicitly (an explicit --metrics-addr never moves to another port)
	// HandlerDelay makes the handler slow (a test facility).
	HandlerDelay time.Duration `flag:"handler-delay" help:"test facility: the handler spends this long on every message (a busy wait), to show a consumer slower than the feed"`
}

// App is one subscriber run.
type App struct {
	s   Settings
	log zerolog.Logger
	out io.Writer
	sub *tickcast.Subscriber
	h   *handler
	inj []*faults.Receiver // fault-injecting receivers (test facility), if any
	nc  *nats.Conn
	rec *recovery.Client
	met *appMetrics
	// keys are the channels' seal keys (--auth); joined, the channels.
	keys   *natskeys.Fetcher
	joined []int
	// refused are the channels whose keys were refused after start
	// (an entitlement withdrawn), under refusedMu.
	refusedMu sync.Mutex
	refused   []int
	// replayCfg is the replay (--replay-from), or nil; replay, its
	// receivers.
	replayCfg *archive.ReplayConfig
	replay    replays
}

// New validates the settings and joins the groups. Its errors are
// *cliconf.Error for bad settings.
func New(s Settings, log zerolog.Logger, out io.Writer) (*App, error) {
	p, err := s.plan(out)
	if err != nil {
		return nil, err
	}
	lib := s.libConfigs(p)
	if s.Mode == "auto" || s.Mode == "" {
		s.Mode = p.mode.String()
	}
	a := &App{s: s, log: log, out: out, met: newAppMetrics(), replayCfg: p.replay}
	a.h = &handler{app: a, v: p.verifier, w: bufio.NewWriterSize(out, 64<<10)}
	if p.verifier != nil && s.Conflate {
		p.verifier.AcceptConflated()
		a.h.last = newLastQuotes(s.Channels, s.Instruments)
	}
	if s.HandlerDelay > 0 {
		log.Warn().Dur("handler_delay", s.HandlerDelay).Msg("handler delay on (test facility)")
	}
	if p.backoff {
		log.Warn().Int("spinning_threads", p.spinners).Int("cpus", runtime.NumCPU()).Str("mode", p.mode.String()).
			Msg("more spinning receive threads than this host can spare a core for: they back off (sleep ~50us) when idle; use --mode direct or fewer channels for the lowest latency")
	}
	if s.Transport == "rdma" {
		a.met.rdma = RDMADevice(log, s.Iface, p.mode == ud.BusyPoll, s.CPU,
			"receive threads are not pinned in blocking mode: --mode busy-poll pins them to these CPUs, or run the subscriber on them (taskset -c)")
	}
	recv := a.receivers(lib)
	if p.replay != nil {
		if p.replay.Follow {
			recv = a.mergeReceivers(*p.replay, recv)
		} else {
			recv = a.replayReceivers(*p.replay)
		}
		lib.Subscriber.Tracker.StartWhereMet = true
	}
	newReceiver, err := a.injectFaults(recv, p.groupB)
	if err != nil {
		return nil, err
	}
	a.joined = slices.Clone(lib.Subscriber.Join)
	if len(a.joined) == 0 && len(s.Symbols) > 0 {
		a.joined, _ = tickcast.ChannelsOf(s.Symbols, s.Channels) // checked by validate
	}
	if len(a.joined) == 0 {
		for ch := range s.Channels {
			a.joined = append(a.joined, ch)
		}
	}
	slices.Sort(a.joined)
	a.joined = slices.Compact(a.joined)
	if err := a.connect(lib.Recovery); err != nil {
		return nil, err
	}
	sc := lib.Subscriber
	sc.NewReceiver, sc.Recovery, sc.Observer = newReceiver, a.rec, a.met
	switch {
	case p.replay != nil && p.replay.Follow:
		log.Info().Str("from", p.replay.From.String()).Float64("speed", p.replay.Speed).
			Msg("replaying the archive, then joining the live stream where the replay meets it")
		if a.keys != nil {
			sc.Keys = a.keys // the live packets'; the replay opens its own
		}
	case p.replay != nil:
		log.Info().Str("from", p.replay.From.String()).Str("to", p.replay.To.String()).Float64("speed", p.replay.Speed).Str("file", p.replay.File).
			Msg("replaying the archive: sealed packets are opened with the archive's key records; recovery is off")
	case a.keys != nil:
		sc.Keys = a.keys
	default:
		log.Warn().Msg("authentication off (--auth=false): packets are taken unverified; anyone who can send to the groups can forge them")
	}
	if a.sub, err = tickcast.NewSubscriber(sc); err != nil {
		a.closeRecovery()
		return nil, err
	}
	if err := a.met.serve(&s, a.sub, log); err != nil {
		a.sub.Close()
		a.closeRecovery()
		return nil, err
	}
	if a.met.srv != nil {
		a.met.srv.SetHealth(a.health)
	}
	st := a.sub.ReceiverStats(0, tickcast.LineA)
	log.Info().Ints("channels", a.sub.Channels()).Str("group", s.Group).Str("group_b", s.GroupB).
		Str("transport", s.Transport).Str("mode", s.Mode).Int("rcvbuf_granted", st.RcvBuf).Bool("verify", s.Verify).Msg("subscribed")
	return a, nil
}

// plan is what New makes of the settings before it opens anything.
type plan struct {
	group, groupB netip.AddrPort
	iface         netip.Addr
	mode          ud.Mode // the receive mode of the settings' transport
	join          []int   // nil: every channel
	verifier      *verify.Verifier
	replay        *archive.ReplayConfig // --replay-from, or nil
	spinners      int                   // spinning receive threads
	backoff       bool                  // they back off when idle
}

// plan checks the settings and makes the plan New follows. It resolves the
// automatic values in s: Transport, Format and LostAfter (Mode stays as
// given: libConfigs resolves it for each transport). Its errors are
// *cliconf.Error.
func (s *Settings) plan(out io.Writer) (plan, error) {
	var p plan
	var err error
	if p.group, p.groupB, err = s.groups(); err != nil {
		return p, err
	}
	if p.iface, err = netip.ParseAddr(s.Iface); err != nil || !p.iface.Is4() {
		return p, cliconf.Invalid("iface", "%q is not an IPv4 address", s.Iface)
	}
	if p.mode, err = s.receiveMode(s.Transport); err != nil {
		return p, cliconf.Invalid("mode", "%v (or auto)", err)
	}
	if err := s.resolveFormat(out); err != nil {
		return p, err
	}
	if p.replay, err = s.replayPlan(); err != nil {
		return p, err
	}
	if p.replay != nil {
		// The replay receivers hand packets over through their rings,
		// with no socket to wait on. A replay that ends has nothing to
		// recover from and no keys to fetch: the archive holds them. One
		// that joins the live stream recovers and authenticates as a
		// live subscriber does.
		p.mode = ud.Blocking
		if !p.replay.Follow {
			s.Recovery, s.Auth = false, false
		}
	}
	if err := s.checkLimits(); err != nil {
		return p, err
	}
	if p.join, err = s.joinChannels(); err != nil {
		return p, err
	}
	if err := s.checkMetrics(); err != nil {
		return p, err
	}
	if s.Verify {
		if p.verifier, err = verify.New(feed.SyntheticConfig{Seed: s.Seed, Instruments: s.Instruments, Channels: s.Channels}); err != nil {
			return p, cliconf.Invalid("instruments", "%v", err)
		}
	}
	// Spinning threads in this process: one per line in busy-poll, one in
	// all in direct-spin. With no core left over for anything else (the
	// feed handler on the same host, the kernel's network work) they back
	// off: a short kernel sleep after a run of empty polls.
	switch p.mode {
	case ud.BusyPoll:
		p.spinners = s.Channels
		if len(p.join) > 0 {
			p.spinners = len(p.join)
		}
		if p.groupB.IsValid() {
			p.spinners *= 2
		}
	case ud.DirectSpin:
		p.spinners = 1
	}
	p.backoff = s.Transport != "nats" && p.spinners > 0 && p.spinners >= runtime.NumCPU()
	return p, nil
}

// groups parses --group and --group-b and checks --transport against them
// (an empty one means udp).
func (s *Settings) groups() (group, groupB netip.AddrPort, err error) {
	if group, err = tickcast.ParseGroup(s.Group); err != nil {
		return group, groupB, cliconf.Invalid("group", "%v", err)
	}
	if s.GroupB != "" {
		if groupB, err = tickcast.ParseGroup(s.GroupB); err != nil {
			return group, groupB, cliconf.Invalid("group-b", "%v", err)
		}
	}
	switch s.Transport {
	case "", "udp":
		s.Transport = "udp"
	case "nats":
		if groupB.IsValid() {
			return group, groupB, cliconf.Invalid("group-b", "%q: a B line is multicast only; --transport nats takes each channel from its one live NATS subject", s.GroupB)
		}
	case "rdma":
		if !rdma.Available {
			return group, groupB, cliconf.Invalid("transport", "%v", rdma.ErrNotBuilt)
		}
	case "shm":
		if groupB.IsValid() {
			return group, groupB, cliconf.Invalid("group-b", "%q: a shared-memory ring is one copy of line A; --transport shm has no B line", s.GroupB)
		}
	default:
		return group, groupB, cliconf.Invalid("transport", "%q: want udp, rdma, nats or shm", s.Transport)
	}
	return group, groupB, nil
}

// receiveMode is the receive mode --mode names for transport. Auto is the
// fastest mode that sleeps when idle (docs/bench.md). With the rdma
// transport it stays blocking until a real NIC says otherwise: in the
// Soft-RoCE VM direct mode cut the receive-to-release stage's p50 from 127
// to 13 us, but end-to-end latency was the same (docs/operations.md).
func (s *Settings) receiveMode(transport string) (ud.Mode, error) {
	if s.Mode != "auto" && s.Mode != "" {
		return ud.ParseMode(s.Mode)
	}
	if transport == "rdma" {
		return ud.Blocking, nil
	}
	if s.Conflate {
		// A conflating subscriber expects a handler slower than the feed.
		// In direct mode the handler's goroutine also reads the sockets,
		// so while it is busy the kernel's buffers overflow and conflation
		// comes too late; receive threads keep draining the sockets into
		// the rings, where the backlog is conflated.
		return ud.Blocking, nil
	}
	return ud.Direct, nil
}

// resolveFormat checks --format and resolves auto: the live summary on a
// terminal, else none.
func (s *Settings) resolveFormat(out io.Writer) error {
	switch s.Format {
	case "auto":
		s.Format = "none"
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			s.Format = "summary"
		}
	case "summary", "text", "json", "none":
	default:
		return cliconf.Invalid("format", "%q: want auto, summary, text, json or none", s.Format)
	}
	return nil
}

// --lost-after 0 takes one of these: with recovery a gap may wait for the
// recovery round trip and its retries; without, only a late packet can
// still close it.
const (
	lostAfterRecovery   = 5 * time.Second
	lostAfterNoRecovery = 10 * time.Millisecond
)

// checkLimits checks the numeric settings and the feed name, and resolves
// --lost-after 0.
func (s *Settings) checkLimits() error {
	if s.Channels < 1 || s.Channels > config.MaxChannels {
		return cliconf.Invalid("channels", "%d: want 1..%d", s.Channels, config.MaxChannels)
	}
	if s.Window < 2 || s.Window&(s.Window-1) != 0 || s.Window > seqgap.MaxWindow {
		return cliconf.Invalid("window", "%d: want a power of two in 2..%d", s.Window, seqgap.MaxWindow)
	}
	if s.GapDelay < 0 {
		return cliconf.Invalid("gap-delay", "%v: must not be negative", s.GapDelay)
	}
	if s.LostAfter < 0 {
		return cliconf.Invalid("lost-after", "%v: must not be negative", s.LostAfter)
	}
	if s.LostAfter == 0 {
		s.LostAfter = lostAfterNoRecovery
		if s.Recovery {
			s.LostAfter = lostAfterRecovery
		}
	}
	if s.RecoveryTimeout <= 0 {
		return cliconf.Invalid("recovery-timeout", "%v: must be positive", s.RecoveryTimeout)
	}
	if s.SpinWait < 0 || s.SpinWait > time.Second {
		return cliconf.Invalid("spin-wait", "%v: want 0..1s", s.SpinWait)
	}
	if s.RecoveryBackoff > time.Second {
		return cliconf.Invalid("recovery-backoff", "%v: want at most 1s (negative: never wait)", s.RecoveryBackoff)
	}
	if err := recovery.ValidateFeed(s.FeedName); err != nil {
		return cliconf.Invalid("feed-name", "%v", err)
	}
	if s.StaleAfter <= 0 {
		return cliconf.Invalid("stale-after", "%v: must be positive", s.StaleAfter)
	}
	if s.IdleTimeout <= 0 {
		return cliconf.Invalid("idle-timeout", "%v: must be positive", s.IdleTimeout)
	}
	if s.ConflateThreshold < 1 {
		return cliconf.Invalid("conflate-threshold", "%d: must be positive", s.ConflateThreshold)
	}
	if s.ConflateInterval < 1 {
		return cliconf.Invalid("conflate-interval", "%d: must be positive", s.ConflateInterval)
	}
	if s.HandlerDelay < 0 {
		return cliconf.Invalid("handler-delay", "%v: must not be negative", s.HandlerDelay)
	}
	return nil
}

// joinChannels returns the channels --join-channels and --symbols name,
// nil for every channel.
func (s *Settings) joinChannels() ([]int, error) {
	var join []int
	for _, c := range s.JoinChannels {
		ch, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || ch < 0 || ch >= s.Channels {
			return nil, cliconf.Invalid("join-channels", "%q: want channel numbers 0..%d", c, s.Channels-1)
		}
		join = append(join, ch)
	}
	if len(s.Symbols) > 0 {
		chs, err := tickcast.ChannelsOf(s.Symbols, s.Channels)
		if err != nil {
			return nil, cliconf.Invalid("symbols", "%v", err)
		}
		join = append(join, chs...)
	}
	return join, nil
}

// libConfigs are the library configurations the settings make: the
// subscriber's with its tracker's (without the hooks New adds: receivers,
// recovery client, observer), the recovery client's, each transport's
// (whichever the settings pick) and the fault injection's (without its
// per-receiver seed). TestFlagDefaults holds them to the libraries'
// defaults, but for the overrides flagOverrides lists.
type libConfigs struct {
	Subscriber tickcast.SubscriberConfig
	Recovery   recovery.ClientConfig
	UDP        udp.Config
	RDMA       rdma.Config
	NATSLive   natslive.Config
	SHM        shm.Config
	Faults     faults.Config
}

// flagOverrides are the library configuration fields, as
// "package.Struct.Field", that a flag sets to another default than the
// library's, with the reason. TestFlagDefaults holds every other flag
// default equal to the library default of the field it sets.
var flagOverrides = map[string]string{
	"seqgap.Config.GapDelay": "--gap-delay 50us: a gap waits that long for the B line's copy or a late packet before it costs a recovery round trip; " +
		"the library requests at the next Tick and leaves any wait to its caller",
	"seqgap.Config.LostAfter": "--lost-after 0 means 5s with recovery (the round trip and its retries) and 10ms without (only a late packet can still close a gap); " +
		"the library's 1s suits neither",
	"udp.Config.Mode": "--mode auto receives udp in direct mode, the fastest that sleeps when idle (docs/bench.md); " +
		"the library's zero value is blocking, which works without a Notifier",
	"udp.Config.CPU":  "--cpu -1 pins nothing unless asked; the library's zero value pins a busy-poll thread to CPU 0",
	"rdma.Config.CPU": "--cpu -1 pins nothing unless asked; the library's zero value pins a busy-poll thread to CPU 0",
	"udp.Config.RingSlots": "--ring-slots 8192: the program's handler may print or verify every message, so its rings ride out longer stalls than the library's default; " +
		"one flag sizes every transport's ring",
	"rdma.Config.RingSlots":     "--ring-slots 8192, as for udp: one flag sizes every transport's ring",
	"natslive.Config.RingSlots": "--ring-slots 8192, as for udp: one flag sizes every transport's ring",
	"shm.Config.RingSlots":      "--ring-slots 8192, as for udp: one flag sizes every transport's ring",
	"shm.Config.Feed":           "--feed-name names the feed handler's rings (tickcast-FEED-CH); the library requires it of the hooks and has no default",
	"shm.Config.CPU":            "--cpu -1 pins nothing unless asked; the library's zero value pins a busy-poll thread to CPU 0",
	"shm.Config.Mode":           "--mode auto follows the ring in direct mode, as udp: the consumer's goroutine copies from the ring, and sleeps on the ring's futex when idle",
	"natslive.Config.MaxDatagram": "--max-datagram 1472 is the feed handler's default, and one flag sizes every transport's slots; " +
		"natslive's 9000 is for a caller that does not know the publisher's datagram size",
}

// libConfigs returns the library configurations of settings that plan
// checked and resolved into p. Each transport's receive mode is resolved
// for that transport.
func (s *Settings) libConfigs(p plan) libConfigs {
	udpMode, _ := s.receiveMode("udp") // plan checked that --mode parses
	rdmaMode, _ := s.receiveMode("rdma")
	shmMode, _ := s.receiveMode("shm")
	return libConfigs{
		Subscriber: tickcast.SubscriberConfig{
			Channels: s.Channels, Join: p.join, Symbols: s.Symbols, GroupA: p.group, GroupB: p.groupB,
			Spin:     p.mode == ud.DirectSpin && s.Transport != "nats",
			SpinWait: s.SpinWait,
			Backoff:  p.backoff,
			Tracker:  seqgap.Config{Window: s.Window, GapDelay: s.GapDelay, LostAfter: s.LostAfter, StaleAfter: s.StaleAfter},
			Conflate: tickcast.ConflateConfig{On: s.Conflate, Threshold: s.ConflateThreshold, Interval: s.ConflateInterval},
		},
		Recovery: recovery.ClientConfig{Feed: s.FeedName, Timeout: s.RecoveryTimeout, RepairBackoff: s.RecoveryBackoff, InlineOnly: s.RecoveryInline},
		UDP: udp.Config{Interface: p.iface, MaxDatagram: s.MaxDatagram, RcvBuf: s.RcvBuf,
			RingSlots: s.RingSlots, Mode: udpMode, CPU: s.CPU, Backoff: p.backoff, GRO: s.GRO},
		RDMA:     rdma.Config{Interface: p.iface, RingSlots: s.RingSlots, Mode: rdmaMode, CPU: s.CPU},
		NATSLive: natslive.Config{RingSlots: s.RingSlots, MaxDatagram: s.MaxDatagram},
		SHM: shm.Config{Dir: s.SHMDir, Feed: s.FeedName, RingSlots: s.RingSlots, MaxDatagram: s.MaxDatagram, Mode: shmMode,
			CPU: s.CPU, Backoff: p.backoff},
		Faults: s.faultsConfig(),
	}
}

// faultsConfig is the fault injection the --inject-* settings ask for, on
// every line, without the silence, the seed and the message count.
func (s *Settings) faultsConfig() faults.Config {
	return faults.Config{Loss: s.InjectLoss, Burst: s.InjectBurst, BurstLen: s.InjectBurstLen,
		Dup: s.InjectDup, Reorder: s.InjectReorder}
}

// receivers returns the receiver factory of the settings' transport.
func (a *App) receivers(lib libConfigs) ud.NewReceiverFunc {
	switch a.s.Transport {
	case "nats":
		return a.natsReceivers(lib.NATSLive) // uses a.nc, which connect connects
	case "rdma":
		// The transport's event lines (rdma event ...) go to this log,
		// in its format.
		cfg := lib.RDMA
		cfg.Logger = slog.New(zerolog.NewSlogHandler(a.log))
		return rdma.Receivers(cfg)
	case "shm":
		return shm.Receivers(lib.SHM)
	}
	return udp.Receivers(lib.UDP)
}

// connect connects to NATS when recovery or --transport nats needs it, and
// starts the recovery client if recovery is on.
func (a *App) connect(cfg recovery.ClientConfig) error {
	s := &a.s
	if !s.Recovery && s.Transport != "nats" && !s.Auth && (a.replayCfg == nil || a.replayCfg.File != "") {
		return nil // a replay of a file needs no NATS
	}
	inbox := ""
	if s.User != "" {
		// A subscriber user's replies may only come to its own prefix.
		inbox = natsconn.UserInboxPrefix(s.User)
	}
	var err error
	cc := s.Flags.ConnConfig(s.NATSURL, "subscriber", inbox)
	a.met.nats = natsconn.NewMetrics()
	cc.Metrics = a.met.nats
	a.nc, err = natsconn.Connect(cc, func(event string, err error) {
		e := a.log.Warn()
		if natsconn.Routine(event, err) {
			e = a.log.Info()
		}
		e.Str("event", event).Err(err).Msg("nats")
	})
	if err != nil {
		return err
	}
	if s.Auth {
		if err := a.fetchKeys(); err != nil {
			a.nc.Close()
			return err
		}
	} else if a.nc.IsConnected() && a.replayCfg == nil {
		// Unverified packets of an encrypted channel would be read as
		// messages: refuse them (a feed handler started later cannot be
		// asked; docs/security.md).
		if enc, _ := natskeys.Encrypted(a.nc, s.FeedName, a.joined, 500*time.Millisecond); len(enc) > 0 {
			a.nc.Close()
			return fmt.Errorf("channels %v are encrypted (feedhandler --encrypt): a subscriber with --auth=false cannot read them; run it with authentication on", enc)
		}
	}
	if !s.Recovery {
		return nil // connected for the live subjects or the keys only
	}
	cfg.Channels = a.joined // the repair subjects of the joined channels only
	if a.keys != nil {
		// Retransmissions, repairs and snapshots are sealed as the data
		// packets are.
		cfg.Open = func(ch int, p []byte) ([]byte, error) {
			ks := a.keys.Keys(ch)
			if ks == nil {
				return nil, errors.New("no keys yet")
			}
			out, err := ks.Open(p)
			var se *seal.Error
			if errors.As(err, &se) && (se.Err == seal.ErrUnknownEpoch || !ks.HasSession(se.Session)) {
				a.keys.Miss(ch, se.Session)
			}
			return out, err
		}
	}
	if a.rec, err = recovery.NewClient(a.nc, cfg); err != nil {
		a.closeRecovery()
		return err
	}
	return nil
}

// fetchKeys fetches the joined channels' keys and keeps them fresh. Keys
// that do not come (no feed handler yet) are fetched in the background; a
// refusal fails.
func (a *App) fetchKeys() error {
	s := &a.s
	user := cmp.Or(s.User, "(none)")
	f, err := natskeys.NewFetcher(a.nc, s.FeedName, s.Channels, a.joined, s.KeyTimeout)
	if f == nil {
		why := ""
		if len(s.Symbols) > 0 && len(s.JoinChannels) == 0 {
			why = fmt.Sprintf("; --symbols are on channels %v", a.joined)
		}
		return fmt.Errorf("keys: %w (NATS server %s, user %s%s)", err, a.nc.ConnectedUrlRedacted(), user, why)
	}
	a.keys = f
	f.OnRefused(func(ch int, err error) {
		a.refusedMu.Lock()
		if !slices.Contains(a.refused, ch) {
			a.refused = append(a.refused, ch)
			slices.Sort(a.refused)
		}
		a.refusedMu.Unlock()
		a.log.Error().Err(err).Int("channel", ch).Str("nats_url", a.nc.ConnectedUrlRedacted()).Str("user", user).
			Msg("keys refused: the channel's packets no longer open once the keys held run out (the next rotation), and count as unauthenticated; asked again every 5s")
	})
	if err != nil {
		a.log.Warn().Err(err).Str("nats_url", a.nc.ConnectedUrlRedacted()).Str("user", user).
			Msg("no keys yet: fetching them in the background; a channel's first packets wait for its keys (at most 2s), and what comes under a key not held is dropped (no_key) and recovered; a feed handler run with --auth=false serves no keys: then run this subscriber with --auth=false too")
	}
	return nil
}

func (a *App) closeRecovery() {
	if a.rec != nil {
		a.rec.Close()
	}
	if a.keys != nil {
		a.keys.Close()
	}
	if a.nc != nil {
		a.nc.Close()
	}
}

// Summary is the line printed at exit.
type Summary struct {
	Role     string `json:"role"`
	Channels []int  `json:"channels"`
	Received uint64 `json:"received"`
	Filtered uint64 `json:"filtered"`
	// SymbolsNotFound are the --symbols that no instrument definition on
	// the joined channels named: the feed does not carry them (or their
	// definitions never arrived), so nothing of them was received.
	SymbolsNotFound   []string `json:"symbols_not_found,omitempty"`
	Expected          uint64   `json:"expected,omitempty"`
	Packets           uint64   `json:"packets"`
	Gaps              uint64   `json:"gaps"`
	Missing           uint64   `json:"missing"`
	Conflated         uint64   `json:"conflated"`
	LostRanges        uint64   `json:"lost_ranges"`
	Recovered         uint64   `json:"recovered"`
	RecoveredArchive  uint64   `json:"recovered_archive"`
	RecoveryFailed    uint64   `json:"recovery_failed"`
	RecoveryHeard     uint64   `json:"recovery_heard"`
	RecoveryBackedOff uint64   `json:"recovery_backed_off"`
	// RecoveryUnverified counts retransmission, repair and snapshot parts
	// dropped because their seal did not open (forged, or under a key not
	// held yet: asked for again).
	RecoveryUnverified uint64         `json:"recovery_unverified"`
	Snapshots          uint64         `json:"snapshots"`
	SnapshotMessages   uint64         `json:"snapshot_messages"`
	RecoveryMeanUs     float64        `json:"recovery_mean_us"`
	RecoveryMaxUs      float64        `json:"recovery_max_us"`
	RecoveryP99Us      float64        `json:"recovery_p99_us"`
	Requests           uint64         `json:"requests"`
	Reordered          uint64         `json:"reordered"`
	WindowFull         uint64         `json:"window_full"`
	InstrumentGaps     uint64         `json:"instrument_gaps"`
	Stale              uint64         `json:"stale"`
	PacketsA           uint64         `json:"packets_a"`
	PacketsB           uint64         `json:"packets_b"`
	Duplicates         uint64         `json:"duplicates"`
	DuplicatePackets   uint64         `json:"duplicate_packets"`
	Foreign            uint64         `json:"foreign"`
	Competing          uint64         `json:"competing"`
	Unvetted           uint64         `json:"unvetted"`
	Malformed          uint64         `json:"malformed"`
	Unauthenticated    uint64         `json:"unauthenticated"`
	NoKey              uint64         `json:"no_key"`
	KernelDrops        uint64         `json:"kernel_drops"`
	RingFull           uint64         `json:"ring_full"`
	Coalesced          uint64         `json:"coalesced"`
	Replay             *ReplaySummary `json:"replay,omitempty"`
	Sessions           uint64         `json:"sessions"`
	SessionsEnded      uint64         `json:"sessions_ended"`
	SessionsAbrupt     uint64         `json:"sessions_abrupt"`
	WinsA              uint64         `json:"wins_a"`
	WinsB              uint64         `json:"wins_b"`
	Verify             bool           `json:"verify"`
	VerifyOK           bool           `json:"verify_ok"`
	VerifyErrors       uint64         `json:"verify_errors"`
	FirstVerifyError   string         `json:"first_verify_error,omitempty"`
	MallocsPerMsg      float64        `json:"mallocs_per_msg"`
	ElapsedS           float64        `json:"elapsed_s"`
	MsgsPerS           float64        `json:"msgs_per_s"`
	RcvBuf             int            `json:"rcvbuf"`
	LatencySummary
	StageSummary
	// KeysRefused are the channels whose keys the feed handler refused
	// after start (the user's entitlement withdrawn): their packets stopped
	// opening at a rotation, and their messages from then on are neither
	// delivered nor counted as missing (nothing verifiable says how many
	// there were), so the run is not ok.
	KeysRefused []int  `json:"keys_refused,omitempty"`
	ExitReason  string `json:"exit_reason"`
	OK          bool   `json:"ok"`

	// Faults injected by --inject-* and --silence-line (test facility),
	// summed over every channel and line.
	InjectedDroppedDatagrams uint64 `json:"injected_dropped_datagrams"`
	InjectedDroppedMessages  uint64 `json:"injected_dropped_messages"`
	InjectedDuplicates       uint64 `json:"injected_duplicates"`
	InjectedReordered        uint64 `json:"injected_reordered"`
	SilencedDatagrams        uint64 `json:"silenced_datagrams"`
	SilencedMessages         uint64 `json:"silenced_messages"`
}

// Run receives until every joined channel ended its session, --expect
// messages arrived, the idle timeout passed or ctx is done; then it prints
// the summary and returns the exit status: 0 when nothing was missing, the
// expectation (if any) was met and verification (if asked) passed; 1
// otherwise.
func (a *App) Run(ctx context.Context) int {
	defer a.closeRecovery()
	defer a.sub.Close()
	defer a.met.close()
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(allocs)
	allocs0 := allocs[0].Value.Uint64()
	stopTrace, err := tracing.StartBoth(a.s.Trace, a.s.CPUProfile)
	if err != nil {
		a.log.Error().Err(err).Msg("--trace")
		return 1
	}
	start := time.Now()
	st := &stopper{a: a, start: start, lastActivity: start, lastScreen: start}
	err = a.sub.Run(ctx, a.h, st.stop)
	if err := stopTrace(); err != nil {
		a.log.Error().Err(err).Msg("--trace")
	}
	reason := st.reason
	if err != nil && reason == "" {
		reason = "signal"
	}
	elapsed := time.Since(start)
	a.h.w.Flush()
	metrics.Read(allocs)
	// Drops after the last datagram received (a lost tail) reach the
	// receive path only with a next datagram: ask the kernel.
	if err := a.sub.SyncKernelDrops(); err != nil {
		a.log.Debug().Err(err).Msg("kernel drop count")
	}
	sum := a.summary(reason, elapsed, allocs[0].Value.Uint64()-allocs0)
	return a.report(sum, elapsed)
}

// stopper decides, at every poll of Run, whether the run is over, and
// redraws the live summary meanwhile.
type stopper struct {
	a                               *App
	start, lastActivity, lastScreen time.Time
	lastPackets                     uint64
	polls                           int
	reason                          string    // why the run ended, once stop returned true
	replayDoneAt                    time.Time // when the replay was first seen done
}

// stop reports whether the run is over: --expect messages arrived, every
// channel ended, or --idle-timeout passed without a packet. Clocks are
// read only every 16th poll once messages flow.
func (r *stopper) stop() bool {
	a, h := r.a, r.a.h
	r.polls++
	if a.s.Expect > 0 && h.received+a.conflated() >= a.s.Expect {
		r.reason = "expect"
		return true
	}
	// A replay goes through session after session, each ended: it ends
	// when the archive has delivered everything.
	if (a.replayCfg == nil || a.replayCfg.Follow) && a.sub.AllEnded() {
		r.reason = "end-of-session"
		return true
	}
	if a.replayCfg != nil && !a.replayCfg.Follow && a.replayDone() {
		// Everything is delivered; a gap still open (a loss record, a
		// corrupt record) is declared lost after --lost-after: wait that
		// long, and a little, for the summary to count it.
		now := time.Now()
		if r.replayDoneAt.IsZero() {
			r.replayDoneAt = now
		}
		if now.Sub(r.replayDoneAt) >= a.s.LostAfter+50*time.Millisecond {
			r.reason = "replay-end"
			return true
		}
	}
	if r.polls&15 != 0 && h.received > 0 {
		return false
	}
	now := time.Now()
	if p := a.sub.Stats().Packets; p != r.lastPackets {
		r.lastPackets, r.lastActivity = p, now
	} else if now.Sub(r.lastActivity) >= a.s.IdleTimeout {
		r.reason = "idle-timeout"
		return true
	}
	if a.s.Format == "summary" && now.Sub(r.lastScreen) >= 500*time.Millisecond {
		r.lastScreen = now
		a.screen(now.Sub(r.start))
	}
	return false
}

// summary returns the summary of a run that ended for reason after
// elapsed, in which allocs heap objects were allocated.
func (a *App) summary(reason string, elapsed time.Duration, allocs uint64) Summary {
	h := a.h
	st := a.sub.Stats()
	sum := Summary{
		Role: "subscriber", Channels: a.sub.Channels(), Received: h.received, Filtered: st.Filtered, Expected: a.s.Expect,
		Packets: st.Packets, Gaps: st.Gaps, Missing: st.Missing, Conflated: st.Conflated, Duplicates: st.Duplicates, DuplicatePackets: st.DuplicatePackets,
		LostRanges: st.LostRanges, Recovered: st.Recovered, Requests: st.Requests, Reordered: st.Reordered, WindowFull: st.WindowFull,
		InstrumentGaps: st.InstrumentGaps, Stale: st.Stale, PacketsA: st.PacketsA, PacketsB: st.PacketsB,
		Foreign: st.Foreign, Competing: st.Competing, Unvetted: st.Unvetted, Malformed: st.Malformed,
		Unauthenticated: st.Unauthenticated, NoKey: st.NoKey, KernelDrops: st.KernelDrops, RingFull: st.RingFull, Coalesced: st.Coalesced, Replay: a.replaySummary(),
		Sessions: st.Sessions, SessionsEnded: st.SessionsEnded, SessionsAbrupt: st.SessionsAbrupt, WinsA: st.WinsA, WinsB: st.WinsB,
		Verify: a.s.Verify, VerifyOK: a.s.Verify && h.verifyErrs == 0 && h.received > 0, VerifyErrors: h.verifyErrs,
		ElapsedS: elapsed.Seconds(), MsgsPerS: float64(h.received) / elapsed.Seconds(),
		RcvBuf: a.sub.ReceiverStats(0, tickcast.LineA).RcvBuf, ExitReason: reason,
	}
	if h.last != nil {
		bad, first := h.checkLastQuotes()
		h.verifyErrs += bad
		if h.firstVerifyErr == nil {
			h.firstVerifyErr = first
		}
		sum.VerifyOK, sum.VerifyErrors = sum.VerifyOK && bad == 0, h.verifyErrs
	}
	if h.firstVerifyErr != nil {
		sum.FirstVerifyError = h.firstVerifyErr.Error()
	}
	sum.Snapshots, sum.SnapshotMessages = st.Snapshots, h.snapshotMsgs
	if a.rec != nil {
		rs := a.rec.Stats()
		sum.RecoveryFailed, sum.RecoveryHeard, sum.RecoveryBackedOff = rs.Failed, rs.Heard, rs.BackedOff
		sum.RecoveryUnverified, sum.RecoveredArchive = rs.Unverified, st.RecoveredArchive
		_, mean, maxLat := a.sub.RecoveryLatency()
		sum.RecoveryMeanUs, sum.RecoveryMaxUs = float64(mean)/1e3, float64(maxLat)/1e3
		sum.RecoveryP99Us = a.met.recoveryP99()
	}
	sum.SymbolsNotFound = a.sub.SymbolCoverage().Unseen
	a.addInjected(&sum)
	sum.LatencySummary = a.met.summary()
	sum.StageSummary = a.met.stages(st.Packets)
	a.met.writeLatency(a.s.LatencyOut, a.log)
	if h.received > 0 {
		sum.MallocsPerMsg = float64(allocs) / float64(h.received)
	}
	a.refusedMu.Lock()
	sum.KeysRefused = slices.Clone(a.refused)
	a.refusedMu.Unlock()
	// A replay that joins the live stream recovers what a loss record
	// misses, as it recovers any gap: its missing count is the truth.
	sum.OK = st.Missing == 0 && h.received > 0 && len(sum.KeysRefused) == 0 &&
		(a.s.Expect == 0 || h.received+st.Conflated == a.s.Expect) && (!a.s.Verify || sum.VerifyOK) &&
		(sum.Replay == nil || sum.Replay.Errors == 0 && (a.replayCfg.Follow || sum.Replay.LostMessages == 0))
	return sum
}

// report shows the final screen, prints the summary line, logs the end
// and returns the exit status.
func (a *App) report(sum Summary, elapsed time.Duration) int {
	if a.s.Format == "summary" {
		a.screen(elapsed)
	}
	b, _ := json.Marshal(sum)
	fmt.Fprintln(a.out, string(b))
	if len(sum.SymbolsNotFound) > 0 {
		a.warnSymbolsNotFound(sum.SymbolsNotFound)
	}
	ev := a.log.Info()
	if !sum.OK {
		ev = a.log.Error()
	}
	ev.Uint64("received", sum.Received).Uint64("missing", sum.Missing).Uint64("kernel_drops", sum.KernelDrops).
		Bool("verify_ok", sum.VerifyOK).Str("exit_reason", sum.ExitReason).Msg("subscriber done")
	if sum.Unauthenticated > 0 || sum.NoKey > 0 {
		a.log.Warn().Uint64("unauthenticated", sum.Unauthenticated).Uint64("no_key", sum.NoKey).
			Msg("data packets dropped unverified: unauthenticated ones did not verify under the session's keys (forged or altered); no_key ones came under a session whose keys this subscriber could not fetch (docs/security.md)")
	}
	a.warnNoFeed(sum)
	if sum.OK {
		return 0
	}
	return 1
}

// warnSymbolsNotFound logs, by name, the --symbols that no definition on
// the joined channels named, with what those channels did define.
func (a *App) warnSymbolsNotFound(unseen []string) {
	cov := a.sub.SymbolCoverage()
	chans := a.sub.Channels()
	where := make([]string, len(chans))
	for i, c := range chans {
		where[i] = strconv.Itoa(c)
	}
	noun := "channel"
	if len(chans) > 1 {
		noun = "channels"
	}
	what := "no instrument definition arrived there"
	if cov.Defined > 0 {
		what = fmt.Sprintf("the feed defined %d instruments there, such as %s", cov.Defined, strings.Join(cov.Examples, ", "))
	}
	a.log.Warn().Strs("symbols", unseen).Ints("channels", chans).Int("instruments_defined", cov.Defined).
		Msgf("no instrument named %s on %s %s (%s): --symbols takes symbols that the feed defines",
			strings.Join(unseen, ", "), noun, strings.Join(where, ", "), what)
}

// screen redraws the live one-screen summary.
func (a *App) screen(elapsed time.Duration) {
	st := a.sub.Stats()
	w := a.h.w
	fmt.Fprintf(w, "\x1b[H\x1b[2J")
	fmt.Fprintf(w, "tickcast subscriber   %s   channels %v   %s\n\n", elapsed.Truncate(time.Second), a.sub.Channels(), a.s.Mode)
	fmt.Fprintf(w, "  messages     %12d   %10.0f msg/s   filtered %d\n", a.h.received, float64(a.h.received)/elapsed.Seconds(), st.Filtered)
	fmt.Fprintf(w, "  packets      %12d   A wins %d  B wins %d\n", st.Packets, st.WinsA, st.WinsB)
	fmt.Fprintf(w, "  gaps         %12d   missing %d\n", st.Gaps, st.Missing)
	fmt.Fprintf(w, "  duplicates   %12d   foreign %d  malformed %d  unauthenticated %d  no_key %d\n", st.Duplicates, st.Foreign, st.Malformed, st.Unauthenticated, st.NoKey)
	fmt.Fprintf(w, "  kernel drops %12d   ring full %d\n", st.KernelDrops, st.RingFull)
	fmt.Fprintf(w, "  sessions     %12d   ended %d  abrupt %d  competing packets %d\n", st.Sessions, st.SessionsEnded, st.SessionsAbrupt, st.Competing)
	if a.s.Verify {
		fmt.Fprintf(w, "  verify errors %11d\n", a.h.verifyErrs)
	}
	w.Flush()
}

// handler receives messages on the Run goroutine.
type handler struct {
	app            *App
	v              *verify.Verifier
	w              *bufio.Writer
	received       uint64
	verifyErrs     uint64
	firstVerifyErr error
	lostLogs       int
	snapshotMsgs   uint64
	instLogs       int
	last           *lastQuotes // the last quote of each instrument (--verify with --conflate)
	m              feed.Msg
	line           []byte
}

func (h *handler) Message(ch int, seq uint64, msg []byte, recvNs int64) {
	if d := h.app.s.HandlerDelay; d > 0 {
		spin(d)
	}
	if seq == 0 {
		// State from a snapshot, not a stream message: nothing to verify
		// it against, and it is not counted as received.
		h.snapshotMsgs++
		return
	}
	h.received++
	h.app.met.tick(msg)
	if h.last != nil {
		h.last.note(ch, seq, msg)
	}
	if h.v != nil {
		if err := h.v.Check(ch, seq, msg); err != nil {
			h.verifyErrs++
			if h.firstVerifyErr == nil {
				h.firstVerifyErr = err
				h.app.log.Error().Err(err).Int("channel", ch).Uint64("seq", seq).Msg("verification failed")
			}
		}
	}
	switch h.app.s.Format {
	case "text", "json":
		h.print(ch, seq, msg, recvNs)
	}
}

func (h *handler) print(ch int, seq uint64, msg []byte, recvNs int64) {
	if err := h.m.Decode(msg); err != nil {
		fmt.Fprintf(h.w, "channel %d seq %d: %v\n", ch, seq, err)
		return
	}
	m := &h.m
	b := h.line[:0]
	if h.app.s.Format == "json" {
		b = fmt.Appendf(b, `{"channel":%d,"seq":%d,"type":%q,"instrument":%d,"inst_seq":%d,"flags":%q,"exchange_ns":%d,"send_ns":%d,"recv_ns":%d`,
			ch, seq, m.Type.String(), m.Instrument, m.InstSeq, flagNames(m.Flags), m.ExchangeNs, m.SendNs, recvNs)
	} else {
		b = fmt.Appendf(b, "ch=%d seq=%d %s inst=%d iseq=%d flags=%s", ch, seq, m.Type, m.Instrument, m.InstSeq, flagNames(m.Flags))
	}
	js := h.app.s.Format == "json"
	field := func(k string, v any) {
		if js {
			b = fmt.Appendf(b, `,%q:%v`, k, v)
		} else {
			b = fmt.Appendf(b, " %s=%v", k, v)
		}
	}
	switch m.Type {
	case feed.TypeDefinition:
		if js {
			b = fmt.Appendf(b, `,"symbol":%q`, m.Def.Symbol.String())
		} else {
			field("symbol", m.Def.Symbol.String())
		}
		field("price_scale", m.Def.PriceScale)
		field("round_lot", m.Def.RoundLot)
	case feed.TypeQuote:
		field("bid_px", m.Quote.BidPx)
		field("bid_size", m.Quote.BidSize)
		field("ask_px", m.Quote.AskPx)
		field("ask_size", m.Quote.AskSize)
	case feed.TypeTrade:
		field("px", m.Trade.Px)
		field("size", m.Trade.Size)
		field("match_id", m.Trade.MatchID)
		field("aggressor", int(m.Trade.Aggressor))
	case feed.TypeLevelDelta:
		side, action := string(rune(m.Delta.Side)), string(rune(m.Delta.Action))
		if js {
			b = fmt.Appendf(b, `,"side":%q,"action":%q`, side, action)
		} else {
			field("side", side)
			field("action", action)
		}
		field("orders", m.Delta.Orders)
		field("px", m.Delta.Px)
		field("size", m.Delta.Size)
	}
	if js {
		b = append(b, '}')
	}
	b = append(b, '\n')
	h.w.Write(b)
	h.line = b
}

// flagNames lists a message's flags by name, comma separated ("" for none).
func flagNames(f feed.Flags) string {
	names := [...]string{"provisional", "book_incomplete", "cross", "bid_present", "ask_present", "conflated"}
	out := ""
	for i, n := range names {
		if f&(1<<i) != 0 {
			if out != "" {
				out += ","
			}
			out += n
		}
	}
	return out
}

func (h *handler) Event(ev *tickcast.Event) {
	log := h.app.log
	stream := func(e *zerolog.Event) *zerolog.Event {
		return e.Int("channel", ev.Channel).Str("line", ev.Line.String()).Str("session", ev.Session.String())
	}
	switch ev.Kind {
	case tickcast.EventGap:
		// Gaps are routine (most are filled); the ones that are not show up
		// as lost below.
		stream(log.Debug()).Uint64("from", ev.Range.From).Uint64("to", ev.Range.To).Msg("gap")
	case tickcast.EventRequest:
		stream(log.Debug()).Uint64("from", ev.Range.From).Uint64("to", ev.Range.To).Msg("recovery requested")
	case tickcast.EventLost:
		// A loss storm must not flood the log: the first 20 losses are
		// logged, then one in a thousand; the summary counts them all.
		h.lostLogs++
		if h.lostLogs <= 20 || h.lostLogs%1000 == 0 {
			stream(log.Warn()).Uint64("from", ev.Range.From).Uint64("to", ev.Range.To).Uint64("messages", ev.Range.Len()).
				Str("reason", ev.Reason.String()).Int("lost_events", h.lostLogs).Msg("messages lost")
		}
	case tickcast.EventInstrumentGap:
		h.instLogs++
		if h.instLogs <= 20 || h.instLogs%1000 == 0 {
			stream(log.Info()).Uint32("instrument", ev.Instrument).Uint64("inst_seq_from", ev.Range.From).
				Uint64("inst_seq_to", ev.Range.To).Int("instrument_gap_events", h.instLogs).Msg("instrument missed messages")
		}
	case tickcast.EventSnapshot:
		stream(log.Info()).Uint64("snapshot_seq", ev.LastSeq).Uint64("answers_from", ev.Range.From).
			Uint64("answers_to", ev.Range.To).Msg("snapshot loaded; stream resumes after it")
	case tickcast.EventSessionNamed:
		stream(log.Debug()).Msg("recovery names the channel's session")
	case tickcast.EventSessionStart:
		stream(log.Info()).Msg("session start")
	case tickcast.EventSessionEnd:
		stream(log.Info()).Uint64("last_seq", ev.LastSeq).Msg("end of session")
	case tickcast.EventSessionAbrupt:
		stream(log.Warn()).Uint64("last_seq", ev.LastSeq).Msg("session replaced without end of session")
	case tickcast.EventStale:
		stream(log.Warn()).Msg("channel stale: nothing received, not even heartbeats")
	case tickcast.EventFresh:
		stream(log.Info()).Msg("channel receiving again")
	case tickcast.EventForeign:
		stream(log.Debug()).Msg("foreign packet dropped")
	case tickcast.EventCompeting:
		// "session" is the competing one, not the one followed.
		stream(log.Error()).Msg("competing session on the channel's groups: another publisher; its packets are dropped")
	case tickcast.EventMalformed:
		stream(log.Debug()).Err(ev.Err).Msg("malformed packet dropped")
	case tickcast.EventUnauthenticated:
		// Counted (unauthenticated, no_key) and alerted on; one line per
		// forged packet would let a forger flood the log.
		stream(log.Debug()).Err(ev.Err).Msg("unauthenticated packet dropped")
	}
}

// Fault injection (a test facility, package ud/faults): the --inject-* and
// --silence-line settings wrap each line's receiver in a faults.Receiver.

// injectFaults returns newReceiver wrapped so that each receiver it opens
// shows its datagrams with the faults the settings ask for, or newReceiver
// itself when they ask for none. Every receiver gets its own seed, derived
// from --inject-seed and its group. The silence applies to the one line
// --silence-line names, as the line identity each receiver is opened for
// tells.
func (a *App) injectFaults(newReceiver ud.NewReceiverFunc, groupB netip.AddrPort) (ud.NewReceiverFunc, error) {
	s := a.s
	base := s.faultsConfig()
	base.CountMessages = mold.MessageCount
	line, after, dur, err := faults.ParseSilence(s.SilenceLine)
	if err != nil {
		return nil, cliconf.Invalid("silence-line", "%v", err)
	}
	silent := base
	silent.Silence, silent.SilenceAfter, silent.SilenceFor = true, after, dur
	for _, c := range []faults.Config{base, silent} {
		if err := c.Validate(); err != nil {
			field, text := "silence-line", err.Error() // SilenceAfter, SilenceFor
			if ce, ok := err.(*faults.ConfigError); ok {
				if f, ok := map[string]string{"Loss": "inject-loss", "Burst": "inject-burst", "BurstLen": "inject-burst-len",
					"Dup": "inject-dup", "Reorder": "inject-reorder"}[ce.Field]; ok {
					field, text = f, fmt.Sprintf("%v: %s", ce.Value, ce.Reason)
				}
			}
			return nil, cliconf.Invalid(field, "%s", text)
		}
	}
	if !base.Enabled() && line == "" {
		return newReceiver, nil
	}
	if line == "B" && !groupB.IsValid() {
		return nil, cliconf.Invalid("silence-line", "%q: there is no B line without --group-b", s.SilenceLine)
	}
	a.log.Warn().Float64("loss", s.InjectLoss).Float64("burst", s.InjectBurst).Int("burst_len", s.InjectBurstLen).
		Float64("dup", s.InjectDup).Float64("reorder", s.InjectReorder).Str("silence_line", s.SilenceLine).
		Uint64("seed", s.InjectSeed).Msg("fault injection on (test facility)")
	opened := map[netip.AddrPort]uint64{}
	return func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
		cfg := base
		if id.Line.String() == line {
			cfg = silent
		}
		// The key is the group's address and port (48 bits), and how
		// many receivers were opened on that group before.
		g := id.Group
		ga := g.Addr().As4()
		key := uint64(binary.BigEndian.Uint32(ga[:]))<<16 | uint64(g.Port())
		cfg.Seed = faults.DeriveSeed(s.InjectSeed, key|opened[g]<<48)
		opened[g]++
		r, err := newReceiver(id, n)
		if err != nil {
			return nil, err
		}
		w, err := faults.Wrap(r, cfg)
		if err != nil {
			r.Close()
			return nil, err
		}
		a.inj = append(a.inj, w)
		return w, nil
	}, nil
}

// addInjected adds the injected faults of every receiver to sum.
func (a *App) addInjected(sum *Summary) {
	var f faults.Stats
	for _, w := range a.inj {
		f = f.Add(w.Faults())
	}
	sum.InjectedDroppedDatagrams, sum.InjectedDroppedMessages = f.DroppedDatagrams, f.DroppedMessages
	sum.InjectedDuplicates, sum.InjectedReordered = f.Duplicated, f.Reordered
	sum.SilencedDatagrams, sum.SilencedMessages = f.SilencedDatagrams, f.SilencedMessages
}

// Live over NATS (--transport nats): each channel's receiver subscribes to
// the feed handler's live subject (docs/recovery.md) instead of joining a
// multicast group; everything after the receiver is the same.

// natsReceivers returns the receiver factory for --transport nats: each
// channel's receiver subscribes to the channel's live subject, with cfg
// and its own Notifier. B lines are refused before this is used. The
// factory uses a.nc, which New connects before the subscriber opens its
// receivers.
func (a *App) natsReceivers(cfg natslive.Config) ud.NewReceiverFunc {
	return func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
		cfg := cfg
		cfg.Notifier = n
		if id.Line != ud.LineA {
			return nil, fmt.Errorf("nats live receiver: %s: a B line is multicast only", id)
		}
		subject := recovery.LiveSubject(a.s.FeedName, id.Channel)
		r, err := natslive.NewReceiver(a.nc, subject, cfg)
		if err != nil {
			return nil, fmt.Errorf("channel %d: %w", id.Channel, err)
		}
		return r, nil
	}
}
