package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/feed/pcap"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// itchPrefix starts a --source that names an ITCH 5.0 file, pcapPrefix one
// that names a capture of MoldUDP64/ITCH 5.0 packets.
const (
	itchPrefix = "itch:"
	pcapPrefix = "pcap:"
)

// fileSource is a --source that names a file: itch:PATH or
// pcap:PATH[:GROUP:PORT].
type fileSource struct {
	pcap bool
	path string
	dst  netip.AddrPort // pcap: the datagrams kept (zero: all)
}

// parseFileSource parses --source; ok is false for the synthetic source.
// A pcap: path may hold colons (pcap.SplitPath).
func parseFileSource(source string) (fs fileSource, ok bool) {
	if path, ok := strings.CutPrefix(source, itchPrefix); ok {
		return fileSource{path: path}, true
	}
	rest, ok := strings.CutPrefix(source, pcapPrefix)
	if !ok {
		return fileSource{}, false
	}
	fs = fileSource{pcap: true}
	fs.path, fs.dst = pcap.SplitPath(rest)
	return fs, true
}

// validateSource checks --source and the settings that depend on it.
func validateSource(s *Settings) error {
	if live, err := validateLive(s); live || err != nil {
		return err
	}
	fs, isFile := parseFileSource(s.Source)
	switch {
	case s.Source != "synthetic" && !isFile:
		return cliconf.Invalid("source", "%q: want synthetic, itch:PATH, pcap:PATH[:GROUP:PORT] or itch-mold:GROUP:PORT[,GROUP_B:PORT_B]", s.Source)
	case isFile && !fs.pcap && fs.path == "":
		return cliconf.Invalid("source", "%q: itch: needs the path of an ITCH 5.0 file (plain or gzip)", s.Source)
	case isFile && fs.pcap && fs.path == "":
		return cliconf.Invalid("source", "%q: pcap: needs the path of a pcap or pcapng capture, optionally followed by :GROUP:PORT", s.Source)
	case isFile && s.Demo:
		return cliconf.Invalid("demo", "the verifying subscriber checks the synthetic source only, not %q", s.Source)
	case !isFile && s.DryRun:
		return cliconf.Invalid("dry-run", "applies to --source itch:PATH or pcap:PATH only")
	case !isFile && s.Speed != 0:
		return cliconf.Invalid("speed", "the synthetic source has no recorded timestamps to follow; pace it with --rate")
	case isFile && s.Pregenerate:
		return cliconf.Invalid("pregenerate", "applies to the synthetic source only, not %q", s.Source)
	case s.Pregenerate && (s.Count == 0 || s.Count > maxPregenerate):
		return cliconf.Invalid("pregenerate", "needs --count between 1 and %d (each message is held in memory), not %d", maxPregenerate, s.Count)
	}
	return nil
}

// openSource opens the source --source names and returns it with the
// function that releases it. For an ITCH file or a capture, --count limits
// the messages published only when it is set explicitly (its default would
// cut a day's file short), and progress is logged as the file is read.
func openSource(s *Settings, log zerolog.Logger, stderr io.Writer) (feed.Source, func(), error) {
	if _, _, live, _ := parseLiveSource(s.Source); live {
		return openLive(s, log)
	}
	fs, isFile := parseFileSource(s.Source)
	if !isFile {
		src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: s.Seed, Instruments: s.Instruments, Channels: s.Channels, Count: s.Count})
		if err != nil || !s.Pregenerate {
			return src, func() {}, err
		}
		pre, err := pregenerate(src, s.Count)
		return pre, func() {}, err
	}
	f, src, msgs, err := openFile(fs, itch.Config{OrderCapacity: s.ITCHOrders, Depth: s.Depth}, log)
	if err != nil {
		// A file that cannot be opened or read is a bad --source: the
		// message says where that setting came from.
		return nil, nil, cliconf.Invalid("source", "%v", err)
	}
	limit := uint64(0)
	if _, set := s.Origins["count"]; set {
		limit = s.Count
	}
	p := &progress{Source: src, pcap: msgs, file: f, limit: limit, log: log, level: zerolog.DebugLevel, start: time.Now()}
	p.last = p.start
	if isTerminal(stderr) {
		p.level = zerolog.InfoLevel
	}
	return p, func() { f.Close() }, nil
}

