// Command feedhandler publishes a normalized market-data feed as sequenced
// MoldUDP64 packets over UDP multicast.
//
// Settings come from flags, TICKCAST_* environment variables and an optional
// YAML config file (--config), in that order of precedence; run with --help
// for the list. On SIGINT or SIGTERM it flushes, sends end of session on
// every channel and exits 0. Bad flags or configuration exit 2 with a
// message naming the setting.
//
// --list-devices prints the host's RDMA devices and exits.
//
// With --demo it also runs a verifying subscriber in the same process and
// prints the subscriber's summary: one command that shows the whole path
// working on loopback.
//
// The feed handler itself is package fh; this program turns its settings
// into an fh.Config, opens the source --source names and runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/fh"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/logging"
	"github.com/tickcast/tickcast/internal/metricsrv"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/internal/tracing"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/tickprom"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

// Settings are the feed handler's settings.
type Settings struct {
	Source      string        `flag:"source" default:"synthetic" help:"upstream feed: synthetic, itch:PATH (NASDAQ ITCH 5.0 file, plain or gzip), pcap:PATH[:GROUP:PORT] (pcap or pcapng capture of MoldUDP64/ITCH 5.0 packets, only those sent to GROUP:PORT if given; docs/pcap.md), or itch-mold:GROUP:PORT[,GROUP_B:PORT_B] (an exchange's live MoldUDP64 multicast feed of ITCH 5.0, line A and optional line B, published as it arrives; docs/upstream.md)"`
	DryRun      bool          `flag:"dry-run" help:"with itch:PATH or pcap:PATH, read the whole file and print counts, live orders and peak RSS as JSON, publishing nothing"`
	ITCHOrders  int           `flag:"itch-orders" default:"1048576" help:"with itch:PATH or pcap:PATH, capacity of the order table (live orders; occupancy is logged and in --dry-run)"`
	Depth       int           `flag:"depth" default:"10" help:"with itch:PATH, pcap:PATH or itch-mold:, price levels per side (1..64) whose changes are published as level deltas, beside quotes and trades (docs/wire-format.md); 0 publishes none"`
	Count       uint64        `flag:"count" default:"1000000" help:"messages to publish, then end the session (0 = no limit)"`
	Duration    time.Duration `flag:"duration" default:"0s" help:"publish for this long, then end the session (0 = no limit; with --count, whichever comes first)"`
	Rate        float64       `flag:"rate" default:"100000" help:"messages per second (0 = as fast as possible), paced by a kernel sleep and a spin on the clock for the last --pace-spin before each message"`
	Speed       float64       `flag:"speed" default:"0" help:"with itch:PATH, pace at the file's recorded speed times this factor (its ITCH timestamps, from the first message: 1 real time, 10 ten times faster), instead of --rate, which must then not be set (0 = pace by --rate)"`
	Pipeline    string        `flag:"pipeline" default:"auto" help:"read the source on a thread of its own, ahead of the publisher, and apply the snapshot state on threads of their own, so decoding and the books run on another core (docs/bench.md, \"Where the time per packet goes\"): auto (on at --rate 0 without --speed, except for a live itch-mold: source, where the hand-off would add latency), on or off"`
	PaceSpin    time.Duration `flag:"pace-spin" default:"60us" help:"how long before each message the pacer spins instead of sleeping (negative: always spin, one core busy)"`
	Pregenerate bool          `flag:"pregenerate" help:"with the synthetic source, generate every message (--count of them, at most 10,000,000; 160 bytes each) before publishing starts, so that benchmarks measure distribution without generation"`
	Instruments int           `flag:"instruments" default:"100" help:"synthetic instruments"`
	Seed        uint64        `flag:"seed" default:"1" help:"synthetic feed seed"`
	Channels    int           `flag:"channels" default:"4" help:"channels (multicast streams) instruments are spread over"`
	Group       string        `flag:"group" default:"239.77.0.1:31001" help:"A-line group of channel 0; channel c uses the address plus c"`
	GroupB      string        `flag:"group-b" default:"" help:"B-line group of channel 0 (empty: no B line)"`
	Line        string        `flag:"line" default:"both" help:"line to publish: a (--group), b (--group-b) or both; two hosts publishing a and b of the same sessions (--session-record) lose nothing when one dies"`
	Iface       string        `flag:"iface" default:"127.0.0.1" help:"IPv4 address of the interface to send on"`
	ListDevices bool          `flag:"list-devices" help:"print this host's RDMA devices (ports and their state, link layer, netdevs, NUMA node, whether port counters exist) and the device --iface leads to, then exit 0; built into every binary, with or without -tags rdma"`
	Transport   string        `flag:"transport" default:"udp" help:"udp (multicast) or rdma (RDMA UD multicast; a binary built with -tags rdma, --iface the RDMA netdev's address, datagrams at most the port's MTU)"`
	TTL         int           `flag:"ttl" default:"0" help:"multicast TTL (0 keeps packets on this host)"`
	Auth        bool          `flag:"auth" default:"true" help:"seal every data packet (AES-GCM tag in its last block) with a key of the channel's session and serve the keys over NATS on tickcast.FEED.keys.CH, so subscribers drop forged packets (docs/security.md); --auth=false sends packets anyone on the network could forge"`
	KeyRotation time.Duration `flag:"key-rotation" default:"1h" help:"how long one key seals: keys rotate on the Unix clock's periods of this length (1s..24h); subscribers fetch the next key ahead of each rotation, which they are given from half of this before it, so a user removed from --nats-users (or a channel from its entitlement) more than that before a rotation holds no key after it"`
	Encrypt     string        `flag:"encrypt" default:"" help:"channels whose messages are encrypted as well as authenticated, as 0-3;7 or all (empty: none): a host that joins the groups without the keys sees only the MoldUDP64 framing; subscribers need no setting (the keys say so); costs about 0.15 µs more per 1,400-byte packet on each side (docs/security.md)"`
	KeyAudit    string        `flag:"key-audit" default:"" help:"append every key reply (time, user, channel, session and epochs, or why refused) to this file as a JSON line, for --usage-report (empty: log them)"`
	UsageReport string        `flag:"usage-report" default:"" help:"print the usage report of these --key-audit files (comma separated) as CSV, one line per UTC day, user and channel, and exit: what an operator reports to an exchange (docs/security.md)"`
	MaxDatagram int           `flag:"max-datagram" default:"1472" help:"largest datagram in bytes"`
	GSO         bool          `flag:"gso" help:"with udp, send each channel's runs of full packets as one buffer the kernel cuts into datagrams (UDP GSO) where the kernel takes it, for less CPU a packet at high rates; full packets are then padded to --max-datagram inside their last message, which decoders ignore (docs/wire-format.md, \"Padding\"). A capture on the sending host (lo, or a NIC that segments in hardware) shows each run as one datagram that decoders cannot split; receivers and captures on receiving hosts see the datagrams"`
	MaxDelay    time.Duration `flag:"max-delay" default:"50us" help:"longest a message waits in a partly filled packet while input keeps coming"`
	Heartbeat   time.Duration `flag:"heartbeat" default:"100ms" help:"idle time after which a channel sends a heartbeat"`
	SendBatch   int           `flag:"send-batch" default:"16" help:"packets per channel sent in one sendmmsg call at most"`
	LogFormat   string        `flag:"log-format" default:"auto" help:"auto (console on a terminal, else json), console or json"`
	LogLevel    string        `flag:"log-level" default:"info" help:"debug, info, warn or error"`
	Demo        bool          `flag:"demo" help:"also run a verifying subscriber in this process and print its summary"`
	Trace       string        `flag:"trace" default:"" help:"write a Go execution trace (runtime/trace) of the run to this file, for finding stalls: go tool trace FILE (it costs some latency while on)"`
	CPUProfile  string        `flag:"cpuprofile" default:"" help:"write a CPU profile (runtime/pprof) of the run to this file, for finding where the time per message goes: go tool pprof FILE"`

	FeedName         string        `flag:"feed-name" default:"tickcast" help:"feed name in the NATS subjects (tickcast.FEED.retransmit.CH, ...)"`
	NATSURL          string        `flag:"nats-url" default:"" help:"external NATS server or cluster to serve recovery on (empty: run an embedded server on --nats-listen)"`
	NATSListen       string        `flag:"nats-listen" default:"127.0.0.1:4222" help:"address of the embedded NATS server (port 0: a free port)"`
	NATSUsers        string        `flag:"nats-users" default:"" help:"embedded server users, name:password:role[:channels] (role feedhandler or subscriber; channels, a subscriber's entitlement, as 0-3;7, default all), comma separated, or @FILE with one per line, read again on SIGHUP (a user removed is disconnected, and entitlements change at once for the NATS subjects and from the next rotation for the keys)"`
	NATSLive         bool          `flag:"nats-live" default:"true" help:"also publish every datagram on tickcast.FEED.live.CH for subscribers without multicast, a channel's only while it is wanted: while a consumer announces demand on tickcast.FEED.demand.CH (subscriber --transport nats does) or, with the embedded server, while anyone subscribes"`
	NATSLiveAlways   bool          `flag:"nats-live-always" help:"with --nats-live, publish every datagram on the live subjects whether or not anyone wants it, for consumers on an external NATS server that cannot announce demand (costs the host's multicast subscribers latency at high rates)"`
	Linger           time.Duration `flag:"linger" default:"5s" help:"after end of session, keep serving recovery (and repeating end of session) this long; also after SIGTERM or an interrupt, which end the session (a second one ends the linger at once)"`
	StoreMessages    int           `flag:"store-messages" default:"1048576" help:"retransmission store limit per channel, in messages (16 bytes each, allocated at start)"`
	StoreBytes       int           `flag:"store-bytes" default:"67108864" help:"retransmission store limit per channel, in message bytes; each channel's store takes this plus 16 bytes per --store-messages, allocated at start and resident as it fills (80 MiB at the defaults); more than the host's memory is refused"`
	MaxRetransmit    int           `flag:"max-retransmit" default:"10000" help:"most messages one retransmit request may ask for"`
	RateLimit        float64       `flag:"rate-limit" default:"1000000" help:"messages per second one requester may be sent"`
	RepairWindow     time.Duration `flag:"repair-window" default:"250ms" help:"after publishing a repair on the feed's repair subject, answer requests for the same range this long with a pointer to it, not the messages again (docs/recovery.md)"`
	WatchGroups      bool          `flag:"watch-groups" help:"listen on the feed's own groups and count and log the packets of another session there (another publisher: foreign_packets); off by default, as every datagram then goes to one more socket on the host, which costs the host's subscribers latency at high rates"`
	RecoveryQueue    string        `flag:"recovery-queue" default:"" help:"NATS queue group to take recovery requests in, shared with the other feed handlers of the same sessions, so that one answers each request (empty: tickcast-FEED with the session record, else every feed handler on the NATS server answers)"`
	SessionRecord    string        `flag:"session-record" default:"auto" help:"share the sessions with the feed's other feed handlers through a JetStream key-value record on --nats-url: on, off, or auto (on when the server has JetStream; the embedded server has none); a feed handler that finds a peer publishing joins its sessions, replays its input silently to the peer's position, then publishes"`
	PeerTimeout      time.Duration `flag:"peer-timeout" default:"500ms" help:"how long a question to the feed's peer feed handlers (their session and position) waits for an answer"`
	Rerequest        string        `flag:"rerequest" default:"" help:"with --source itch-mold:, the exchange's MoldUDP64 re-request server, HOST:PORT (UDP unicast; empty: none, a gap the other line does not fill within --gap-deadline is lost)"`
	RerequestMax     int           `flag:"rerequest-max" default:"1000" help:"with itch-mold:, the most messages one re-request asks for (1..65534); a larger gap is asked for in several"`
	RerequestTimeout time.Duration `flag:"rerequest-timeout" default:"100ms" help:"with itch-mold:, how long a re-request waits for its answer before it is sent again"`
	RerequestRetries int           `flag:"rerequest-retries" default:"3" help:"with itch-mold:, how many times an unanswered re-request is sent again before its range is given up and lost"`
	GapDeadline      time.Duration `flag:"gap-deadline" default:"5s" help:"with itch-mold:, how long after detection an upstream gap still open is lost, whatever the re-requests"`
	StartFrom        uint64        `flag:"start-from" default:"0" help:"with itch-mold:, start at this upstream sequence instead of asking for everything from 1 (a late start): the books start incomplete, flagged downstream (0 or 1: from 1)"`
	UpstreamIface    string        `flag:"upstream-iface" default:"127.0.0.1" help:"with itch-mold:, IPv4 address of the interface that joins the exchange's groups and sends the re-requests"`
	Archive          bool          `flag:"archive" help:"record every channel's packets, exactly as sent, to the feed's archive stream TICKCAST_ARCHIVE_FEED in JetStream: on the embedded server (which then runs JetStream, its files in --archive-dir) or on --nats-url's server or cluster; recording never delays the send, and what cannot be recorded in time is counted and written as a loss record (docs/archive.md)"`
	ArchiveDir       string        `flag:"archive-dir" default:"tickcast-archive" help:"with --archive and the embedded server, the directory of its JetStream file store (created if missing; the archive outlives the feed handler there)"`
	ArchiveReplicas  int           `flag:"archive-replicas" default:"0" help:"with --archive, the stream's copies (0: one per NATS server the connection knows, up to 3: R3 on a cluster of three)"`
	ArchiveMaxAge    time.Duration `flag:"archive-max-age" default:"0s" help:"with --archive, drop records older than this (0: keep them, up to --archive-max-bytes)"`
	ArchiveMaxBytes  int64         `flag:"archive-max-bytes" default:"0" help:"with --archive, drop the oldest records beyond this many bytes (0: no limit but the disk's)"`
	ArchiveCompress  bool          `flag:"archive-compress" help:"with --archive, have JetStream store the records compressed (S2)"`
	SHM              bool          `flag:"shm" help:"also write every channel's packets, as sent (sealed), to a shared-memory ring per channel (--shm-dir/tickcast-FEED-CH) that subscribers on this host read with --transport shm, with no system call per packet; multicast goes on for other hosts (docs/operations.md, \"Transports and receive modes\")"`
	SHMDir           string        `flag:"shm-dir" default:"/dev/shm" help:"with --shm, the directory of the ring files (tmpfs: /dev/shm)"`
	SHMSlots         int           `flag:"shm-slots" default:"16384" help:"with --shm, each ring's size in packets (a power of two): how far a local subscriber may fall behind before it loses packets, each slot --max-datagram bytes"`
	MetricsAddr      string        `flag:"metrics-addr" default:"127.0.0.1:9464" help:"serve Prometheus metrics on http://ADDR/metrics (empty: no metrics; port 0: a free port)"`
	natsconn.Flags

	Origins cliconf.Origins // where each explicitly set setting came from
}

