package udp

import (
	"github.com/tickcast/tickcast/config"
	"net/netip"
	"strconv"

	"github.com/tickcast/tickcast/ud"
)

// Mode is how a Receiver receives: ud.Blocking, ud.BusyPoll, ud.Direct or
// ud.DirectSpin.
type Mode = ud.Mode

// Receive modes, as in package ud.
const (
	Blocking   = ud.Blocking
	BusyPoll   = ud.BusyPoll
	Direct     = ud.Direct
	DirectSpin = ud.DirectSpin
)

// Defaults applied to Config fields left at their zero value, and limits.
const (
	// DefaultBatch is the default Config.Batch: datagrams per system call.
	DefaultBatch = 32
	// DefaultRingSlots is the default Config.RingSlots.
	DefaultRingSlots = 4096
	// DefaultMaxDatagram is the default Config.MaxDatagram: a 1500-byte
	// Ethernet MTU less the IPv4 (20) and UDP (8) headers.
	DefaultMaxDatagram = 1472
	// DefaultRcvBuf is the receive buffer requested when Config.RcvBuf is
	// 0 and net.core.rmem_max is smaller (see Config.RcvBuf).
	DefaultRcvBuf = 32 << 20
	// MaxDatagramLimit is the largest UDP payload IPv4 can carry.
	MaxDatagramLimit = 65507
	// MaxBatch is the kernel's limit on messages per sendmmsg/recvmmsg
	// (UIO_MAXIOV).
	MaxBatch = 1024
)

// Config describes one multicast line: the group and port, the local
// interface, and how the socket and the receive ring are sized. One Config
// serves both NewSender and NewReceiver; each ignores the fields that do not
// concern it. The zero value of every field except Group and Port selects a
// default (see each field), with one exception: CPU, whose zero value pins a
// BusyPoll receiver to CPU 0 — set it to -1 for no pinning.
type Config struct {
	// Group is the IPv4 multicast group (224.0.0.0/4) to send to or to
	// receive from. Required.
	Group netip.Addr
	// Port is the UDP destination port, 1–65535. Required.
	Port int
	// Interface is the IPv4 address of the local interface that sends
	// (IP_MULTICAST_IF) and joins the group (IP_ADD_MEMBERSHIP). Zero means
	// 127.0.0.1: the loopback interface, so nothing leaves the host unless
	// asked to.
	Interface netip.Addr
	// TTL is the IP time-to-live of sent datagrams, 0–255. Zero, the
	// default, keeps them on this host: the kernel delivers the looped-back
	// copy and discards the original.
	TTL int
	// DisableLoop turns IP_MULTICAST_LOOP off, so that receivers on the
	// sending host do not get the datagrams. Loop is on by default.
	DisableLoop bool
	// RcvBuf is the socket receive buffer size to request, in bytes. Zero
	// asks for as much as allowed: DefaultRcvBuf or net.core.rmem_max,
	// whichever is larger. A request above rmem_max is tried with
	// SO_RCVBUFFORCE (needs CAP_NET_ADMIN) and otherwise falls back to
	// SO_RCVBUF, which the kernel caps at rmem_max; a request within rmem_max
	// uses SO_RCVBUF. RecvStats.RcvBuf reports what getsockopt(SO_RCVBUF)
	// returns afterwards, which on Linux is twice the granted request: the
	// kernel doubles it to leave room for its per-packet bookkeeping.
	RcvBuf int
	// Batch is the most datagrams one sendmmsg or recvmmsg call moves,
	// 1–MaxBatch. Zero means DefaultBatch.
	Batch int
	// RingSlots is the number of receive slots, a power of two. Zero means
	// DefaultRingSlots.
	RingSlots int
	// MaxDatagram is the largest datagram payload, 1–MaxDatagramLimit bytes:
	// Send rejects longer ones, and it is the size of each receive slot
	// (longer datagrams arriving are dropped and counted in
	// RecvStats.Truncated). Zero means DefaultMaxDatagram, which fits a
	// 1500-byte Ethernet MTU; loopback (MTU 65536) allows more.
	MaxDatagram int
	// Mode is how datagrams are received: by a receive loop of the
	// Receiver's own that sleeps (Blocking, the default) or spins
	// (BusyPoll), or by the consumer through Fill (Direct, DirectSpin).
	Mode Mode
	// Notifier, if set, is signalled after every batch a Blocking or
	// BusyPoll Receiver publishes, so that one consumer can wait on many
	// receivers. A Direct Receiver registers its socket with it instead
	// (Notifier.Watch), and requires it.
	Notifier *ud.Notifier
	// Backoff makes an idle BusyPoll receive loop sleep in the kernel for
	// about 50 µs after a run of empty polls, instead of only yielding to
	// the Go scheduler: for hosts with fewer cores than spinning threads,
	// where spinning would starve other threads (a publisher, the other
	// receive loops) of the CPU they need. It costs up to that much latency
	// on a line that was idle.
	Backoff bool
	// CPU is the CPU a BusyPoll receive thread is pinned to with
	// sched_setaffinity, or -1 for no pinning. Ignored in Blocking mode.
	CPU int
	// DropPrefix, if set (at most MaxDropPrefix bytes), makes the kernel
	// drop every datagram whose payload starts with these bytes before it
	// reaches the receiver, through a classic BPF socket filter: no copy,
	// no wake-up, nothing counted. A receiver that only wants the
	// datagrams of others (a feed handler watching its own groups for
	// another publisher's session) costs almost nothing while there are
	// none.
	DropPrefix []byte
	// GSO makes a Sender send runs of equal-length datagrams by
	// segmentation offload (UDP GSO, see Sender) where the kernel takes it,
	// instead of every datagram with a write of its own. A capture taken
	// on the sending host (lo, or a NIC that segments in hardware) then
	// shows each run as one datagram; the receivers, a tap on the wire and
	// a capture on a receiving host see the datagrams.
	GSO bool
	// GRO makes a Receiver ask for UDP GRO (UDP_GRO) where the kernel has
	// it: a run a GSO sender wrote in one call then reaches the socket as
	// one buffer, not segmented on the way, and the receiver cuts it into
	// its datagrams, one copy each into the ring's slots. The kernel's
	// work per datagram, which on loopback the sender pays for, mostly
	// goes (docs/bench.md, "UDP GRO"). Datagrams from senders without GSO
	// arrive one by one as before, with the same copy. Each receiver
	// holds Batch buffers of 64 KiB for it. RecvStats.Coalesced counts the
	// datagrams that arrived coalesced; a kernel without UDP GRO (before
	// Linux 5.0) receives as without the setting.
	GRO bool
}

