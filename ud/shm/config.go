package shm

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/ud"
)

// Receive modes, as in package ud.
const (
	Blocking   = ud.Blocking
	BusyPoll   = ud.BusyPoll
	Direct     = ud.Direct
	DirectSpin = ud.DirectSpin
)

// Defaults applied to Config fields left at their zero value, and limits.
const (
	// DefaultDir is the default Config.Dir: the host's tmpfs, so the ring
	// lives in memory and never reaches a disk.
	DefaultDir = "/dev/shm"
	// DefaultSlots is the default Config.Slots: 16,384 packets of up to
	// DefaultMaxDatagram bytes, about 24 MiB a ring.
	DefaultSlots = 1 << 14
	// DefaultMaxDatagram is the default Config.MaxDatagram, the UDP
	// transport's (a 1500-byte Ethernet MTU less the IP and UDP headers), so
	// the publisher builds the same packets for either.
	DefaultMaxDatagram = 1472
	// DefaultRingSlots is the default Config.RingSlots.
	DefaultRingSlots = 4096
	// DefaultFileMode is the default Config.FileMode.
	DefaultFileMode os.FileMode = 0o640
	// DefaultCheckInterval is the default Config.CheckInterval.
	DefaultCheckInterval = 100 * time.Millisecond
	// MaxDatagramLimit is the largest Config.MaxDatagram.
	MaxDatagramLimit = 65535
	// MaxSlots is the largest Config.Slots.
	MaxSlots = 1 << 22
)

// Config describes one shared-memory ring: where its file is, how it is
// sized, and how a Receiver follows it. One Config serves NewSender and
// NewReceiver; each ignores the fields that do not concern it. The zero
// value of every field except Name selects a default, with one exception:
// CPU, whose zero value pins a BusyPoll receiver to CPU 0 — set it to -1
// for no pinning. The hooks (Senders, Receivers) set Name from Feed and the
// line.
type Config struct {
	// Dir is the directory of the ring files. Zero means DefaultDir.
	Dir string
	// Name is the ring file's name within Dir, without a slash. Required
	// by NewSender and NewReceiver; the hooks set it to RingName(Feed,
	// channel).
	Name string
	// Feed names the feed in the ring files' names (see RingName); it
	// lets several feed handlers share one directory. Only the hooks use
	// it, and they require it.
	Feed string
	// Slots is the number of packets the shared ring holds, a power of two
	// up to MaxSlots: how far a reader may fall behind the writer before it
	// loses packets. Zero means DefaultSlots. Writer only: a reader takes
	// the ring's geometry from the file.
	Slots int
	// MaxDatagram is the largest packet, 1–MaxDatagramLimit bytes: the
	// writer refuses longer ones (ErrTooLarge), and it is the size of a
	// receiver's private slots. A receiver refuses a ring whose packets may
	// be longer than its own MaxDatagram. Zero means DefaultMaxDatagram.
	MaxDatagram int
	// FileMode is the permission of the ring file and its lock file the
	// writer creates (before the umask). Zero means DefaultFileMode. A
	// reader in a waiting mode (Blocking, Direct) registers in the ring's
	// header, and needs write permission on the file; spin modes
	// (BusyPoll, DirectSpin) need only read permission. Give the
	// subscribers' group write permission (0660) for them to wait.
	FileMode os.FileMode
	// RingSlots is the number of slots of a receiver's private ring (the
	// ud.Ring its consumer borrows from), a power of two. Zero means
	// DefaultRingSlots.
	RingSlots int
	// Mode is how a Receiver follows the writer: by a receive goroutine of
	// its own that waits on a futex when idle (Blocking, the default) or
	// spins (BusyPoll), or on the consumer's goroutine through Fill
	// (Direct, DirectSpin).
	Mode ud.Mode
	// Notifier, if set, is signalled after every batch a Blocking or
	// BusyPoll Receiver publishes. A Direct Receiver registers with it
	// (ud.Notifier.WatchFutex), so that the consumer sleeps in it on the
	// ring's futex (see the package doc).
	Notifier *ud.Notifier
	// SpinPolls is how many empty polls in a row a Blocking receive loop
	// makes before it waits on the futex: spin, then wait. Zero waits at
	// once.
	SpinPolls int
	// Backoff makes an idle BusyPoll receive loop sleep about 50 µs in the
	// kernel after a run of empty polls, as udp.Config.Backoff does.
	Backoff bool
	// CPU is the CPU a BusyPoll receive thread is pinned to, or -1 for no
	// pinning.
	CPU int
	// CheckInterval is how often a Receiver checks the ring file while it
	// follows it: whether it was replaced (a writer restarted), deleted or
	// truncated. It is also the longest a receiver sleeps on the futex
	// between checks. Zero means DefaultCheckInterval.
	CheckInterval time.Duration
}

