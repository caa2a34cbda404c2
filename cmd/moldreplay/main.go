// Command moldreplay is a test exchange: it serves an ITCH 5.0 file (plain or
// gzip), or a capture of MoldUDP64 packets carrying ITCH 5.0 (pcap or
// pcapng), as a live exchange-style MoldUDP64 feed on an A and an optional B
// multicast line, and answers MoldUDP64 re-requests over UDP unicast as an
// exchange's re-request server does.
//
// Usage:
//
//	moldreplay --itch FILE [--group A] [--group-b B] [--rerequest HOST:PORT] [flags]
//	moldreplay --pcap FILE[:GROUP:PORT] [--group A] [flags]
//
// The messages are the file's, unchanged and in order, numbered from 1 in
// one session (--session, or derived from the file name); a capture's are
// those of the session it carries, in its sequence order, each counted once
// (package pcap). They are paced at the input's recorded speed times --speed
// (a file by its ITCH timestamps, a capture by its capture times, from the
// first message: a file that starts mid-day starts at once), at --rate
// messages per second, or as fast as possible (--speed 0). A packet goes out
// when it is full or when the next message is not yet due; a line idle for
// --heartbeat sends a heartbeat; at the end, end of session is sent
// --end-repeat times.
//
// Loss is injected per line and seeded (--seed), so runs repeat: --loss-a P
// loses a data packet with probability P, each loss dropping --burst-a
// packets in a row, and --silence-a FROM:UNTIL silences the line (every
// packet) in that window of time after the first packet; likewise for B.
// Lost packets were still published: the re-request server answers for
// them.
//
// The re-request server (--rerequest) takes standard 20-byte MoldUDP64
// request packets (session, sequence, count) and answers each with ordinary
// downstream packets sent to the requester's address: one packet's worth of
// messages, or up to --max-count in as many packets as needed. A request for
// another session, for a sequence not yet published, or for one older than
// the store holds is not answered, as an exchange drops such requests; a
// datagram that is no request is counted and logged. --rerequest-off,
// --rerequest-stop-after and --rerequest-garbage make it fail on purpose.
// After end of session it keeps answering for --linger.
//
// At the end it prints one JSON summary line on stdout. Bad flags exit 2
// with a message naming the flag; an input that is not valid ITCH exits 1
// after the summary; a capture's malformed records are counted, logged and
// skipped. Settings come from flags only (no environment
// variables, so that a feed handler's TICKCAST_* settings do not reach the
// exchange). See docs/moldreplay.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed/pcap"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// settings are moldreplay's flags.
type settings struct {
	itch, pcap, session, group, groupB string
	iface                              string
	ttl, maxDatagram, endRepeat        int
	speed, rate                        float64
	heartbeat, linger                  time.Duration
	loss                               [2]float64
	burst                              [2]int
	silence                            [2]string
	seed, store                        uint64
	rerequest                          string
	maxCount                           int
	rerequestOff, rerequestGarbage     bool
	rerequestStopAfter                 time.Duration
	logFormat, logLevel                string
	set                                map[string]bool // flags given
}

func newFlagSet(s *settings, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("moldreplay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.itch, "itch", "", "ITCH 5.0 file to serve, in NASDAQ's format, plain or gzip (this or --pcap is required)")
	fs.StringVar(&s.pcap, "pcap", "", "FILE[:GROUP:PORT]: capture (pcap or pcapng) of MoldUDP64 packets carrying ITCH 5.0 to serve, its datagrams to GROUP:PORT only if given, paced by its capture times")
	fs.StringVar(&s.session, "session", "", "MoldUDP64 session, 1 to 10 printable ASCII characters (empty: the first 10 letters and digits of the file name, upper-cased)")
	fs.StringVar(&s.group, "group", "239.77.100.1:32001", "A-line multicast group:port")
	fs.StringVar(&s.groupB, "group-b", "", "B-line multicast group:port (empty: no B line)")
	fs.StringVar(&s.iface, "iface", "127.0.0.1", "IPv4 address of the interface to send on")
	fs.IntVar(&s.ttl, "ttl", 0, "multicast TTL (0 keeps packets on this host)")
	fs.IntVar(&s.maxDatagram, "max-datagram", 1472, "largest packet in bytes, for the feed and the re-request answers")
	fs.Float64Var(&s.speed, "speed", 1, "pace at the input's recorded speed times this factor, from the first message: a file's ITCH timestamps, a capture's capture times (2: twice as fast; 0: as fast as possible)")
	fs.Float64Var(&s.rate, "rate", 0, "pace at this many messages per second instead of the recorded speed; cannot be combined with --speed")
	fs.DurationVar(&s.heartbeat, "heartbeat", time.Second, "idle time after which a line sends a heartbeat")
	fs.IntVar(&s.endRepeat, "end-repeat", 3, "times end of session is sent at the end, 100ms (or --heartbeat, if shorter) apart")
	for i, l := range []string{"a", "b"} {
		L := strings.ToUpper(l)
		fs.Float64Var(&s.loss[i], "loss-"+l, 0, "probability, 0..1, that a data packet on line "+L+" starts a loss (heartbeats are not lost)")
		fs.IntVar(&s.burst[i], "burst-"+l, 1, "data packets each loss on line "+L+" drops in a row")
		fs.StringVar(&s.silence[i], "silence-"+l, "", "FROM:UNTIL, e.g. 2s:5s: line "+L+" sends nothing (data, heartbeats, end of session) in this window after the first packet")
	}
	fs.Uint64Var(&s.seed, "seed", 1, "seed of the loss injection: the same seed loses the same packets of the same feed")
	fs.Uint64Var(&s.store, "store-messages", 10_000_000, "published messages kept for re-requests, the oldest dropped first (0: all; about 40 bytes each)")
	fs.StringVar(&s.rerequest, "rerequest", "", "HOST:PORT to answer MoldUDP64 re-requests on, UDP unicast (empty: no re-request server)")
	fs.IntVar(&s.maxCount, "max-count", 0, "most messages one re-request is answered with, in as many packets as needed (0: one packet's worth, as exchanges answer)")
	fs.BoolVar(&s.rerequestOff, "rerequest-off", false, "receive and count re-requests but answer none (a re-request server that is gone)")
	fs.DurationVar(&s.rerequestStopAfter, "rerequest-stop-after", 0, "stop answering re-requests this long after start (0: never)")
	fs.BoolVar(&s.rerequestGarbage, "rerequest-garbage", false, "answer re-requests with malformed packets, a different fault in turn")
	fs.DurationVar(&s.linger, "linger", 5*time.Second, "with --rerequest, keep answering this long after end of session")
	fs.StringVar(&s.logFormat, "log-format", "auto", "auto (console on a terminal, else json), console or json; logs go to stderr")
	fs.StringVar(&s.logLevel, "log-level", "info", "debug, info, warn or error")
	return fs
}

// flagError is a bad flag: it names the flag, and exits 2.
func flagError(name, format string, args ...any) error {
	return fmt.Errorf("--%s: %s", name, fmt.Sprintf(format, args...))
}

// options are the checked settings.
type options struct {
	session        mold.Session
	groups         []netip.AddrPort
	iface          netip.Addr
	loss           [2]Loss
	rerequest      netip.AddrPort
	serveRerequest bool
}

// check validates s and returns what it means.
func (s *settings) check() (options, error) {
	var o options
	var err error
	switch {
	case s.itch == "" && s.pcap == "":
		return o, flagError("itch", "the ITCH 5.0 file (--itch) or the capture (--pcap) to serve is required")
	case s.itch != "" && s.pcap != "":
		return o, flagError("pcap", "cannot be combined with --itch: serve one input")
	case s.set["speed"] && s.set["rate"]:
		return o, flagError("speed", "cannot be combined with --rate: pace by one or the other")
	case s.speed < 0:
		return o, flagError("speed", "%v: must not be negative", s.speed)
	case s.rate < 0:
		return o, flagError("rate", "%v: must not be negative", s.rate)
	case s.ttl < 0 || s.ttl > 255:
		return o, flagError("ttl", "%d: want 0..255", s.ttl)
	case s.maxDatagram < mold.HeaderLen+mold.BlockHdrLen+64 || s.maxDatagram > 65507:
		return o, flagError("max-datagram", "%d: want %d..65507", s.maxDatagram, mold.HeaderLen+mold.BlockHdrLen+64)
	case s.heartbeat <= 0:
		return o, flagError("heartbeat", "%v: must be positive", s.heartbeat)
	case s.endRepeat < 1:
		return o, flagError("end-repeat", "%d: must be at least 1", s.endRepeat)
	case s.maxCount < 0 || s.maxCount > mold.MaxCount:
		return o, flagError("max-count", "%d: want 0..%d", s.maxCount, mold.MaxCount)
	case s.linger < 0:
		return o, flagError("linger", "%v: must not be negative", s.linger)
	case s.rerequestStopAfter < 0:
		return o, flagError("rerequest-stop-after", "%v: must not be negative", s.rerequestStopAfter)
	}
	if s.set["rate"] {
		s.speed = 0
	}
	name := s.session
	if name == "" {
		name = sessionFromFile(s.path())
	}
	if o.session, err = mold.ParseSession(name); err != nil {
		return o, flagError("session", "%v", err)
	}
	for i, g := range []string{s.group, s.groupB} {
		flagName := []string{"group", "group-b"}[i]
		if g == "" {
			if i == 0 {
				return o, flagError(flagName, "the A line's group is required")
			}
			break
		}
		ap, err := tickcast.ParseGroup(g)
		if err != nil {
			return o, flagError(flagName, "%v", err)
		}
		o.groups = append(o.groups, ap)
	}
	if o.iface, err = netip.ParseAddr(s.iface); err != nil || !o.iface.Is4() {
		return o, flagError("iface", "%q is not an IPv4 address", s.iface)
	}
	for i, l := range []string{"a", "b"} {
		switch {
		case s.loss[i] < 0 || s.loss[i] > 1:
			return o, flagError("loss-"+l, "%v: want a probability, 0..1", s.loss[i])
		case s.burst[i] < 1:
			return o, flagError("burst-"+l, "%d: must be at least 1", s.burst[i])
		}
		w, err := parseWindow(s.silence[i])
		if err != nil {
			return o, flagError("silence-"+l, "%v", err)
		}
		o.loss[i] = Loss{P: s.loss[i], Burst: s.burst[i], Silence: w}
	}
	if (s.loss[1] > 0 || s.set["burst-b"] || s.silence[1] != "") && len(o.groups) < 2 {
		return o, flagError("group-b", "loss on line B (--loss-b, --burst-b, --silence-b) needs a B line")
	}
	if s.rerequest != "" {
		if o.rerequest, err = netip.ParseAddrPort(s.rerequest); err != nil || !o.rerequest.Addr().Is4() {
			return o, flagError("rerequest", "%q: want an IPv4 HOST:PORT", s.rerequest)
		}
		o.serveRerequest = true
	} else if s.rerequestOff || s.rerequestGarbage || s.rerequestStopAfter > 0 || s.maxCount > 0 {
		return o, flagError("rerequest", "the re-request flags need a re-request server: set --rerequest HOST:PORT")
	}
	return o, nil
}

// path returns the input file's path: --itch, or --pcap without its filter.
func (s *settings) path() string {
	if s.itch != "" {
		return s.itch
	}
	path, _ := pcap.SplitPath(s.pcap)
	return path
}

// sessionFromFile derives a session from a file name: its first 10 letters
// and digits, upper-cased ("12302019_SNIPPET.NASDAQ_ITCH50" gives
// "12302019SN"), or REPLAY when it has none.
func sessionFromFile(path string) string {
	var b strings.Builder
	for _, r := range filepath.Base(path) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) && b.Len() < mold.SessionLen {
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	if b.Len() == 0 {
		return "REPLAY"
	}
	return b.String()
}

// Summary is the JSON line printed at the end.
type Summary struct {
	Session string `json:"session"`
	// Packets and Messages count the data packets and messages published
	// (sent, or lost on purpose, on each line).
	Packets      uint64          `json:"packets"`
	Messages     uint64          `json:"messages"`
	Heartbeats   uint64          `json:"heartbeats"`
	EndOfSession uint64          `json:"end_of_session"`
	Lines        map[string]any  `json:"lines"`
	Rerequest    *RerequestStats `json:"rerequest,omitempty"`
	Capture      *CaptureStats   `json:"capture,omitempty"` // --pcap only
	ElapsedS     float64         `json:"elapsed_s"`
	Error        string          `json:"error,omitempty"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// openInput returns the Input of f: an ITCH file, or, when pcapSpec (the
// --pcap flag) is set, a capture, which it also returns to report on. A
// capture's malformed records, the gaps in its sequence and a sequence
// that is not there (an anonymized capture, read unsequenced) are logged.
func openInput(f io.Reader, pcapSpec string, log zerolog.Logger) (Input, *pcapInput, error) {
	if pcapSpec == "" {
		in, err := newITCHInput(f)
		return in, nil, err
	}
	_, dst := pcap.SplitPath(pcapSpec)
	malformed := 0
	in, err := newPcapInput(f, dst, func(err error) {
		// The first ten, then every thousandth: a capture that is all
		// garbage must not flood the log.
		if malformed++; malformed <= 10 || malformed%1000 == 0 {
			log.Warn().Err(err).Int("malformed", malformed).Msg("capture record skipped")
		}
	}, func(ev *seqgap.Event) {
		switch ev.Kind {
		case seqgap.EventLost:
			log.Warn().Uint64("from", ev.Range.From).Uint64("to", ev.Range.To).
				Msg("capture gap: these messages were not captured and are not served")
		case seqgap.EventSessionStart, seqgap.EventSessionEnd:
			log.Info().Str("event", ev.Kind.String()).Msg("capture")
		}
	}, func(session mold.Session) {
		log.Warn().Str("session", session.String()).
			Str("reason", "the packets carry sequence number 0, which MoldUDP64 never sends: an anonymized capture").
			Msg("capture unsequenced: its messages are served in capture order, duplicates included")
	})
	if err != nil {
		return nil, nil, err
	}
	return in, in, nil
}

// monoClock returns a monotonic clock in nanoseconds since the call.
func monoClock() func() int64 {
	t0 := time.Now()
	return func() int64 { return int64(time.Since(t0)) + 1 }
}
