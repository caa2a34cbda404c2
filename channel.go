package tickcast

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud"
)

// Line names where a channel's packets come from: line A, line B, or
// recovery (see ud.Line). Its String is "A", "B" or "recovery".
type Line = ud.Line

// Lines. LineRecovery equals seqgap.LineRecovery: an Event that recovery
// caused, or that no line's packet caused, names it.
const (
	LineA        = ud.LineA
	LineB        = ud.LineB
	LineRecovery = ud.LineRecovery
)

// LineID is the identity of one line a transport serves (see ud.LineID):
// what PublisherConfig.NewSender and SubscriberConfig.NewReceiver are given.
type LineID = ud.LineID

// channelLines returns the identities of channel ch's lines: A on
// ChannelGroup(a, ch), and B on ChannelGroup(b, ch) when b is valid. The
// groups must have been checked (ChannelGroup of the last channel).
func channelLines(a, b netip.AddrPort, ch int) []LineID {
	ids := make([]LineID, 0, 2)
	for l, base := range []netip.AddrPort{a, b} {
		if !base.IsValid() {
			continue
		}
		g, _ := ChannelGroup(base, ch)
		ids = append(ids, LineID{Channel: ch, Line: Line(l), Group: g})
	}
	return ids
}

// ipv4 returns an IPv4 address as a number, for group arithmetic.
func ipv4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// fromIPv4 is ipv4's inverse.
func fromIPv4(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// ChannelGroup returns channel ch's multicast group given the group of
// channel 0: the IPv4 address plus ch, on the same port (channel 3 of
// 239.77.0.1:31001 is 239.77.0.4:31001). It fails if the result leaves the
// multicast range 224.0.0.0/4.
func ChannelGroup(base netip.AddrPort, ch int) (netip.AddrPort, error) {
	if !base.Addr().Is4() || !base.Addr().IsMulticast() {
		return netip.AddrPort{}, fmt.Errorf("tickcast: group %s is not an IPv4 multicast address", base)
	}
	addr := fromIPv4(ipv4(base.Addr()) + uint32(ch))
	if !addr.IsMulticast() || ch < 0 {
		return netip.AddrPort{}, fmt.Errorf("tickcast: channel %d of group %s falls outside 224.0.0.0/4", ch, base)
	}
	return netip.AddrPortFrom(addr, base.Port()), nil
}

// groupsOverlap reports whether the n channel groups from a and those from b
// share a group (same port, overlapping address ranges).
func groupsOverlap(a, b netip.AddrPort, n int) bool {
	if a.Port() != b.Port() {
		return false
	}
	av, bv := int64(ipv4(a.Addr())), int64(ipv4(b.Addr()))
	return av < bv+int64(n) && bv < av+int64(n)
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