// ConfigError reports a Config field with an invalid value: the module's
// configuration error, config.Error.
type ConfigError = config.Error

var check = config.Checker{Pkg: "shm", Struct: "Config"}

// Path returns the ring file's path: Dir (or DefaultDir) joined with Name.
func (c Config) Path() string {
	dir := c.Dir
	if dir == "" {
		dir = DefaultDir
	}
	return filepath.Join(dir, c.Name)
}

// RingName returns the name of the ring file of a feed's channel:
// "tickcast-FEED-CH".
func RingName(feed string, channel int) string {
	return "tickcast-" + feed + "-" + strconv.Itoa(channel)
}

// ErrLineB is returned by the hooks for line B: a shared-memory ring is one
// copy in memory, with nothing a second line would add.
var ErrLineB = errors.New("shm: a shared-memory ring has line A only")

// ForLine returns c for one line: Name is RingName(Feed, channel).
func (c Config) ForLine(id ud.LineID) Config {
	c.Name = RingName(c.Feed, id.Channel)
	return c
}

// lineConfig is ForLine with the checks the hooks make.
func (c Config) lineConfig(id ud.LineID) (Config, error) {
	if id.Line != ud.LineA {
		return c, ErrLineB
	}
	if err := validName("Feed", c.Feed); err != nil {
		return c, err
	}
	return c.ForLine(id), nil
}

// Senders returns a ud.NewSenderFunc (the hook tickcast.PublisherConfig.
// NewSender takes) that opens the ring of each channel's line A:
// Dir/tickcast-FEED-CH (ForLine). Line B is refused with ErrLineB. c's Name
// is ignored.
func Senders(c Config) ud.NewSenderFunc {
	return ud.OpenSenders("shm", func(id ud.LineID) (*Sender, error) {
		lc, err := c.lineConfig(id)
		if err != nil {
			return nil, err
		}
		return NewSender(lc)
	})
}

// Receivers returns a ud.NewReceiverFunc (the hook
// tickcast.SubscriberConfig.NewReceiver takes) that follows the ring of
// each channel's line A with the subscriber's Notifier. Line B is refused
// with ErrLineB. c's Name and Notifier are ignored.
func Receivers(c Config) ud.NewReceiverFunc {
	return ud.OpenReceivers("shm", func(id ud.LineID, n *ud.Notifier) (*Receiver, error) {
		lc, err := c.lineConfig(id)
		if err != nil {
			return nil, err
		}
		lc.Notifier = n
		return NewReceiver(lc)
	})
}

// validName checks a file name part: not empty, letters, digits, '.', '_'
// and '-' only, not starting with '.'.
func validName(field, s string) error {
	if s == "" {
		return check.Invalid(field, s, "required")
	}
	if s[0] == '.' {
		return check.Invalid(field, s, "starts with '.'")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return check.Invalid(field, s, "may hold only letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.Dir, DefaultDir)
	config.Default(&c.Slots, DefaultSlots)
	config.Default(&c.MaxDatagram, DefaultMaxDatagram)
	config.Default(&c.FileMode, DefaultFileMode)
	config.Default(&c.RingSlots, DefaultRingSlots)
	config.Default(&c.CheckInterval, DefaultCheckInterval)
	return c
}

// validate checks every field of a Config whose defaults are applied.
func (c Config) validate() error {
	pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	if err := validName("Name", c.Name); err != nil {
		return err
	}
	switch {
	case !pow2(c.Slots) || c.Slots > MaxSlots:
		return check.Invalid("Slots", c.Slots, "not a power of two up to %d", MaxSlots)
	case c.MaxDatagram < 1 || c.MaxDatagram > MaxDatagramLimit:
		return check.Invalid("MaxDatagram", c.MaxDatagram, "not in 1–%d", MaxDatagramLimit)
	case c.FileMode&^os.ModePerm != 0:
		return check.Invalid("FileMode", c.FileMode, "holds more than permission bits")
	case c.FileMode&0o600 != 0o600:
		return check.Invalid("FileMode", c.FileMode, "the owner (the writer) needs read and write permission")
	case !pow2(c.RingSlots) || c.RingSlots > ud.MaxRingSlots:
		return check.Invalid("RingSlots", c.RingSlots, "not a power of two up to %d", ud.MaxRingSlots)
	case c.Mode < Blocking || c.Mode > DirectSpin:
		return check.Invalid("Mode", c.Mode, "not Blocking, BusyPoll, Direct or DirectSpin")
	case c.SpinPolls < 0:
		return check.Invalid("SpinPolls", c.SpinPolls, "negative")
	case c.CPU < -1 || c.CPU >= 1024:
		return check.Invalid("CPU", c.CPU, "not -1 (no pinning) or a CPU index below 1024")
	case c.CheckInterval < time.Millisecond:
		return check.Invalid("CheckInterval", c.CheckInterval, "shorter than a millisecond")
	}
	return nil
}
