package fh

import (
	"fmt"
	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/pace"
	"github.com/tickcast/tickcast/seal"
	"github.com/tickcast/tickcast/ud/udp"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/metricsrv"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/shm"
)

// Config is a feed handler's configuration. A zero field takes the default
// its comment names; fields without a default are off when zero.
type Config struct {
	// Source is the upstream feed; required by New.
	Source feed.Source
	// SourceName names the source in logs and, cut at its first ':', in the
	// source label of the publisher's metrics ("itch:/data/day.gz" gives
	// itch); default "synthetic".
	SourceName string

	// Channels is the number of channels (multicast streams) instruments
	// are spread over, 1..config.MaxChannels; default 4.
	Channels int
	// GroupA is the A-line multicast group of channel 0; channel c uses the
	// address plus c. Default 239.77.0.1:31001.
	GroupA netip.AddrPort
	// GroupB is the B-line group of channel 0; the zero value sends no B
	// line.
	GroupB netip.AddrPort
	// Line is the line the feed handler publishes: "a" (GroupA), "b"
	// (GroupB, which it then requires) or "both", the default. Two feed
	// handlers on two hosts that publish line a and line b of the same
	// sessions (SessionRecord) make a feed that loses nothing when one host
	// dies.
	Line string
	// Interface is the IPv4 address of the interface to send on; default
	// 127.0.0.1.
	Interface netip.Addr
	// Transport is "udp" (multicast, the default) or "rdma" (RDMA UD
	// multicast; a binary built with -tags rdma, Interface the RDMA
	// netdev's address).
	Transport string
	// TTL is the multicast TTL, 0..255; 0 keeps packets on this host.
	TTL int
	// Unsealed sends data packets without a seal and serves no keys. By
	// default every data packet is sealed (package seal) and the keys are
	// served over NATS, so that subscribers drop what does not verify
	// (docs/security.md).
	Unsealed bool
	// KeyRotation is how long one key seals, seal.MinRotation..
	// seal.MaxRotation; default seal.DefaultRotation.
	KeyRotation time.Duration
	// Encrypt are the channels whose messages are encrypted as well as
	// authenticated (package seal): a host on the network that is not
	// given the keys learns nothing but the framing. Not with Unsealed.
	Encrypt []int
	// KeyAudit is the file every key reply is appended to, a JSON line
	// each (natskeys.Grant: time, user, channel, session, epochs, or why
	// refused), for UsageReport; empty: they go to the log.
	KeyAudit string
	// GSO sends each channel's runs of full packets by segmentation
	// offload (UDP GSO) where the kernel takes it, with full packets padded
	// to MaxDatagram (docs/wire-format.md, "Padding"; udp.Config.GSO says
	// what a capture on the sending host then shows). Off, every datagram
	// goes with a write of its own.
	GSO bool
	// MaxDatagram is the largest datagram in bytes; default 1472 with udp,
	// the port's active MTU with rdma.
	MaxDatagram int
	// MaxDelay is the longest a message waits in a partly filled packet
	// while input keeps coming; default 50µs.
	MaxDelay time.Duration
	// Heartbeat is the idle time after which a channel sends a heartbeat;
	// default 100ms.
	Heartbeat time.Duration
	// SendBatch is the most packets per channel sent in one sendmmsg call,
	// 1..1024; default 16.
	SendBatch int

	// Rate is messages per second; 0 publishes as fast as possible.
	Rate float64
	// Speed, when positive, paces the source at the recorded times of its
	// messages (feed.Header.ExchangeNs, relative to the first message)
	// times Speed, instead of at Rate, which must then be 0 (package pace,
	// NewSpeed). 0: pace by Rate.
	Speed float64
	// PaceSpin is how long before each message the pacer spins instead of
	// sleeping; 0 means pace.DefaultSpin, a negative value always spins.
	PaceSpin time.Duration
	// Pipeline reads the source on a goroutine of its own, ahead of the
	// publisher (feed.Prefetch), so decoding and the books run beside
	// sequencing and sending, on another core, and applies each channel's
	// snapshot state on a goroutine of its own too
	// (recovery.Channel.ApplyInBackground). It must not be set with Rate
	// or Speed: a paced run reads each message when it is due.
	Pipeline bool
	// Duration ends the session after this long; 0: when the source ends.
	Duration time.Duration
	// Linger is how long recovery is served after end of session, the end
	// being repeated every Heartbeat; 0: not at all.
	Linger time.Duration
	// LingerOnStop lingers also when Run's context is cancelled (the
	// program was asked to stop): the end of session goes out, and
	// subscribers still recover the session's tail, until Linger has passed
	// or Abort is called. Without it a stop ends Run at once.
	LingerOnStop bool

	// FeedName names the feed in the NATS subjects (tickcast.FEED.*);
	// default recovery.DefaultFeed.
	FeedName string
	// NATSURL is an external NATS server or cluster to serve recovery on;
	// empty runs an embedded server on NATSListen.
	NATSURL string
	// NATSListen is the embedded server's host:port (port 0: a free port);
	// default 127.0.0.1:4222.
	NATSListen string
	// NATSUsers are the embedded server's users; none: no authentication.
	// Not allowed with NATSURL.
	NATSUsers []natsconn.User
	// NATS are the options of the feed handler's own NATS connection
	// (credentials, TLS).
	NATS natsconn.Flags
	// NATSLive also publishes every datagram on tickcast.FEED.live.CH,
	// a channel's only while it is wanted: while a consumer announces
	// demand on tickcast.FEED.demand.CH (ud/natslive does), or, with the
	// embedded server, while anyone subscribes (docs/recovery.md).
	NATSLive bool
	// NATSLiveAlways, with NATSLive, publishes every datagram on the live
	// subjects whether or not anyone wants it: for consumers on an
	// external server that cannot announce demand. It costs the host's
	// multicast subscribers latency at high rates.
	NATSLiveAlways bool
	// SessionRecord is whether the feed handler shares its sessions with
	// the other feed handlers of the feed through the session record, a
	// JetStream key-value entry (bucket natsconn.SessionBucket, key
	// FeedName) on the NATS server or cluster: RecordOn, RecordOff, or
	// RecordAuto, the default, which uses it when NATSURL names a server
	// with JetStream. With it, the first feed handler of a feed writes the
	// record; a peer that finds a feed handler publishing the record's
	// sessions joins them, replays its input silently up to the peer's
	// position and then publishes too; when none publishes them any more, a
	// new start writes new sessions that sort after them (compare-and-set).
	// Recovery is then served in a queue group (RecoveryQueue, default
	// "tickcast-" + FeedName), so that one feed handler answers each
	// request. docs/operations.md, "Hot-hot feed handlers".
	SessionRecord string
	// Identity returns the identity of the input, which every feed handler
	// of a session record must share (same seed and instruments, or the
	// same file); called only when the record is used. nil: SourceName.
	Identity func() (string, error)
	// PeerTimeout is how long a question to the feed's peers (their session
	// and position) waits for an answer; default 500 ms.
	PeerTimeout time.Duration

	// Archive records every channel's packets, as sent, to the feed's
	// archive stream in JetStream (package archive, docs/archive.md): on
	// the embedded server, which then runs JetStream with its file store
	// in ArchiveDir, or on the server or cluster NATSURL names.
	Archive bool
	// ArchiveDir is the embedded server's JetStream directory with
	// Archive; default DefaultArchiveDir. Not used with NATSURL.
	ArchiveDir string
	// ArchiveReplicas is the archive stream's copies; 0 means one per
	// server the connection knows, up to 3.
	ArchiveReplicas int
	// ArchiveMaxAge drops records older than this; 0 keeps them until
	// ArchiveMaxBytes.
	ArchiveMaxAge time.Duration
	// ArchiveMaxBytes drops the oldest records beyond this size; 0 means
	// no limit but the server's (the disk).
	ArchiveMaxBytes int64
	// ArchiveCompress has JetStream store the records compressed (S2).
	ArchiveCompress bool

	// SHM also writes every packet of line A, as sent (sealed), to a
	// shared-memory ring per channel in SHMDir, for subscribers on this
	// host (package ud/shm); multicast goes on as before.
	SHM bool
	// SHMDir is the ring files' directory; default shm.DefaultDir
	// (/dev/shm).
	SHMDir string
	// SHMSlots is each ring's size in packets, a power of two: how far a
	// local subscriber may fall behind before it loses packets; default
	// shm.DefaultSlots.
	SHMSlots int
	// SHMMode is the ring files' permission; default shm.DefaultFileMode
	// (0640: readers that wait on the ring need write permission, 0660).
	SHMMode os.FileMode

	// StoreMessages is the retransmission store limit per channel in
	// messages; default 1,048,576.
	StoreMessages int
	// StoreBytes is the retransmission store limit per channel in message
	// bytes, at least 65535; default 64 MiB.
	StoreBytes int
	// MaxRetransmit is the most messages one retransmit request may ask
	// for, 1..mold.MaxCount; default 10,000.
	MaxRetransmit int
	// RateLimit is the messages per second one requester may be sent;
	// default 1,000,000.
	RateLimit float64
	// RepairWindow is how long after publishing a repair the recovery
	// server answers requests for the same range with a pointer to it
	// (recovery.ServerConfig.RepairWindow); default 250 ms.
	RepairWindow time.Duration
	// RecoveryQueue, if set, is the NATS queue group the recovery server
	// takes requests in, shared with the other feed handlers of the same
	// sessions (recovery.ServerConfig.Queue); empty: a plain subscription.
	RecoveryQueue string

	// Watch makes the feed handler listen on the groups it publishes to
	// (udp) and count the packets of another session there: another
	// publisher's. Each such source is logged at error level once per
	// channel, and counted in the summary (foreign_packets) and the metrics
	// (tickcast_publisher_foreign_packets_total). The kernel drops the
	// feed handler's own packets before they reach it (a socket filter on
	// the channel's session), so a publisher of its own session is not
	// seen. It is off by default: every datagram sent then goes to one
	// more socket on the host, which cost the subscribers on the host
	// about 40% at p50 and twice their p99 at 100,000 msg/s
	// (docs/operations.md, "Competing publishers").
	Watch bool

	// MetricsAddr serves Prometheus metrics on http://ADDR/metrics (port 0:
	// a free port); empty serves none.
	MetricsAddr string
	// Collectors are more metrics served beside the feed handler's own: a
	// live source's counters (tickprom.NewUpstreamCollector).
	Collectors []prometheus.Collector
	// Log receives the feed handler's log lines; the zero Logger logs
	// nothing.
	Log zerolog.Logger

	// wrapSender, when set, wraps the transport's senders (tests: a
	// sender that fails for a while, as an RDMA port that went down).
	wrapSender func(ud.NewSenderFunc) ud.NewSenderFunc
}

