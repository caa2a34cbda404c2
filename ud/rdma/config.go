package rdma

import (
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/ud"
)

// Mode is how a Receiver receives (Config.Mode).
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
	// DefaultRingSlots is the default Config.RingSlots.
	DefaultRingSlots = 1024
	// DefaultSendSlots is the default Config.SendSlots.
	DefaultSendSlots = 256
	// DefaultBatch is the default Config.Batch.
	DefaultBatch = 32
	// DefaultMaxInline is the default Config.MaxInline.
	DefaultMaxInline = 256
	// DefaultJoinTimeout is the default Config.JoinTimeout.
	DefaultJoinTimeout = 5 * time.Second
	// DefaultRebuildPoll is the default Config.RebuildPoll.
	DefaultRebuildPoll = 100 * time.Millisecond
	// MaxBatch is the largest Config.Batch.
	MaxBatch = 256
	// GRHLen is the Global Route Header space at the start of every UD
	// receive buffer, which the receive slots skip.
	GRHLen = 40
	// MulticastQPN is the destination QP number of a multicast send.
	MulticastQPN = 0xFFFFFF
)

// Errors. The errors returned by this package wrap these, so that callers
// can tell them apart with errors.Is.
var (
	// ErrNotBuilt means the binary was built without RDMA support.
	ErrNotBuilt = errors.New("rdma: this binary was built without RDMA support: " +
		"rebuild on Linux with CGO_ENABLED=1 and -tags rdma " +
		"(build needs the Debian packages libibverbs-dev and librdmacm-dev; " +
		"running needs libibverbs1, librdmacm1 and ibverbs-providers)")
	// ErrNoDevice means no RDMA device serves the interface address (or
	// the kernel has no RDMA support at all).
	ErrNoDevice = errors.New("no RDMA device for this interface address")
	// ErrPortNotActive means the device port behind the interface is not
	// in the ACTIVE state (link down, or not yet up).
	ErrPortNotActive = errors.New("RDMA port is not ACTIVE")
	// ErrTooLarge means a datagram exceeds the port's active MTU (or
	// Config.MaxDatagram if smaller).
	ErrTooLarge = errors.New("datagram larger than the RDMA port's active MTU")
	// ErrJoin means the multicast join failed or timed out.
	ErrJoin = errors.New("multicast join failed")
)

// Config describes one multicast line. One Config serves both NewSender and
// NewReceiver; each ignores the fields that do not concern it. Zero fields
// select defaults, except CPU, whose zero value pins a BusyPoll receiver to
// CPU 0 (set -1 for no pinning).
type Config struct {
	// Group is the IPv4 multicast group (224.0.0.0/4). Required.
	Group netip.Addr
	// Interface is the IPv4 address of the network interface whose RDMA
	// device (a RoCE NIC, an rxe Soft-RoCE device, an IPoIB port) carries
	// the line. Required: loopback has no RDMA device.
	Interface netip.Addr
	// MaxDatagram caps the datagram size below the port's active MTU. Zero
	// means the MTU; a value above the MTU is an error (ErrTooLarge).
	MaxDatagram int
	// RingSlots is the number of receive slots (and posted receive work
	// requests), a power of two. Zero means DefaultRingSlots.
	RingSlots int
	// SendSlots is the number of send slots (and the send queue depth).
	// Zero means DefaultSendSlots; it is raised to 2*Batch if smaller.
	SendSlots int
	// Batch is the most completions one poll takes and the most work
	// requests one post list carries, 1–MaxBatch. Zero means DefaultBatch.
	Batch int
	// MaxInline is the inline data size to ask the queue pair for; the
	// device may grant less (Sender.MaxInline reports it). Zero means
	// DefaultMaxInline; -1 disables inline sends.
	MaxInline int
	// Mode is how a Receiver receives: a receive loop that waits on the
	// completion channel (Blocking, the default) or spins (BusyPoll), or
	// no loop at all: the consumer's goroutine polls the completion queue
	// itself with Fill, and sleeps in the Notifier's epoll set on the
	// completion channel (Direct) or never sleeps (DirectSpin).
	Mode Mode
	// CPU is the CPU a BusyPoll receive thread is pinned to, or -1 for
	// none asked: the thread is then pinned to the CPUs of the device's
	// NUMA node when sysfs knows the node, and left alone when it does not
	// (numa_node -1). Ignored in Blocking mode.
	CPU int
	// JoinTimeout bounds the wait for the multicast join. Zero means
	// DefaultJoinTimeout.
	JoinTimeout time.Duration
	// Notifier, if set, is signalled after every batch a Receiver
	// publishes.
	Notifier *ud.Notifier
	// Logger receives a line for every device and rdma_cm event and every
	// rebuild of the endpoint. Nil means slog.Default().
	Logger *slog.Logger
	// RebuildPoll is how often an endpoint torn down by an event checks
	// whether its port is ACTIVE again. Zero means DefaultRebuildPoll.
	RebuildPoll time.Duration
}