// validate checks the settings fh.Config does not have (the source's, the
// demo's) and those whose flags take zero as a value to refuse, where
// fh.Config takes it as the default; config has fh.Config.Validate check
// the rest.
func (s *Settings) validate() error {
	if err := validateSource(s); err != nil {
		return err
	}
	switch {
	case s.ITCHOrders < 1:
		return cliconf.Invalid("itch-orders", "%d: must be positive", s.ITCHOrders)
	case s.Depth < 0 || s.Depth > itch.MaxDepth:
		return cliconf.Invalid("depth", "%d: want 0..%d (0: no level deltas)", s.Depth, itch.MaxDepth)
	case s.Instruments < 1 || s.Instruments > feed.MaxSyntheticInstruments:
		return cliconf.Invalid("instruments", "%d: want 1..%d", s.Instruments, feed.MaxSyntheticInstruments)
	case s.Channels < 1:
		// fh.Config takes 0 as its default; fh checks the upper limit.
		return cliconf.Invalid("channels", "%d: want 1..%d", s.Channels, config.MaxChannels)
	case s.MaxDatagram < mold.HeaderLen+mold.BlockHdrLen+feed.MaxLen || s.MaxDatagram > 65507:
		return cliconf.Invalid("max-datagram", "%d: want %d..65507", s.MaxDatagram, mold.HeaderLen+mold.BlockHdrLen+feed.MaxLen)
	case s.MaxDelay <= 0:
		return cliconf.Invalid("max-delay", "%v: must be positive", s.MaxDelay)
	case s.Heartbeat <= 0:
		return cliconf.Invalid("heartbeat", "%v: must be positive", s.Heartbeat)
	case s.SendBatch < 1 || s.SendBatch > 1024:
		return cliconf.Invalid("send-batch", "%d: want 1..1024", s.SendBatch)
	case s.StoreMessages < 1:
		return cliconf.Invalid("store-messages", "%d: must be positive", s.StoreMessages)
	case s.StoreBytes < 65535:
		return cliconf.Invalid("store-bytes", "%d: at least 65535, so any message fits", s.StoreBytes)
	case s.MaxRetransmit < 1 || s.MaxRetransmit > mold.MaxCount:
		return cliconf.Invalid("max-retransmit", "%d: want 1..%d", s.MaxRetransmit, mold.MaxCount)
	case s.RateLimit <= 0:
		return cliconf.Invalid("rate-limit", "%v: must be positive", s.RateLimit)
	case s.RepairWindow <= 0:
		// fh.Config takes 0 as its default; fh checks the upper limit.
		return cliconf.Invalid("repair-window", "%v: must be positive", s.RepairWindow)
	case s.Line == "b" && s.GroupB == "":
		return cliconf.Invalid("line", "b publishes the B line, which needs --group-b")
	case s.SessionRecord == "on" && s.NATSURL == "":
		return cliconf.Invalid("session-record", "on needs --nats-url naming a NATS server or cluster with JetStream (the embedded server has none)")
	case s.PeerTimeout <= 0:
		return cliconf.Invalid("peer-timeout", "%v: must be positive", s.PeerTimeout)
	case s.Speed < 0:
		return cliconf.Invalid("speed", "%v: must not be negative", s.Speed)
	case s.Demo && s.Count == 0:
		return cliconf.Invalid("count", "0 (no limit) cannot be combined with --demo, which ends when the feed does")
	}
	return nil
}

