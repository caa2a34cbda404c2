package tickcast

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/tickcast/tickcast/mold"
)

// Line names one of a channel's redundant multicast lines.
type Line int

// Lines.
const (
	LineA Line = 0
	LineB Line = 1
)

func (l Line) String() string {
	if l == LineB {
		return "B"
	}
	return "A"
}

// ChannelGroup returns channel ch's multicast group given the group of
// channel 0: the IPv4 address plus ch, on the same port (channel 3 of
// 239.77.0.1:31001 is 239.77.0.4:31001). It fails if the result leaves the
// multicast range 224.0.0.0/4.
func ChannelGroup(base netip.AddrPort, ch int) (netip.AddrPort, error) {
	if !base.Addr().Is4() || !base.Addr().IsMulticast() {
		return netip.AddrPort{}, fmt.Errorf("tickcast: group %s is not an IPv4 multicast address", base)
	}
	a := base.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(ch)
	addr := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	if !addr.IsMulticast() || ch < 0 {
		return netip.AddrPort{}, fmt.Errorf("tickcast: channel %d of group %s falls outside 224.0.0.0/4", ch, base)
	}
	return netip.AddrPortFrom(addr, base.Port()), nil
}

// ParseGroup parses "a.b.c.d:port" as an IPv4 multicast group and port.
func ParseGroup(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("group %q: want IPv4-multicast-address:port: %v", s, err)
	}
	if !ap.Addr().Is4() || !ap.Addr().IsMulticast() {
		return ap, fmt.Errorf("group %q: %s is not an IPv4 multicast address (224.0.0.0/4)", s, ap.Addr())
	}
	if ap.Port() == 0 {
		return ap, fmt.Errorf("group %q: port 0", s)
	}
	return ap, nil
}

const base36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// sessionEpoch is the origin of a session's millisecond count.
var sessionEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

var sessionMu struct {
	sync.Mutex
	last map[int]int64
}

// NewSession returns a session for a stream of channel ch starting at now:
// two base-36 digits of ch, then eight of the milliseconds since 2020-01-01
// UTC (docs/wire-format.md). Within one process a channel never gets the same
// session twice: a second stream in the same millisecond takes the next
// millisecond's value.
func NewSession(ch int, now time.Time) mold.Session {
	ms := now.Sub(sessionEpoch).Milliseconds()
	sessionMu.Lock()
	if sessionMu.last == nil {
		sessionMu.last = map[int]int64{}
	}
	if last, ok := sessionMu.last[ch]; ok && ms <= last {
		ms = last + 1
	}
	sessionMu.last[ch] = ms
	sessionMu.Unlock()
	var s mold.Session
	c := ch % (36 * 36)
	s[0], s[1] = base36[c/36], base36[c%36]
	for i := mold.SessionLen - 1; i >= 2; i-- {
		s[i] = base36[ms%36]
		ms /= 36
	}
	return s
}

// SessionChannel returns the channel a session of NewSession names, or -1 if
// s is not such a session.
func SessionChannel(s mold.Session) int {
	d := func(c byte) int {
		switch {
		case c >= '0' && c <= '9':
			return int(c - '0')
		case c >= 'A' && c <= 'Z':
			return int(c-'A') + 10
		}
		return -1
	}
	for _, c := range s {
		if d(c) < 0 {
			return -1
		}
	}
	return d(s[0])*36 + d(s[1])
}