// MaxDropPrefix bounds Config.DropPrefix.
const MaxDropPrefix = 64

// ConfigError reports a Config field with an invalid value: the module's
// configuration error, config.Error.
type ConfigError = config.Error

var check = config.Checker{Pkg: "udp", Struct: "Config"}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if !c.Interface.IsValid() {
		c.Interface = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	config.Default(&c.Batch, DefaultBatch)
	config.Default(&c.RingSlots, DefaultRingSlots)
	config.Default(&c.MaxDatagram, DefaultMaxDatagram)
	return c
}

// validate checks every field of a Config whose defaults are applied.
func (c Config) validate() error {
	bad := func(field string, value any, reason string) error {
		return check.Invalid(field, value, "%s", reason)
	}
	switch {
	case !c.Group.IsValid():
		return bad("Group", c.Group, "required")
	case !c.Group.Is4() || !c.Group.IsMulticast():
		return bad("Group", c.Group, "not an IPv4 multicast address (224.0.0.0/4)")
	case c.Port < 1 || c.Port > 65535:
		return bad("Port", c.Port, "not in 1–65535")
	case !c.Interface.Is4():
		return bad("Interface", c.Interface, "not an IPv4 address")
	case c.Interface.IsMulticast() || c.Interface.IsUnspecified():
		return bad("Interface", c.Interface, "not a unicast interface address")
	case c.TTL < 0 || c.TTL > 255:
		return bad("TTL", c.TTL, "not in 0–255")
	case c.RcvBuf < 0:
		return bad("RcvBuf", c.RcvBuf, "negative")
	case c.Batch < 1 || c.Batch > MaxBatch:
		return bad("Batch", c.Batch, "not in 1–"+strconv.Itoa(MaxBatch))
	case c.RingSlots < 1 || c.RingSlots&(c.RingSlots-1) != 0 || c.RingSlots > ud.MaxRingSlots:
		return bad("RingSlots", c.RingSlots, "not a power of two between 1 and "+strconv.Itoa(ud.MaxRingSlots))
	case c.MaxDatagram < 1 || c.MaxDatagram > MaxDatagramLimit:
		return bad("MaxDatagram", c.MaxDatagram, "not in 1–"+strconv.Itoa(MaxDatagramLimit))
	case c.Mode < Blocking || c.Mode > DirectSpin:
		return bad("Mode", c.Mode, "not Blocking, BusyPoll, Direct or DirectSpin")
	case c.CPU < -1 || c.CPU >= cpuSetSize:
		return bad("CPU", c.CPU, "not -1 (no pinning) or a CPU index below "+strconv.Itoa(cpuSetSize))
	case len(c.DropPrefix) > MaxDropPrefix:
		return bad("DropPrefix", len(c.DropPrefix), "longer than "+strconv.Itoa(MaxDropPrefix)+" bytes")
	}
	return nil
}