// flagOf names the flag of each fh.Config field, for its errors.
var flagOf = map[string]string{
	"Source": "source", "Channels": "channels", "GroupA": "group", "GroupB": "group-b", "Interface": "iface",
	"Transport": "transport", "TTL": "ttl", "GSO": "gso", "Unsealed": "auth", "KeyRotation": "key-rotation", "KeyAudit": "key-audit", "Encrypt": "encrypt", "MaxDatagram": "max-datagram", "MaxDelay": "max-delay",
	"Heartbeat": "heartbeat", "SendBatch": "send-batch", "Rate": "rate", "Speed": "speed", "PaceSpin": "pace-spin",
	"Duration": "duration", "Linger": "linger", "FeedName": "feed-name", "NATSURL": "nats-url",
	"NATSListen": "nats-listen", "NATSUsers": "nats-users", "StoreMessages": "store-messages",
	"StoreBytes": "store-bytes", "MaxRetransmit": "max-retransmit", "RateLimit": "rate-limit",
	"RepairWindow": "repair-window", "RecoveryQueue": "recovery-queue", "Watch": "watch-groups",
	"MetricsAddr": "metrics-addr", "NATSLive": "nats-live", "NATSLiveAlways": "nats-live-always", "Line": "line", "SessionRecord": "session-record",
	"PeerTimeout": "peer-timeout", "Archive": "archive", "ArchiveDir": "archive-dir", "ArchiveReplicas": "archive-replicas",
	"ArchiveMaxAge": "archive-max-age", "ArchiveMaxBytes": "archive-max-bytes", "ArchiveCompress": "archive-compress",
	"SHM": "shm", "SHMDir": "shm-dir", "SHMSlots": "shm-slots",
}

// flagOverrides are the flags whose default is not the default of the
// fh.Config field they set, by field, with the reason: the daemon's defaults
// are for running it as a service, the library's for embedding it.
// TestFlagDefaults holds every other flag default equal to fh.Defaults().
var flagOverrides = map[string]string{
	"Rate":        "the daemon paces a synthetic feed at a rate a newcomer's machine sustains; a library caller's source sets its own pace",
	"Linger":      "the daemon serves recovery after end of session, so that subscribers recover the session's tail; an embedding program decides its own lifetime",
	"NATSLive":    "the daemon serves subscribers without multicast out of the box; it costs one atomic load per datagram while nobody wants it",
	"MetricsAddr": "the daemon is scraped by Prometheus on the documented port; a library caller may have its own metrics endpoint",
}

// originName names where a setting's value came from, as a user gave it:
// --NAME for a flag, else the origin as cliconf records it.
func originName(name, origin string) string {
	if origin == "flag" {
		return "--" + name
	}
	return origin
}

// logSettingError turns logging.New's error for a bad --log-format or
// --log-level into a *cliconf.Error; other errors are returned as they are.
func logSettingError(err error) error {
	var le *logging.SettingError
	if errors.As(err, &le) {
		return cliconf.Invalid(le.Setting, "%q: want %s", le.Value, le.Want)
	}
	return err
}