// identity names the input for the feed's session record: every feed
// handler of a session publishes the same messages, so its peers must
// have the same synthetic settings, or the same ITCH file or capture (its
// SHA-256, and the capture's filter), limit and depth.
func identity(s *Settings) (string, error) {
	if a, b, live, _ := parseLiveSource(s.Source); live {
		return fmt.Sprintf("itch-mold a=%v b=%v start_from=%d channels=%d", a, b, s.StartFrom, s.Channels), nil
	}
	fs, isFile := parseFileSource(s.Source)
	if !isFile {
		return fmt.Sprintf("synthetic seed=%d instruments=%d channels=%d count=%d", s.Seed, s.Instruments, s.Channels, s.Count), nil
	}
	path := fs.path
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	limit := uint64(0)
	if _, set := s.Origins["count"]; set {
		limit = s.Count
	}
	if fs.pcap {
		return fmt.Sprintf("pcap sha256=%x dst=%v channels=%d count=%d depth=%d", h.Sum(nil), fs.dst, s.Channels, limit, s.Depth), nil
	}
	return fmt.Sprintf("itch sha256=%x channels=%d count=%d depth=%d", h.Sum(nil), s.Channels, limit, s.Depth), nil
}

// maxPregenerate bounds --pregenerate: each message takes 160 bytes of
// memory until it is published.
const maxPregenerate = 10_000_000

// pregenerated is a synthetic feed generated in full before publishing
// starts (--pregenerate), so that a benchmark measures the distribution path
// without the generator in the loop.
type pregenerated struct {
	syn  *feed.Synthetic // for its instruments
	msgs []feed.Msg
	next int
}

func pregenerate(syn *feed.Synthetic, count uint64) (*pregenerated, error) {
	if count == 0 || count > maxPregenerate {
		return nil, cliconf.Invalid("pregenerate", "needs --count between 1 and %d (each message is held in memory), not %d", maxPregenerate, count)
	}
	p := &pregenerated{syn: syn, msgs: make([]feed.Msg, 0, count)}
	var m feed.Msg
	for {
		err := syn.Next(&m)
		if err == io.EOF {
			return p, nil
		}
		if err != nil {
			return nil, err
		}
		p.msgs = append(p.msgs, m)
	}
}

// ChannelInstruments returns the instruments channel c carries, as
// feed.Synthetic's method (the feed handler logs their number).
func (p *pregenerated) ChannelInstruments(c int) []uint32 { return p.syn.ChannelInstruments(c) }

// Next implements feed.Source.
func (p *pregenerated) Next(m *feed.Msg) error {
	if p.next == len(p.msgs) {
		return io.EOF
	}
	*m = p.msgs[p.next]
	p.next++
	return nil
}

// countingFile is an ITCH file that counts the bytes read from it: the
// position in the file, compressed or not.
type countingFile struct {
	*os.File
	size int64
	pos  int64
}

func (f *countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.pos += int64(n)
	return n, err
}

// maxLoggedMalformed is how many malformed capture records are logged one
// by one; the rest are counted only.
const maxLoggedMalformed = 20

// openFile opens an ITCH file or a capture and its normalizer; msgs is the
// capture's reader (nil for an ITCH file).
func openFile(fs fileSource, cfg itch.Config, log zerolog.Logger) (f *countingFile, src *itch.Source, msgs *pcap.Messages, err error) {
	osf, err := os.Open(fs.path)
	if err != nil {
		return nil, nil, nil, cliconf.Invalid("source", "%v", err)
	}
	f = &countingFile{File: osf}
	if fi, err := osf.Stat(); err == nil {
		f.size = fi.Size()
	}
	if !fs.pcap {
		src, err = itch.NewSource(f, cfg)
	} else if msgs, err = pcap.NewMessages(f, pcapConfig(fs, log)); err == nil {
		src, err = itch.NewMessageSource(msgs, cfg)
	}
	if err != nil {
		osf.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", fs.path, err)
	}
	return f, src, msgs, nil
}