// ConfigError reports a Config field with an invalid value: the module's
// configuration error, config.Error.
type ConfigError = config.Error

var check = config.Checker{Pkg: "rdma", Struct: "Config"}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.RingSlots, DefaultRingSlots)
	config.Default(&c.Batch, DefaultBatch)
	config.Default(&c.SendSlots, DefaultSendSlots)
	if c.SendSlots < 2*c.Batch {
		c.SendSlots = 2 * c.Batch
	}
	config.Default(&c.MaxInline, DefaultMaxInline)
	config.Default(&c.JoinTimeout, DefaultJoinTimeout)
	config.Default(&c.RebuildPoll, DefaultRebuildPoll)
	return c
}

// validate checks a Config whose defaults are set.
func (c Config) validate() error {
	bad := func(field string, value any, reason string) error {
		return check.Invalid(field, value, "%s", reason)
	}
	switch {
	case !c.Group.IsValid():
		return bad("Group", c.Group, "required")
	case !c.Group.Is4() || !c.Group.IsMulticast():
		return bad("Group", c.Group, "not an IPv4 multicast address (224.0.0.0/4)")
	case !c.Interface.IsValid():
		return bad("Interface", c.Interface, "required: the address of an interface with an RDMA device")
	case !c.Interface.Is4() || c.Interface.IsMulticast() || c.Interface.IsUnspecified():
		return bad("Interface", c.Interface, "not a unicast IPv4 interface address")
	case c.MaxDatagram < 0:
		return bad("MaxDatagram", c.MaxDatagram, "negative")
	case c.RingSlots < 2 || c.RingSlots&(c.RingSlots-1) != 0 || c.RingSlots > 1<<16:
		return bad("RingSlots", c.RingSlots, "not a power of two between 2 and 65536")
	case c.Batch < 1 || c.Batch > MaxBatch:
		return bad("Batch", c.Batch, "not in 1–"+strconv.Itoa(MaxBatch))
	case c.SendSlots > 1<<16:
		return bad("SendSlots", c.SendSlots, "more than 65536")
	case c.MaxInline < -1:
		return bad("MaxInline", c.MaxInline, "not -1 (no inline) or a size")
	case c.Mode != Blocking && c.Mode != BusyPoll && c.Mode != Direct && c.Mode != DirectSpin:
		return bad("Mode", c.Mode, "not Blocking, BusyPoll, Direct or DirectSpin")
	case c.CPU < -1 || c.CPU >= 1024:
		return bad("CPU", c.CPU, "not -1 (no pinning) or a CPU index below 1024")
	case c.JoinTimeout < 0:
		return bad("JoinTimeout", c.JoinTimeout, "negative")
	case c.RebuildPoll < 0:
		return bad("RebuildPoll", c.RebuildPoll, "negative")
	}
	return nil
}

// Device describes the RDMA device and port behind an interface address.
type Device struct {
	Name      string // device name, e.g. "mlx5_0" or "rxe0"
	Port      int    // port number, from 1
	State     string // port state as libibverbs names it, e.g. "PORT_ACTIVE"
	Active    bool   // the port is ACTIVE
	ActiveMTU int    // the port's active MTU in bytes: the largest UD message
	MaxMTU    int    // the largest MTU the port supports
}

// OpError is the error type of verbs and rdma_cm operations: it names the
// operation, the group and the interface.
type OpError struct {
	Op        string     // e.g. "rdma_bind_addr", "ibv_post_send"
	Group     netip.Addr // the multicast group (invalid for LookupDevice)
	Interface netip.Addr // the local interface address
	Err       error      // the cause; wraps one of the package's errors or a syscall.Errno
}

// Error returns "rdma <op> <group> on <interface>: <cause>".
func (e *OpError) Error() string {
	s := "rdma " + e.Op
	if e.Group.IsValid() {
		s += " " + e.Group.String()
	}
	return s + " on " + e.Interface.String() + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }
