package upstream

import (
	"net/netip"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/seqgap"
)

// Config configures a Feed. Zero fields take the defaults.
type Config struct {
	// A is the A line's group and port. Required.
	A netip.AddrPort
	// B is the B line's group and port (zero: no B line).
	B netip.AddrPort
	// Interface is the IPv4 address of the interface that joins the groups
	// and sends the re-requests (zero: 127.0.0.1).
	Interface netip.Addr
	// Rerequest is the exchange's re-request server (zero: none; gaps are
	// then lost after GapDeadline unless the other line fills them).
	Rerequest netip.AddrPort
	// MaxCount is the most messages one request asks for, 1..mold.MaxCount.
	// Default DefaultMaxCount.
	MaxCount int
	// Timeout is how long a request waits for its answer before it is sent
	// again. Default DefaultTimeout.
	Timeout time.Duration
	// Retries is how many times an unanswered request is sent again before
	// it is given up (its range is then lost). Default DefaultRetries; -1
	// for none.
	Retries int
	// InFlight is the most requests outstanding at once. Default
	// DefaultInFlight.
	InFlight int
	// GapDeadline is how long after it was detected a gap still open is
	// declared lost, however the requests stand (seqgap.Config.LostAfter).
	// Default DefaultGapDeadline.
	GapDeadline time.Duration
	// StartFrom, when more than 1, starts the stream at that sequence
	// instead of 1: what lies before it is reported lost (reason
	// seqgap.LossSkipped), not asked for.
	StartFrom uint64
	// StaleAfter is how long without any packet, heartbeats included,
	// makes the feed silent (seqgap.EventStale), and then how often the
	// tracker asks the re-request server what follows the last message
	// known. Default DefaultStaleAfter.
	StaleAfter time.Duration
	// IdleWait is the longest Next waits for a message before it returns
	// feed.ErrIdle. Default DefaultIdleWait.
	IdleWait time.Duration
	// Window is the tracker's window in messages (seqgap.Config.Window).
	// Default DefaultWindow.
	Window int
	// OnEvent, when set, is called with each of the tracker's events (gaps,
	// losses with their range and reason, sessions, a silent feed); ev is
	// valid only during the call. It runs on Next's goroutine.
	OnEvent func(ev *seqgap.Event)
	// OnError, when set, is called with each datagram dropped as malformed
	// (*DatagramError) and each re-request given up (*GiveUpError). It runs
	// on Next's goroutine.
	OnError func(err error)
	// Clock returns the time in ns (nil: the wall clock).
	Clock func() int64
}

// Defaults of a Config.
const (
	// DefaultMaxCount is the default Config.MaxCount. An exchange answers a
	// request with at most one packet's worth (about 40 ITCH messages); a
	// larger count lets it answer more where it does.
	DefaultMaxCount = 1000
	// DefaultTimeout is the default Config.Timeout.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultRetries is the default Config.Retries.
	DefaultRetries = 3
	// DefaultInFlight is the default Config.InFlight.
	DefaultInFlight = 16
	// DefaultGapDeadline is the default Config.GapDeadline.
	DefaultGapDeadline = 5 * time.Second
	// DefaultStaleAfter is the default Config.StaleAfter: three heartbeat
	// intervals of an exchange, which heartbeats every second.
	DefaultStaleAfter = 3 * time.Second
	// DefaultIdleWait is the default Config.IdleWait: well under a
	// heartbeat interval.
	DefaultIdleWait = 10 * time.Millisecond
	// DefaultWindow is the default Config.Window: 2^18 messages (16 MiB of
	// slots).
	DefaultWindow = 1 << 18
)

var check = config.Checker{Pkg: "upstream", Struct: "Config"}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.MaxCount, DefaultMaxCount)
	config.Default(&c.Timeout, DefaultTimeout)
	config.Default(&c.Retries, DefaultRetries)
	config.Default(&c.InFlight, DefaultInFlight)
	config.Default(&c.GapDeadline, DefaultGapDeadline)
	config.Default(&c.IdleWait, DefaultIdleWait)
	config.Default(&c.StaleAfter, DefaultStaleAfter)
	config.Default(&c.Window, DefaultWindow)
	if !c.Interface.IsValid() {
		c.Interface = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	return c
}

// validate checks a Config whose defaults are set.
func (c Config) validate() error {
	switch {
	case !c.A.IsValid() || !c.A.Addr().Is4() || !c.A.Addr().IsMulticast() || c.A.Port() == 0:
		return check.Invalid("A", c.A, "want an IPv4 multicast group and port")
	case c.B.IsValid() && (!c.B.Addr().Is4() || !c.B.Addr().IsMulticast() || c.B.Port() == 0):
		return check.Invalid("B", c.B, "want an IPv4 multicast group and port, or none")
	case c.B.IsValid() && c.B == c.A:
		return check.Invalid("B", c.B, "the same group and port as A")
	case c.Rerequest.IsValid() && (!c.Rerequest.Addr().Is4() || c.Rerequest.Port() == 0):
		return check.Invalid("Rerequest", c.Rerequest, "want an IPv4 address and port")
	case c.MaxCount < 1 || c.MaxCount > maxCount:
		return check.Invalid("MaxCount", c.MaxCount, "want 1..%d", maxCount)
	case c.Timeout < time.Millisecond:
		return check.Invalid("Timeout", c.Timeout, "want at least 1ms")
	case c.InFlight < 1:
		return check.Invalid("InFlight", c.InFlight, "want 1 or more")
	case c.GapDeadline < 0:
		return check.Invalid("GapDeadline", c.GapDeadline, "negative")
	case c.StaleAfter < 0:
		return check.Invalid("StaleAfter", c.StaleAfter, "negative")
	case c.IdleWait < time.Millisecond:
		return check.Invalid("IdleWait", c.IdleWait, "want at least 1ms")
	case c.Window < 2 || c.Window&(c.Window-1) != 0 || c.Window > seqgap.MaxWindow:
		return check.Invalid("Window", c.Window, "want a power of two in 2..%d", seqgap.MaxWindow)
	}
	return nil
}