// pcapConfig configures a capture's reader to log what it skips and the
// sequence gaps it finds.
func pcapConfig(fs fileSource, log zerolog.Logger) pcap.Config {
	malformed := 0
	return pcap.Config{
		Dst: fs.dst,
		OnMalformed: func(err error) {
			if malformed++; malformed <= maxLoggedMalformed {
				log.Warn().Err(err).Msg("pcap record skipped")
			}
			if malformed == maxLoggedMalformed {
				log.Warn().Msg("further malformed pcap records are counted, not logged")
			}
		},
		OnEvent: func(ev *seqgap.Event) {
			e := log.Info()
			if ev.Kind == seqgap.EventGap || ev.Kind == seqgap.EventLost {
				e = log.Warn().Stringer("range", ev.Range).Uint64("messages", ev.Range.Len())
			}
			if ev.Kind == seqgap.EventLost {
				e = e.Stringer("reason", ev.Reason)
			}
			e.Str("session", ev.Session.String()).Msg("pcap sequence " + ev.Kind.String())
		},
		OnUnsequenced: func(session mold.Session) {
			log.Warn().Str("session", session.String()).
				Str("reason", "the packets carry sequence number 0, which MoldUDP64 never sends: an anonymized capture").
				Msg("pcap capture unsequenced: read in capture order, without duplicate or gap detection")
		},
	}
}

// warnNothingRead logs at warn level why a capture whose records were read
// gave no ITCH message: where its packets went.
func warnNothingRead(log zerolog.Logger, c *pcap.Counts, m *pcap.MoldCounts) {
	if c.Records == 0 && c.Malformed == 0 {
		return
	}
	var why string
	switch {
	case c.Datagrams == 0:
		why = fmt.Sprintf("no UDP datagram kept: %d filtered, %d not IPv4 UDP, %d malformed, %d fragments (%d incomplete)",
			c.Filtered, c.NotUDP, c.Malformed, c.Fragments, c.Incomplete)
	case m.Packets == 0:
		why = fmt.Sprintf("none of the %d datagrams is a MoldUDP64 packet", c.Datagrams)
	case m.Messages > 0:
		why = fmt.Sprintf("none of the %d MoldUDP64 messages is an ITCH 5.0 message (see skipped)", m.Messages)
	default:
		why = fmt.Sprintf("the %d MoldUDP64 packets brought no message: %d heartbeats, %d end of session, %d duplicates, "+
			"%d of another session, %d of an impossible sequence number", m.Packets, m.Heartbeats, m.EndOfSession,
			m.DuplicatePackets, m.OtherSession, m.Implausible)
	}
	log.Warn().Uint64("records", c.Records).Str("reason", why).Msg("dry run: the capture gave no ITCH message")
}

// progressEvery is how many messages pass between two looks at the clock,
// so that progress costs the hot loop one counter increment.
const progressEvery = 1 << 12

// progress is an ITCH source that logs its progress every second or so and
// stops after limit messages (0: no limit).
type progress struct {
	*itch.Source
	pcap    *pcap.Messages // the capture's reader, for its counts; nil for an ITCH file
	file    *countingFile
	limit   uint64
	n       uint64
	log     zerolog.Logger
	level   zerolog.Level
	start   time.Time
	last    time.Time
	lastN   uint64
	lastITC uint64
}