// Defaults of Config's fields.
var (
	DefaultGroupA    = netip.MustParseAddrPort("239.77.0.1:31001")
	DefaultInterface = netip.MustParseAddr("127.0.0.1")
)

// Defaults of Config's fields.
const (
	DefaultChannels      = 4
	DefaultMaxDatagram   = udp.DefaultMaxDatagram
	DefaultMaxDelay      = tickcast.DefaultMaxDelay
	DefaultHeartbeat     = tickcast.DefaultHeartbeat
	DefaultSendBatch     = tickcast.DefaultSendBatch
	DefaultNATSListen    = "127.0.0.1:4222"
	DefaultStoreMessages = recovery.DefaultMaxMessages
	DefaultStoreBytes    = recovery.DefaultMaxBytes
	DefaultMaxRetransmit = recovery.DefaultMaxRetransmit
	DefaultRateLimit     = recovery.DefaultRateLimit
	DefaultRepairWindow  = recovery.DefaultRepairWindow
	DefaultLine          = "both"
	DefaultPeerTimeout   = 500 * time.Millisecond
)

// ConfigError is a Config field whose value New cannot take: the error type
// of every configuration in the module.
type ConfigError = config.Error

var check = config.Checker{Pkg: "fh", Struct: "Config"}

func invalid(field string, value any, format string, args ...any) error {
	return check.Invalid(field, value, format, args...)
}