// badSettings prints err, an error in the settings, saying where the value
// it is about came from, and returns exit status 2.
func badSettings(stderr io.Writer, s *Settings, err error) int {
	fmt.Fprintf(stderr, "feedhandler: %v\n", s.Origins.Locate(err))
	return 2
}

// flagError turns an *fh.ConfigError into a *cliconf.Error naming the
// flag; other errors are returned as they are.
func flagError(err error) error {
	var ce *fh.ConfigError
	if errors.As(err, &ce) {
		return cliconf.Invalid(flagOf[ce.Field], "%s", strings.TrimPrefix(ce.Error(), "fh: invalid Config."+ce.Field+" "))
	}
	return err
}

// config checks the settings and returns the feed handler's configuration,
// without its source and log. Its errors are *cliconf.Error.
func (s *Settings) config() (fh.Config, error) {
	if err := s.validate(); err != nil {
		return fh.Config{}, err
	}
	c := fh.Config{
		SourceName: s.Source, Channels: s.Channels, Transport: s.Transport, TTL: s.TTL, GSO: s.GSO, Unsealed: !s.Auth, KeyRotation: s.KeyRotation, KeyAudit: s.KeyAudit,
		MaxDatagram: s.MaxDatagram, MaxDelay: s.MaxDelay, Heartbeat: s.Heartbeat, SendBatch: s.SendBatch,
		Rate: s.Rate, Speed: s.Speed, PaceSpin: s.PaceSpin, Duration: s.Duration, Linger: s.Linger, LingerOnStop: true,
		FeedName: s.FeedName, NATSURL: s.NATSURL, NATSListen: s.NATSListen, NATS: s.Flags, NATSLive: s.NATSLive, NATSLiveAlways: s.NATSLiveAlways,
		StoreMessages: s.StoreMessages, StoreBytes: s.StoreBytes, MaxRetransmit: s.MaxRetransmit, RateLimit: s.RateLimit,
		RepairWindow: s.RepairWindow, RecoveryQueue: s.RecoveryQueue, Watch: s.WatchGroups, MetricsAddr: s.MetricsAddr,
		Line: s.Line, SessionRecord: s.SessionRecord, PeerTimeout: s.PeerTimeout,
		Archive: s.Archive, ArchiveDir: s.ArchiveDir, ArchiveReplicas: s.ArchiveReplicas, ArchiveMaxAge: s.ArchiveMaxAge,
		ArchiveMaxBytes: s.ArchiveMaxBytes, ArchiveCompress: s.ArchiveCompress, SHM: s.SHM, SHMDir: s.SHMDir, SHMSlots: s.SHMSlots,
	}
	if _, _, live, _ := parseLiveSource(s.Source); live {
		c.Rate = 0 // published as it arrives (validate refuses an explicit --rate)
	}
	if s.Speed > 0 {
		// --rate's default paces the synthetic source; --speed replaces it.
		if origin, set := s.Origins["rate"]; set {
			return c, cliconf.Invalid("speed", "cannot be combined with --rate (set to %v by %s): pace by one or the other", s.Rate, originName("rate", origin))
		}
		c.Rate = 0
	}
	_, _, live, _ := parseLiveSource(s.Source)
	switch unpaced := c.Rate == 0 && c.Speed == 0; s.Pipeline {
	case "auto":
		c.Pipeline = unpaced && !live
	case "on":
		if !unpaced {
			return c, cliconf.Invalid("pipeline", "on applies to --rate 0 only (without --speed): a paced run reads each message when it is due")
		}
		c.Pipeline = true
	case "off":
	default:
		return c, cliconf.Invalid("pipeline", "%q: want auto, on or off", s.Pipeline)
	}
	if _, set := s.Origins["max-datagram"]; !set && s.Transport == "rdma" {
		c.MaxDatagram = 0 // the RDMA port's active MTU
	}
	var err error
	if c.GroupA, err = tickcast.ParseGroup(s.Group); err != nil {
		return c, cliconf.Invalid("group", "%v", err)
	}
	if s.GroupB != "" {
		if c.GroupB, err = tickcast.ParseGroup(s.GroupB); err != nil {
			return c, cliconf.Invalid("group-b", "%v", err)
		}
	}
	if c.Interface, err = netip.ParseAddr(s.Iface); err != nil || !c.Interface.Is4() {
		return c, cliconf.Invalid("iface", "%q is not an IPv4 address", s.Iface)
	}
	if c.NATSUsers, err = s.natsUsers(); err != nil {
		return c, err
	}
	if c.Encrypt, err = s.encryptChannels(); err != nil {
		return c, err
	}
	return c, flagError(c.Validate())
}

