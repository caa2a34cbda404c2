package subapp

import (
	"fmt"
	"strings"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/recovery"
)

// warnNoFeed logs, for a run that ended by the idle timeout without a
// single packet, what the subscriber waited on: its channels' groups on
// line A and line B, or their live NATS subjects, so that a subscriber
// started beside no feed handler (or on other groups than the feed
// handler's) says where it listened.
func (a *App) warnNoFeed(sum Summary) {
	if sum.ExitReason != "idle-timeout" || sum.Packets != 0 {
		return
	}
	a.log.Warn().Dur("idle_timeout", a.s.IdleTimeout).
		Msgf("no packet on %s in %v — is a feed handler publishing there?", a.waitedOn(sum.Channels), a.s.IdleTimeout)
}

// waitedOn names where the subscriber listened for channels chans: the
// live subjects with --transport nats, else the channels' groups, per line
// when there is a B line, and the interface.
func (a *App) waitedOn(chans []int) string {
	if a.s.Transport == "nats" {
		subject := func(c int) string { return recovery.LiveSubject(a.s.FeedName, c) }
		where := "NATS " + spans(chans, subject)
		if a.s.NATSURL != "" {
			where += " at " + a.s.NATSURL
		}
		return where
	}
	groups := func(base string) string {
		g, err := tickcast.ParseGroup(base) // checked by New
		if err != nil {
			return base
		}
		return spans(chans, func(c int) string {
			if cg, err := tickcast.ChannelGroup(g, c); err == nil {
				return cg.String()
			}
			return fmt.Sprintf("channel %d of %s", c, g)
		})
	}
	where := groups(a.s.Group)
	if a.s.GroupB != "" {
		where = "line A " + where + " and line B " + groups(a.s.GroupB)
	}
	return where + " (interface " + a.s.Iface + ")"
}

// spans writes the sorted channel numbers chans as runs, each as its first
// and last name joined by "..", the runs separated by ", ": channels 0-3
// and 6 of 239.77.0.1:31001 are "239.77.0.1:31001..239.77.0.4:31001,
// 239.77.0.7:31001".
func spans(chans []int, name func(int) string) string {
	var b strings.Builder
	for i := 0; i < len(chans); {
		j := i
		for j+1 < len(chans) && chans[j+1] == chans[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name(chans[i]))
		if j > i {
			b.WriteString("..")
			b.WriteString(name(chans[j]))
		}
		i = j + 1
	}
	return b.String()
}