// errNoSource is the Reason of New's *ConfigError when Config.Source is nil.
const errNoSource = "a feed handler needs a source"

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.Channels, DefaultChannels)
	config.Default(&c.SendBatch, DefaultSendBatch)
	config.Default(&c.StoreMessages, DefaultStoreMessages)
	config.Default(&c.StoreBytes, DefaultStoreBytes)
	config.Default(&c.MaxRetransmit, DefaultMaxRetransmit)
	config.Default(&c.SourceName, "synthetic")
	config.Default(&c.ArchiveDir, DefaultArchiveDir)
	config.Default(&c.SHMDir, shm.DefaultDir)
	config.Default(&c.SHMSlots, shm.DefaultSlots)
	config.Default(&c.SHMMode, shm.DefaultFileMode)
	if !c.GroupA.IsValid() {
		c.GroupA = DefaultGroupA
	}
	if !c.Interface.IsValid() {
		c.Interface = DefaultInterface
	}
	config.Default(&c.Transport, "udp")
	if c.MaxDatagram == 0 && c.Transport == "udp" {
		c.MaxDatagram = DefaultMaxDatagram
	}
	config.Default(&c.MaxDelay, DefaultMaxDelay)
	config.Default(&c.PaceSpin, pace.DefaultSpin)
	config.Default(&c.Heartbeat, DefaultHeartbeat)
	config.Default(&c.FeedName, recovery.DefaultFeed)
	config.Default(&c.NATSListen, DefaultNATSListen)
	config.Default(&c.RateLimit, DefaultRateLimit)
	config.Default(&c.RepairWindow, DefaultRepairWindow)
	config.Default(&c.Line, DefaultLine)
	config.Default(&c.SessionRecord, RecordAuto)
	config.Default(&c.PeerTimeout, DefaultPeerTimeout)
	config.Default(&c.KeyRotation, seal.DefaultRotation)
	return c
}

// Validate reports the first field of c (after defaults) that New would
// refuse, as a *ConfigError, so that a program can check its settings before
// it opens its source. It does not look at Source, which New requires.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.validatePublishing(); err != nil {
		return err
	}
	return c.validateRecovery()
}

// validatePublishing checks the fields of the publishing path.
func (c *Config) validatePublishing() error {
	minDatagram := mold.HeaderLen + mold.BlockHdrLen + feed.MaxLen
	if err := check.Channels("Channels", c.Channels); err != nil {
		return err
	}
	switch {
	case c.Transport != "udp" && c.Transport != "rdma":
		return invalid("Transport", c.Transport, "want udp or rdma")
	case c.Transport == "rdma" && !rdma.Available:
		return invalid("Transport", c.Transport, "%v", rdma.ErrNotBuilt)
	case !c.Interface.Is4():
		return invalid("Interface", c.Interface, "not an IPv4 address")
	case c.TTL < 0 || c.TTL > 255:
		return invalid("TTL", c.TTL, "want 0..255")
	case c.MaxDatagram != 0 && (c.MaxDatagram < minDatagram || c.MaxDatagram > 65507):
		return invalid("MaxDatagram", c.MaxDatagram, "want %d..65507", minDatagram)
	case c.MaxDelay < 0:
		return invalid("MaxDelay", c.MaxDelay, "must not be negative")
	case c.Heartbeat < 0:
		return invalid("Heartbeat", c.Heartbeat, "must not be negative")
	case c.SendBatch < 1 || c.SendBatch > 1024:
		return invalid("SendBatch", c.SendBatch, "want 1..1024")
	case c.Rate < 0:
		return invalid("Rate", c.Rate, "must not be negative")
	case c.Speed < 0:
		return invalid("Speed", c.Speed, "must not be negative")
	case c.Pipeline && (c.Rate > 0 || c.Speed > 0):
		return invalid("Pipeline", c.Pipeline, "applies to unpaced runs only (Rate and Speed 0): a paced run reads each message when it is due")
	case c.Speed > 0 && c.Rate > 0:
		return invalid("Speed", c.Speed, "cannot be combined with Rate %v: pace by one or the other", c.Rate)
	case c.Duration < 0:
		return invalid("Duration", c.Duration, "must not be negative")
	case c.Linger < 0:
		return invalid("Linger", c.Linger, "must not be negative")
	case c.Line != "a" && c.Line != "b" && c.Line != "both":
		return invalid("Line", c.Line, "want a, b or both")
	case c.Line == "b" && !c.GroupB.IsValid():
		return invalid("Line", c.Line, "publishing line b needs GroupB")
	}
	return nil
}