// encryptChannels returns the channels of --encrypt.
func (s *Settings) encryptChannels() ([]int, error) {
	switch strings.TrimSpace(s.Encrypt) {
	case "":
		return nil, nil
	case "all":
		chans := make([]int, s.Channels)
		for i := range chans {
			chans[i] = i
		}
		return chans, nil
	}
	chans, err := natsconn.ParseChannels(strings.ReplaceAll(s.Encrypt, ",", ";"))
	if err != nil {
		return nil, cliconf.Invalid("encrypt", "%v", err)
	}
	return chans, nil
}

// natsUsers returns the users --nats-users gives the embedded server.
func (s *Settings) natsUsers() ([]natsconn.User, error) {
	if s.NATSUsers == "" {
		return nil, nil
	}
	if s.NATSURL != "" {
		return nil, cliconf.Invalid("nats-users", "configures the embedded server, which --nats-url replaces")
	}
	var users []natsconn.User
	var err error
	if strings.HasPrefix(s.NATSUsers, "@") {
		users, err = natsconn.LoadUsersFile(s.NATSUsers[1:])
	} else {
		users, err = natsconn.ParseUsers(s.NATSUsers)
	}
	if err != nil {
		return nil, cliconf.Invalid("nats-users", "%v", err)
	}
	return users, nil
}

