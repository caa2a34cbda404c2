package main

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/feed/upstream"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// livePrefix starts a --source that names an exchange's live MoldUDP64
// multicast feed of ITCH 5.0: itch-mold:GROUP:PORT[,GROUP_B:PORT_B].
const livePrefix = "itch-mold:"

// liveFlags are the settings that apply to --source itch-mold: only.
var liveFlags = []string{"rerequest", "rerequest-max", "rerequest-timeout", "rerequest-retries", "gap-deadline", "start-from", "upstream-iface"}

// parseLiveSource parses an itch-mold: --source into its lines; ok is false
// for any other source.
func parseLiveSource(source string) (a, b netip.AddrPort, ok bool, err error) {
	rest, ok := strings.CutPrefix(source, livePrefix)
	if !ok {
		return a, b, false, nil
	}
	sa, sb, hasB := strings.Cut(rest, ",")
	if a, err = parseGroup(sa); err != nil {
		return a, b, true, fmt.Errorf("line A %q: %w", sa, err)
	}
	if hasB {
		if b, err = parseGroup(sb); err != nil {
			return a, b, true, fmt.Errorf("line B %q: %w", sb, err)
		}
		if b == a {
			return a, b, true, fmt.Errorf("line B is line A (%v)", a)
		}
	}
	return a, b, true, nil
}

// parseGroup parses an IPv4 multicast GROUP:PORT.
func parseGroup(s string) (netip.AddrPort, error) {
	g, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		return g, err
	case !g.Addr().Is4() || !g.Addr().IsMulticast():
		return g, fmt.Errorf("%v is not an IPv4 multicast group", g.Addr())
	case g.Port() == 0:
		return g, fmt.Errorf("port 0")
	}
	return g, nil
}

// validateLive checks the settings of --source itch-mold:, or that none of
// its own settings is set for another source.
func validateLive(s *Settings) (live bool, err error) {
	_, _, live, perr := parseLiveSource(s.Source)
	if !live {
		for _, name := range liveFlags {
			if _, set := s.Origins[name]; set {
				return false, cliconf.Invalid(name, "applies to --source itch-mold:GROUP:PORT[,GROUP_B:PORT_B] only")
			}
		}
		return false, nil
	}
	_, rateSet := s.Origins["rate"]
	switch {
	case perr != nil:
		return true, cliconf.Invalid("source", "%q: %v; want itch-mold:GROUP:PORT[,GROUP_B:PORT_B]", s.Source, perr)
	case s.DryRun:
		return true, cliconf.Invalid("dry-run", "applies to --source itch:PATH or pcap:PATH only")
	case s.Speed != 0:
		return true, cliconf.Invalid("speed", "a live source is published as it arrives, not paced")
	case rateSet:
		return true, cliconf.Invalid("rate", "a live source is published as it arrives, not paced")
	case s.Pregenerate:
		return true, cliconf.Invalid("pregenerate", "applies to the synthetic source only, not %q", s.Source)
	case s.Demo:
		return true, cliconf.Invalid("demo", "the verifying subscriber checks the synthetic source only, not %q", s.Source)
	case s.RerequestMax < 1 || s.RerequestMax > mold.MaxCount:
		return true, cliconf.Invalid("rerequest-max", "%d: want 1..%d", s.RerequestMax, mold.MaxCount)
	case s.RerequestTimeout < 1e6:
		return true, cliconf.Invalid("rerequest-timeout", "%v: want at least 1ms", s.RerequestTimeout)
	case s.RerequestRetries < 0:
		return true, cliconf.Invalid("rerequest-retries", "%d: must not be negative", s.RerequestRetries)
	case s.GapDeadline <= 0:
		return true, cliconf.Invalid("gap-deadline", "%v: must be positive", s.GapDeadline)
	}
	if s.Rerequest != "" {
		if ap, err := netip.ParseAddrPort(s.Rerequest); err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			return true, cliconf.Invalid("rerequest", "%q: want the IPv4 HOST:PORT of the exchange's re-request server", s.Rerequest)
		}
	}
	if a, err := netip.ParseAddr(s.UpstreamIface); err != nil || !a.Is4() {
		return true, cliconf.Invalid("upstream-iface", "%q is not an IPv4 address", s.UpstreamIface)
	}
	return true, nil
}

// liveSource is the normalized ITCH of a live feed, stopped after limit
// messages (0: no limit).
type liveSource struct {
	*itch.Source
	up    *upstream.Feed
	limit uint64
	n     uint64
}

// Next implements feed.Source.
func (l *liveSource) Next(m *feed.Msg) error {
	if l.limit != 0 && l.n >= l.limit {
		return io.EOF
	}
	err := l.Source.Next(m)
	if err == nil {
		l.n++
	}
	return err
}

// openLive joins the feed --source names and returns its normalizer and
// the function that leaves it, which logs the feed's counters.
func openLive(s *Settings, log zerolog.Logger) (*liveSource, func(), error) {
	a, b, _, _ := parseLiveSource(s.Source)
	cfg := upstream.Config{A: a, B: b, MaxCount: s.RerequestMax, Timeout: s.RerequestTimeout, Retries: s.RerequestRetries,
		GapDeadline: s.GapDeadline, StartFrom: s.StartFrom, OnEvent: logUpstreamEvent(log), OnError: logUpstreamError(log)}
	cfg.Interface, _ = netip.ParseAddr(s.UpstreamIface)
	if cfg.Retries == 0 {
		cfg.Retries = -1 // the flag's 0 means none; the library's means its default
	}
	if s.Rerequest != "" {
		cfg.Rerequest, _ = netip.ParseAddrPort(s.Rerequest)
	}
	up, err := upstream.Open(cfg)
	if err != nil {
		return nil, nil, err
	}
	src, err := itch.NewMessageSource(up, itch.Config{OrderCapacity: s.ITCHOrders, Depth: s.Depth})
	if err != nil {
		up.Close()
		return nil, nil, err
	}
	limit := uint64(0)
	if _, set := s.Origins["count"]; set {
		limit = s.Count
	}
	log.Info().Stringer("line_a", a).Stringer("line_b", b).Str("rerequest", s.Rerequest).Uint64("start_from", s.StartFrom).
		Msg("joined the upstream feed")
	release := func() {
		up.Close()
		st := up.Stats()
		ev := log.Info().Uint64("packets_a", st.Tracker.PacketsOnLine[0]).Uint64("packets_b", st.Tracker.PacketsOnLine[1]).
			Uint64("messages", st.Tracker.Messages).Uint64("duplicates", st.Tracker.Duplicates).Uint64("gaps", st.Tracker.Gaps).
			Uint64("recovered", st.Tracker.Recovered).Uint64("rerequests", st.Requests).Uint64("rerequest_retries", st.Retries).
			Uint64("rerequests_given_up", st.GaveUp).Uint64("rerequest_answers", st.Answers).
			Uint64("rerequest_bad_answers", st.BadAnswers).Uint64("malformed", st.Malformed).Uint64("deferred", st.Deferred)
		var lost uint64
		for i, reason := range upstream.LossReasons() {
			if i > 0 && st.Lost[i] > 0 {
				ev = ev.Uint64("lost_"+strings.ReplaceAll(reason, "-", "_"), st.Lost[i])
				lost += st.Lost[i]
			}
		}
		ev.Uint64("lost", lost).Msg("upstream feed left")
	}
	return &liveSource{Source: src, up: up, limit: limit}, release, nil
}

// logUpstreamEvent logs the tracker's events: losses as warnings naming the
// range and the reason, gaps at debug level (the other line or a
// re-request usually fills them), the rest as information.
func logUpstreamEvent(log zerolog.Logger) func(ev *seqgap.Event) {
	return func(ev *seqgap.Event) {
		var e *zerolog.Event
		switch ev.Kind {
		case seqgap.EventLost:
			e = log.Warn().Stringer("range", ev.Range).Uint64("messages", ev.Range.Len()).Stringer("reason", ev.Reason)
		case seqgap.EventGap:
			e = log.Debug().Stringer("range", ev.Range).Uint64("messages", ev.Range.Len())
		default:
			e = log.Info()
			if ev.LastSeq != 0 {
				e = e.Uint64("last_seq", ev.LastSeq)
			}
		}
		e.Str("session", ev.Session.String()).Msg("upstream " + ev.Kind.String())
	}
}

// logUpstreamError logs malformed datagrams (the first maxLoggedMalformed,
// then every thousandth) and re-requests given up.
func logUpstreamError(log zerolog.Logger) func(err error) {
	malformed := 0
	return func(err error) {
		if _, ok := err.(*upstream.DatagramError); ok {
			if malformed++; malformed > maxLoggedMalformed && malformed%1000 != 0 {
				return
			}
			log.Warn().Err(err).Int("count", malformed).Msg("upstream datagram dropped")
			return
		}
		log.Warn().Err(err).Msg("upstream re-request given up")
	}
}