func (p *progress) Next(m *feed.Msg) error {
	if p.limit != 0 && p.n >= p.limit {
		return io.EOF
	}
	if err := p.Source.Next(m); err != nil {
		return err
	}
	p.n++
	if p.n%progressEvery == 0 {
		if now := time.Now(); now.Sub(p.last) >= time.Second {
			itc := p.Stats().Messages
			dt := now.Sub(p.last).Seconds()
			ev := p.log.WithLevel(p.level).Uint64("itch_messages", itc).Uint64("published", p.n).
				Float64("itch_msgs_per_s", float64(itc-p.lastITC)/dt).Float64("msgs_per_s", float64(p.n-p.lastN)/dt).
				Int64("file_pos", p.file.pos)
			if p.file.size > 0 {
				ev = ev.Float64("file_pct", 100*float64(p.file.pos)/float64(p.file.size))
			}
			ev.Msg("itch progress")
			p.last, p.lastN, p.lastITC = now, p.n, itc
		}
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// dryRunReport is what --dry-run prints: one JSON object.
type dryRunReport struct {
	Source   string `json:"source"`
	Messages uint64 `json:"messages"`
	Bytes    int64  `json:"bytes"`
	// ITCH counts decoded messages per ITCH type letter.
	ITCH map[string]uint64 `json:"itch"`
	// Skipped counts messages of unknown types per type byte (hex), and
	// zero-length messages as "empty".
	Skipped map[string]uint64 `json:"skipped"`
	// Normalized counts the messages that would be published, per type.
	Normalized map[string]uint64 `json:"normalized"`
	// UnknownOrder counts events naming an order the books never saw, per
	// ITCH type letter.
	UnknownOrder map[string]uint64 `json:"unknown_order"`
	Anomalies    map[string]uint64 `json:"anomalies"`
	Instruments  int               `json:"instruments"`
	Provisional  int               `json:"provisional"`
	MidDay       bool              `json:"mid_day"`
	OrdersLive   int               `json:"orders_live"`
	OrdersHigh   int               `json:"orders_high_water"`
	OrdersCap    int               `json:"orders_capacity"`
	ElapsedS     float64           `json:"elapsed_s"`
	// PeakRSS is the process's peak resident set size (getrusage's
	// ru_maxrss) at the end of the run, in bytes: the order table, the
	// books and the rest of the process.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// Pcap counts a capture's records, datagrams and MoldUDP64 packets
	// (pcap: sources only).
	Pcap  *pcapReport `json:"pcap,omitempty"`
	Error string      `json:"error,omitempty"`
}

// pcapReport is a capture's counts in --dry-run's report.
type pcapReport struct {
	pcap.Counts
	pcap.MoldCounts
}

// dryRun reads the whole ITCH file or capture through the normalizer
// without publishing, and prints counts as one JSON object on stdout. It
// returns the exit code: 0, or 1 if the file is not valid ITCH or the
// capture is cut short (the counts up to the fault are still printed).
func dryRun(s *Settings, log zerolog.Logger, stdout, stderr io.Writer) int {
	src, release, err := openSource(s, log, stderr)
	if err != nil {
		return badSettings(stderr, s, err)
	}
	defer release()
	p := src.(*progress)
	start := time.Now()
	var m feed.Msg
	for err == nil {
		err = p.Next(&m)
	}
	st := p.Stats()
	r := dryRunReport{
		Source: s.Source, Messages: st.Messages, Bytes: p.Offset(),
		ITCH: map[string]uint64{}, Skipped: map[string]uint64{}, Normalized: map[string]uint64{}, UnknownOrder: map[string]uint64{},
		Anomalies: map[string]uint64{
			"duplicate_ref": st.Duplicate, "table_full": st.TableFull, "wrong_stock": st.WrongStock,
			"excess_shares": st.Excess, "bad_side": st.BadSide, "not_printable": st.NotPrintable,
			"empty_cross": st.EmptyCross, "undefined_instrument": st.Undefined,
		},
		Instruments: st.Instruments, Provisional: st.Provisional, MidDay: p.MidDay(),
		OrdersLive: p.Books().Orders(), OrdersHigh: p.Books().HighWater(), OrdersCap: p.Books().Capacity(),
		ElapsedS: time.Since(start).Seconds(), PeakRSS: peakRSS(),
	}
	for t := range 256 {
		if n := st.ByType[t]; n > 0 {
			r.ITCH[string(rune(t))] = n
		}
		if n := st.UnknownOrder[t]; n > 0 {
			r.UnknownOrder[string(rune(t))] = n
		}
		if n := st.SkippedTypes[t]; n > 0 {
			r.Skipped[fmt.Sprintf("0x%02x", t)] = n
		}
		if n := st.Normalized[t]; n > 0 {
			r.Normalized[feed.Type(t).String()] = n
		}
	}
	if st.Empty > 0 {
		r.Skipped["empty"] = st.Empty
	}
	if p.pcap != nil {
		r.Pcap = &pcapReport{*p.pcap.Counts(), *p.pcap.MoldCounts()}
		if st.Messages == 0 {
			warnNothingRead(log, &r.Pcap.Counts, &r.Pcap.MoldCounts)
		}
	}
	code := 0
	if err != io.EOF {
		r.Error = err.Error()
		log.Error().Err(err).Msg("dry run stopped")
		code = 1
	}
	b, _ := json.Marshal(r)
	fmt.Fprintln(stdout, string(b))
	return code
}

// peakRSS returns the process's peak resident set size in bytes, 0 if it
// cannot be read.
func peakRSS() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Maxrss) << 10 // kilobytes on Linux
}