// reloadUsersOnHUP reads the --nats-users file again at every SIGHUP, until
// done, and gives the embedded server its users.
func reloadUsersOnHUP(s *Settings, h *fh.FeedHandler, log zerolog.Logger, done <-chan struct{}) {
	if !strings.HasPrefix(s.NATSUsers, "@") {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
			case <-done:
				return
			}
			users, err := s.natsUsers()
			if err == nil {
				err = h.SetUsers(users)
			}
			if err != nil {
				log.Error().Err(err).Str("file", s.NATSUsers[1:]).Msg("SIGHUP: users not reloaded, the previous ones stay")
				continue
			}
			log.Info().Str("file", s.NATSUsers[1:]).Int("users", len(users)).Msg("SIGHUP: users reloaded")
		}
	}()
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is the program: it returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if url, ok := metricsrv.HealthArg(args); ok {
		return metricsrv.HealthMain("feedhandler", url, stdout, stderr)
	}
	var s Settings
	err := cliconf.Load("feedhandler", args, getenv, &s)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, cliconf.Usage("feedhandler", &s), metricsrv.HealthUsage("feedhandler", "127.0.0.1:9464"))
		return 0
	}
	if err == nil && s.UsageReport != "" {
		if err := fh.UsageReport(stdout, strings.Split(s.UsageReport, ",")...); err != nil {
			fmt.Fprintf(stderr, "feedhandler: --usage-report: %v\n", err)
			return 1
		}
		return 0
	}
	if err == nil && s.ListDevices {
		if err := devices.WriteList(stdout, s.Iface); err != nil {
			fmt.Fprintf(stderr, "feedhandler: --list-devices: %v\n", err)
			return 1
		}
		return 0
	}
	var cfg fh.Config
	if err == nil {
		cfg, err = s.config()
	}
	if err != nil {
		return badSettings(stderr, &s, err)
	}
	log, err := logging.New(s.LogFormat, s.LogLevel, stderr)
	if err != nil {
		return badSettings(stderr, &s, logSettingError(err))
	}
	if s.DryRun {
		return dryRun(&s, log, stdout, stderr)
	}
	src, releaseSrc, err := openSource(&s, log, stderr)
	if err != nil {
		return badSettings(stderr, &s, err)
	}
	defer releaseSrc()
	cfg.Source, cfg.Log, cfg.Identity = src, log, func() (string, error) { return identity(&s) }
	if cfg.Transport == "rdma" {
		if c := subapp.RDMADevice(log, s.Iface, false, -1,
			"the feed handler's send path locks no thread: run it on these CPUs (taskset -c)"); c != nil {
			cfg.Collectors = append(cfg.Collectors, c)
		}
	}
	if l, ok := src.(*liveSource); ok {
		cfg.Collectors = append(cfg.Collectors, tickprom.NewUpstreamCollector(l.up.Stats))
	}
	// The first SIGTERM or interrupt ends publishing: the end of session
	// goes out and recovery is served for --linger (fh.Config.LingerOnStop);
	// a second ends that at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	abort, finished := make(chan struct{}), make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-finished:
			return
		}
		select {
		case <-sigs:
			close(abort)
		case <-finished:
		}
	}()
	return publish(ctx, abort, &s, cfg, stdout, stderr)
}