// validateRecovery checks the fields of the stores, recovery, NATS and
// metrics.
func (c *Config) validateRecovery() error {
	switch {
	case c.StoreMessages < 1:
		return invalid("StoreMessages", c.StoreMessages, "must be positive")
	case c.StoreBytes < 65535:
		return invalid("StoreBytes", c.StoreBytes, "at least 65535, so any message fits")
	case storesTooBig(c):
		need := int64(c.Channels) * recovery.StoreBytes(recovery.StoreConfig{MaxMessages: c.StoreMessages, MaxBytes: c.StoreBytes})
		return invalid("StoreBytes", c.StoreBytes, "with stores of %d messages, %d channels take %d MiB at start, more than this host's %d MiB",
			c.StoreMessages, c.Channels, need>>20, recovery.HostMemory()>>20)
	case c.MaxRetransmit < 1 || c.MaxRetransmit > mold.MaxCount:
		return invalid("MaxRetransmit", c.MaxRetransmit, "want 1..%d", mold.MaxCount)
	case c.RateLimit < 0:
		return invalid("RateLimit", c.RateLimit, "must not be negative")
	case c.RepairWindow < 0 || c.RepairWindow > time.Minute:
		return invalid("RepairWindow", c.RepairWindow, "want 0..1m")
	case strings.ContainsAny(c.RecoveryQueue, " \t\r\n"):
		return invalid("RecoveryQueue", c.RecoveryQueue, "a NATS queue group name has no white space")
	case c.SessionRecord != RecordAuto && c.SessionRecord != RecordOn && c.SessionRecord != RecordOff:
		return invalid("SessionRecord", c.SessionRecord, "want auto, on or off")
	case c.SessionRecord == RecordOn && c.NATSURL == "":
		return invalid("SessionRecord", c.SessionRecord, "the session record is shared on an external NATS server or cluster with JetStream (NATSURL); the embedded server has none")
	case len(c.Encrypt) > 0 && c.Unsealed:
		return invalid("Encrypt", c.Encrypt, "needs the packets sealed (Unsealed false): the keys that encrypt are the seal's")
	case len(c.Encrypt) > 0 && slices.Max(c.Encrypt) >= c.Channels:
		return invalid("Encrypt", c.Encrypt, "channel %d: the feed has %d", slices.Max(c.Encrypt), c.Channels)
	case c.KeyRotation < seal.MinRotation || c.KeyRotation > seal.MaxRotation:
		return invalid("KeyRotation", c.KeyRotation, "want %v..%v", seal.MinRotation, seal.MaxRotation)
	case c.PeerTimeout < 0:
		return invalid("PeerTimeout", c.PeerTimeout, "must not be negative")
	case len(c.NATSUsers) > 0 && c.NATSURL != "":
		return invalid("NATSUsers", len(c.NATSUsers), "configures the embedded server, which NATSURL replaces")
	case c.NATSLiveAlways && !c.NATSLive:
		return invalid("NATSLiveAlways", c.NATSLiveAlways, "needs NATSLive: the live feed is off")
	case c.ArchiveReplicas < 0 || c.ArchiveReplicas > 5:
		return invalid("ArchiveReplicas", c.ArchiveReplicas, "want 1..5 (0: one per server known, up to 3)")
	case c.ArchiveMaxAge < 0:
		return invalid("ArchiveMaxAge", c.ArchiveMaxAge, "must not be negative (0: no limit)")
	case c.ArchiveMaxBytes < 0:
		return invalid("ArchiveMaxBytes", c.ArchiveMaxBytes, "must not be negative (0: no limit)")
	case c.SHM && (c.SHMSlots < 1 || c.SHMSlots&(c.SHMSlots-1) != 0 || c.SHMSlots > shm.MaxSlots):
		return invalid("SHMSlots", c.SHMSlots, "want a power of two up to %d", shm.MaxSlots)
	case c.SHM && c.MaxDatagram > shm.MaxDatagramLimit:
		return invalid("MaxDatagram", c.MaxDatagram, "a shared-memory ring (SHM) takes packets of at most %d bytes", shm.MaxDatagramLimit)
	case c.Archive && c.NATSURL == "" && strings.TrimSpace(c.ArchiveDir) == "":
		return invalid("ArchiveDir", c.ArchiveDir, "the embedded server's JetStream needs a directory for the archive")
	}
	if err := recovery.ValidateFeed(c.FeedName); err != nil {
		return invalid("FeedName", c.FeedName, "%v", err)
	}
	if _, _, err := splitListen(c.NATSListen); err != nil && c.NATSURL == "" {
		return invalid("NATSListen", c.NATSListen, "%v", err)
	}
	if err := metricsrv.CheckAddr(c.MetricsAddr); err != nil {
		return invalid("MetricsAddr", c.MetricsAddr, "%v", err)
	}
	return nil
}

// splitListen splits the embedded NATS server's host:port.
func splitListen(listen string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(listen)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: want host:port", listen)
	}
	return host, port, nil
}

// Defaults returns the configuration New runs with when every field is left
// zero (Source aside): each field set to its default.
func Defaults() Config { return Config{}.withDefaults() }

// storesTooBig reports whether the channels' retransmission stores, each
// allocated at its limits when the feed handler starts, would take more
// than the host's memory.
func storesTooBig(c *Config) bool {
	host := recovery.HostMemory()
	per := recovery.StoreBytes(recovery.StoreConfig{MaxMessages: c.StoreMessages, MaxBytes: c.StoreBytes})
	return host > 0 && c.Channels > 0 && per > host/int64(c.Channels)
}