// publish runs the feed handler (and the --demo subscriber) and returns the
// exit code: with --demo the subscriber's, unless publishing failed.
func publish(ctx context.Context, abort <-chan struct{}, s *Settings, cfg fh.Config, stdout, stderr io.Writer) int {
	h, err := fh.New(cfg)
	var ce *fh.ConfigError
	if errors.As(err, &ce) {
		return badSettings(stderr, s, flagError(err))
	}
	if err != nil {
		return 1 // logged by New
	}
	defer h.Close()
	done := make(chan struct{})
	defer close(done)
	reloadUsersOnHUP(s, h, cfg.Log, done)
	go func() {
		select {
		case <-abort:
			h.Abort()
		case <-done:
		}
	}()
	// In demo mode the subscriber joins before the first packet is sent.
	var demoDone chan int
	var demoOut bytes.Buffer // the demo subscriber's summary line, also on stdout
	if s.Demo {
		if demoDone, err = startDemo(s, h.NATSURL(), cfg.Log, io.MultiWriter(stdout, &demoOut)); err != nil {
			cfg.Log.Error().Err(err).Msg("demo subscriber")
			return 1
		}
	}
	cfg.Log.Info().Str("source", s.Source).Uint64("count", s.Count).Float64("rate", cfg.Rate).
		Uint64("seed", s.Seed).Int("instruments", s.Instruments).Str("settings_from", s.Origins.String()).Msg("publishing")
	stopTrace, err := tracing.StartBoth(s.Trace, s.CPUProfile)
	if err != nil {
		name := "trace"
		if strings.HasPrefix(err.Error(), "cpuprofile") {
			name = "cpuprofile"
		}
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // without tracing's own "trace:" or "cpuprofile:"
		}
		return badSettings(stderr, s, cliconf.Invalid(name, "%v", err))
	}
	sum, err := h.Run(ctx)
	if err := stopTrace(); err != nil {
		cfg.Log.Error().Err(err).Msg("--trace")
	}
	code := 0
	if err != nil {
		code = 1 // logged by Run
	}
	if demoDone == nil {
		b, _ := json.Marshal(sum.Fields())
		fmt.Fprintln(stdout, string(b))
		return code
	}
	if subCode := <-demoDone; code == 0 {
		code = subCode
	}
	demoLatency(cfg.Log, demoOut.Bytes())
	return code
}

// demoLatency logs the --demo subscriber's latency percentiles, read from
// its summary line, with what to expect of them.
func demoLatency(log zerolog.Logger, summary []byte) {
	var sum struct {
		Count uint64  `json:"latency_count"`
		P50   float64 `json:"latency_p50_us"`
		P99   float64 `json:"latency_p99_us"`
		P999  float64 `json:"latency_p999_us"`
	}
	if err := json.Unmarshal(summary, &sum); err != nil || sum.Count == 0 {
		return // no summary (the subscriber failed, and said why)
	}
	log.Info().Uint64("messages", sum.Count).Float64("p50_us", sum.P50).Float64("p99_us", sum.P99).Float64("p999_us", sum.P999).
		Msgf("demo latency, the feed handler's send stamp to the subscriber's handler: p50 %s, p99 %s, p99.9 %s. %s",
			micros(sum.P50), micros(sum.P99), micros(sum.P999), demoExpect)
}

// demoExpect says what the demo's percentiles look like on an idle host.
const demoExpect = "On an idle host expect p50 in the tens of microseconds and p99 and p99.9 within a few times " +
	"the host's own floor for a datagram through the kernel (a few hundred µs to a few ms on two cores); " +
	"tens of ms mean other work took the cores. docs/bench.md has measured figures"

// micros formats a duration in microseconds as µs or ms.
func micros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.1f µs", us)
}

// startDemo starts the --demo subscriber: the subscriber's defaults, joined
// to this feed and verifying it, recovering from natsURL. Its exit code
// comes on the channel returned.
func startDemo(s *Settings, natsURL string, log zerolog.Logger, stdout io.Writer) (chan int, error) {
	var d subapp.Settings
	if err := cliconf.Defaults(&d); err != nil {
		return nil, err
	}
	d.Channels, d.Group, d.GroupB, d.Iface, d.MaxDatagram = s.Channels, s.Group, s.GroupB, s.Iface, s.MaxDatagram
	d.Verify, d.Seed, d.Instruments, d.Expect = true, s.Seed, s.Instruments, s.Count
	d.NATSURL, d.FeedName, d.Auth = natsURL, s.FeedName, s.Auth
	d.Format = "none"  // only the summary line, which the demo prints instead of the feed handler's
	d.MetricsAddr = "" // the feed handler serves this process's metrics
	demo, err := subapp.New(d, log.With().Str("role", "demo-subscriber").Logger(), stdout)
	if err != nil {
		return nil, err
	}
	done := make(chan int, 1)
	go func() { done <- demo.Run(context.Background()) }()
	return done, nil
}
