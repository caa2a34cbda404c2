package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

// The whole path (--day): an ITCH day in NASDAQ's file format → the real
// feed handler (--source itch:FILE --rate 0 --linger 1s, depth at its
// default) → one or more subscribers at their defaults, beside the raw
// floor in the same rounds. Every subscriber must receive every tick the
// feed handler published (0 missing) or the run fails: a rate bought with
// loss is no rate.

// daySettings are the --day flags.
type daySettings struct {
	file     string // --itch-file; empty: generate count messages
	count    uint64 // ITCH messages to generate
	channels []int
	subs     []int
	rounds   int
	batch    int
	baseline string // a git revision run as a peer in the same rounds
	timeout  time.Duration
	json     bool
	out      string
	markdown string
	gso      bool // also run the peer tickcast-gso: this tree with feedhandler --gso
	gro      bool // also run the peer tickcast-gro: this tree with feedhandler --gso and subscriber --gro
	noAuth   bool // also run the peer tickcast-noauth: this tree with --auth=false on both sides
}

// dayPeer is one pair of binaries: this tree's or the baseline's.
type dayPeer struct {
	name                    string
	feedhandler, subscriber string
	fhFlags                 []string // added to the feed handler's arguments
	subFlags                []string // added to each subscriber's
}

// dayProc is one process's cost in a day run.
type dayProc struct {
	CPUS        float64 `json:"cpu_s"` // user + system
	UserS       float64 `json:"user_s"`
	SysS        float64 `json:"sys_s"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	UsPerTick   float64 `json:"cpu_us_per_tick"`
	UsPerPacket float64 `json:"cpu_us_per_packet"`
}

// dayRun is one feed handler and its subscribers over the whole file.
type dayRun struct {
	Round         int       `json:"round"`
	Peer          string    `json:"peer"`
	Channels      int       `json:"channels"`
	Subs          int       `json:"subs"`
	ITCHMessages  uint64    `json:"itch_messages"`
	Ticks         uint64    `json:"ticks"` // published
	Packets       uint64    `json:"packets"`
	MsgsPerPacket float64   `json:"ticks_per_packet"`
	Missing       uint64    `json:"missing"` // the most any subscriber missed
	WindowS       float64   `json:"window_s"`
	ITCHPerS      float64   `json:"itch_msgs_per_s"`
	TicksPerS     float64   `json:"ticks_per_s"`
	PacketsPerS   float64   `json:"packets_per_s"`
	FeedHandler   dayProc   `json:"feedhandler"`
	Subscribers   []dayProc `json:"subscribers"`
	SubMallocs    float64   `json:"sub_mallocs_per_msg"` // the most of any subscriber
	// Against the floor of the same round.
	PktRatio    float64 `json:"pkt_ratio"`     // packets/s ÷ the floor's datagrams/s
	PubCPURatio float64 `json:"pub_cpu_ratio"` // feed handler CPU per packet ÷ the floor sender's per datagram
	SubCPURatio float64 `json:"sub_cpu_ratio"` // first subscriber's CPU per packet ÷ the floor receiver's
}

// dayRound is one round: the floor, then every peer at every size.
type dayRound struct {
	Floor floorResult `json:"floor"`
	// FloorGSO is the same floor sending FloorGSOSegments datagrams per
	// UDP GSO write instead of sendmmsg; FloorGSOError says why it could
	// not run (a kernel without UDP GSO).
	FloorGSO      *floorResult `json:"floor_gso,omitempty"`
	FloorGSOError string       `json:"floor_gso_error,omitempty"`
	// FloorGRO is the GSO floor with a receiver that asks for UDP GRO, so
	// that each write arrives as one buffer; FloorGROError says why it
	// could not run.
	FloorGRO      *floorResult `json:"floor_gro,omitempty"`
	FloorGROError string       `json:"floor_gro_error,omitempty"`
	Runs          []dayRun     `json:"runs"`
}

// dayResult is what --day prints.
type dayResult struct {
	Date         string     `json:"date"`
	Go           string     `json:"go"`
	CPUs         int        `json:"cpus"`
	File         string     `json:"file"`
	ITCHMessages uint64     `json:"itch_messages"`
	FileBytes    int64      `json:"file_bytes"`
	Batch        int        `json:"batch"`
	Baseline     string     `json:"baseline,omitempty"`
	FloorSize    int        `json:"floor_size"`
	FloorCount   uint64     `json:"floor_count"`
	Rounds       []dayRound `json:"rounds"`
}

func (s *daySettings) validate() error {
	switch {
	case s.file == "" && (s.count < 100_000 || s.count > 1_000_000_000):
		return fmt.Errorf("--count %d: want 100000..1000000000 ITCH messages (--day writes a day of 8,000 stocks)", s.count)
	case s.rounds < 1 || s.rounds > 50:
		return fmt.Errorf("--repeat %d: want 1..50", s.rounds)
	case s.batch < 1 || s.batch > 1024:
		return fmt.Errorf("--batch %d: want 1..1024", s.batch)
	case s.timeout < time.Second:
		return fmt.Errorf("--timeout %v: want at least 1s", s.timeout)
	}
	for _, c := range s.channels {
		if c < 1 || c > 32 {
			return fmt.Errorf("--channels %d: want 1..32", c)
		}
	}
	for _, n := range s.subs {
		if n < 1 || n > 8 {
			return fmt.Errorf("--subs %d: want 1..8", n)
		}
	}
	return nil
}

// runDayMain is --day: it measures and prints the result.
func runDayMain(ctx context.Context, s daySettings, stdout, stderr io.Writer) int {
	if err := s.validate(); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	if s.file != "" {
		if _, err := os.Stat(s.file); err != nil {
			fmt.Fprintf(stderr, "tickbench: --itch-file: %v\n", err)
			return 2
		}
	}
	res, err := measureDay(ctx, s, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	if s.markdown != "" {
		if err := writeDaySection(s.markdown, res); err != nil {
			fmt.Fprintf(stderr, "tickbench: %v\n", err)
			return 1
		}
	}
	if err := emit(res, s.out, s.json, stdout, func(w io.Writer) { printDay(w, res) }); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	return 0
}

// measureDay builds the binaries, writes the day (unless given one), runs
// a warm-up that sizes the floor, and the rounds.
func measureDay(ctx context.Context, s daySettings, progress io.Writer) (*dayResult, error) {
	exe, dir, fhBin, subBin, err := prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	peers := []dayPeer{{"tickcast", fhBin, subBin, nil, nil}}
	if s.gso {
		peers = append(peers, dayPeer{"tickcast-gso", fhBin, subBin, []string{"--gso"}, nil})
	}
	if s.gro {
		peers = append(peers, dayPeer{"tickcast-gro", fhBin, subBin, []string{"--gso"}, []string{"--gro"}})
	}
	if s.noAuth {
		peers = append(peers, dayPeer{"tickcast-noauth", fhBin, subBin, []string{"--auth=false"}, []string{"--auth=false"}})
	}
	if s.baseline != "" {
		fmt.Fprintf(progress, "tickbench: building the baseline %s\n", s.baseline)
		bdir := filepath.Join(dir, "baseline")
		if err := os.Mkdir(bdir, 0o755); err != nil {
			return nil, err
		}
		bfh, bsub, err := buildAt(ctx, s.baseline, bdir)
		if err != nil {
			return nil, err
		}
		peers = append(peers, dayPeer{"baseline", bfh, bsub, nil, nil})
	}
	res := &dayResult{Date: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(), CPUs: runtime.NumCPU(),
		File: s.file, Batch: s.batch, Baseline: s.baseline}
	if res.File == "" {
		res.File = filepath.Join(dir, "day.itch")
		fmt.Fprintf(progress, "tickbench: writing an ITCH day of %d messages\n", s.count)
		if err := writeDay(res.File, s.count); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(res.File)
	if err != nil {
		return nil, err
	}
	res.FileBytes = st.Size()
	if res.ITCHMessages, err = countITCH(res.File); err != nil {
		return nil, err
	}

	// The warm-up pays for first-exec costs and reads the file into the
	// page cache; its packets size the floor's datagrams and count.
	fmt.Fprintf(progress, "tickbench: warm-up: the whole day through tickcast, %d channel(s), 1 subscriber\n", s.channels[0])
	warm, err := runDay(ctx, peers[0], res.File, res.ITCHMessages, s.channels[0], 1, s.batch, s.timeout)
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	res.FloorCount, res.FloorSize = warm.Packets, warm.meanPacketBytes
	if res.FloorSize < minSize {
		return nil, fmt.Errorf("warm-up: the feed handler reported no packet bytes (%d packets)", warm.Packets)
	}
	fc := floorConfig{Exe: []string{exe}, Count: res.FloorCount, Size: res.FloorSize, Batch: s.batch, Timeout: s.timeout}
	for i := 1; i <= s.rounds; i++ {
		fmt.Fprintf(progress, "tickbench: round %d/%d: floor %d × %d B", i, s.rounds, fc.Count, fc.Size)
		var rd dayRound
		if rd.Floor, err = runFloor(ctx, fc); err != nil {
			return nil, fmt.Errorf("round %d: floor: %w", i, err)
		}
		fmt.Fprintf(progress, " %.0f dg/s", rd.Floor.DgramsPerS)
		runGSOFloors(ctx, fc, &rd, progress)
		for _, ch := range s.channels {
			for _, n := range s.subs {
				for _, p := range peers {
					r, err := runDay(ctx, p, res.File, res.ITCHMessages, ch, n, s.batch, s.timeout)
					if err != nil {
						fmt.Fprintln(progress)
						return nil, fmt.Errorf("round %d: %s, %d channel(s), %d subscriber(s): %w", i, p.name, ch, n, err)
					}
					r.Round = i
					r.compare(rd.Floor)
					fmt.Fprintf(progress, "; %s %dch×%d %.2fM itch/s", p.name, ch, n, r.ITCHPerS/1e6)
					rd.Runs = append(rd.Runs, r.dayRun)
				}
			}
		}
		fmt.Fprintln(progress)
		res.Rounds = append(res.Rounds, rd)
	}
	return res, nil
}

// compare fills the ratios to the floor of the same round.
func (r *dayRunOut) compare(f floorResult) {
	if f.DgramsPerS > 0 {
		r.PktRatio = r.PacketsPerS / f.DgramsPerS
	}
	if f.SendCPUPerDgramUs > 0 {
		r.PubCPURatio = r.FeedHandler.UsPerPacket / f.SendCPUPerDgramUs
	}
	if f.RecvCPUPerDgramUs > 0 && len(r.Subscribers) > 0 {
		r.SubCPURatio = r.Subscribers[0].UsPerPacket / f.RecvCPUPerDgramUs
	}
}

// dayRunOut is a dayRun and what sizes the floor.
type dayRunOut struct {
	dayRun
	meanPacketBytes int
}

// writeDay writes an itchgen day of count messages to path: 8,000 stocks
// and up to 1,000,000 live orders (a tenth of the messages for short days),
// the day of docs/scale.md.
func writeDay(path string, count uint64) error {
	g, err := itchgen.New(itchgen.Config{Seed: 1, Stocks: 8000, Orders: int(min(1_000_000, count/10)), Messages: count})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := g.WriteTo(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// countITCH counts the messages of an ITCH file in NASDAQ's format: each a
// 2-byte big-endian length and the message.
func countITCH(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [2]byte
	var n uint64
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, fmt.Errorf("%s: after %d messages: %w", path, n, err)
		}
		if _, err := r.Discard(int(binary.BigEndian.Uint16(hdr[:]))); err != nil {
			return n, fmt.Errorf("%s: message %d: %w", path, n+1, err)
		}
		n++
	}
}

// runDay runs subs subscribers and then the feed handler over file on a
// fresh group, and combines what they report. Each subscriber exits when
// every channel's session ended.
func runDay(ctx context.Context, p dayPeer, file string, itchMsgs uint64, channels, subs, batch int, timeout time.Duration) (dayRunOut, error) {
	group, port, err := freshGroup(77, channels)
	if err != nil {
		return dayRunOut{}, err
	}
	g := fmt.Sprintf("%s:%d", group, port)
	ch := strconv.Itoa(channels)
	ns := isolatedNATS()
	subArgs := append([]string{"--group", g, "--iface", "127.0.0.1", "--channels", ch, "--idle-timeout", subIdleTimeout.String(),
		"--format", "none", "--log-format", "json", "--log-level", "info"}, ns.subArgs()...)
	var procs []*proc
	defer func() {
		for _, s := range procs {
			s.kill()
		}
	}()
	for i := 0; i < subs; i++ {
		sp, err := startReady(ctx, fmt.Sprintf("subscriber %d", i+1), timeout, []string{p.subscriber}, append(slices.Clone(subArgs), p.subFlags...), `"message":"subscribed"`, 10*time.Second)
		if err != nil {
			return dayRunOut{}, err
		}
		procs = append(procs, sp)
	}
	fhArgs := []string{"--source", "itch:" + file, "--rate", "0", "--linger", ns.linger().String(), "--group", g, "--iface", "127.0.0.1", "--ttl", "0",
		"--channels", ch, "--send-batch", strconv.Itoa(batch), "--log-format", "json", "--log-level", "warn",
		"--metrics-addr=", "--nats-listen", cmp.Or(ns.listen, "127.0.0.1:0")}
	fhArgs = append(fhArgs, p.fhFlags...)
	var fs fhSummary
	fh, fhAt, err := runToEnd(ctx, "feedhandler", timeout, []string{p.feedhandler}, fhArgs, &fs)
	if err != nil {
		return dayRunOut{}, err
	}
	if fs.Interrupted || fs.Messages == 0 {
		return dayRunOut{}, fh.failure(fmt.Sprintf("published %d ticks (interrupted %v)", fs.Messages, fs.Interrupted))
	}
	r := dayRunOut{dayRun: dayRun{Peer: p.name, Channels: channels, Subs: subs, Ticks: fs.Messages, Packets: fs.Packets,
		MsgsPerPacket: fs.MsgsPerPacket}}
	if fs.Packets > 0 && fs.PacketBytes > 0 {
		r.meanPacketBytes = int(math.Round(float64(fs.PacketBytes) / float64(fs.Packets)))
	}
	r.ITCHMessages = itchMsgs
	start := fhAt.Add(-time.Duration(fs.ElapsedS*float64(time.Second)) - ns.linger())
	var last time.Time
	for _, sp := range procs {
		var ss subSummary
		at, err := sp.summary(&ss)
		if err != nil {
			return r, err
		}
		if ss.ExitReason == "idle-timeout" {
			at = at.Add(-subIdleTimeout)
		}
		if at.After(last) {
			last = at
		}
		if ss.Received < fs.Messages {
			r.Missing = max(r.Missing, fs.Messages-ss.Received)
		}
		r.SubMallocs = max(r.SubMallocs, ss.MallocsPerMsg)
		r.Subscribers = append(r.Subscribers, procCost(sp, fs.Messages, fs.Packets))
	}
	r.FeedHandler = procCost(fh, fs.Messages, fs.Packets)
	r.WindowS = last.Sub(start).Seconds()
	if r.WindowS <= 0 {
		return r, fmt.Errorf("empty time window")
	}
	r.ITCHPerS = float64(r.ITCHMessages) / r.WindowS
	r.TicksPerS = float64(r.Ticks) / r.WindowS
	r.PacketsPerS = float64(r.Packets) / r.WindowS
	if r.Missing > 0 {
		return r, fmt.Errorf("a subscriber missed %d of %d ticks", r.Missing, fs.Messages)
	}
	return r, nil
}

// procCost is an exited process's CPU time and peak resident memory, and
// its CPU per tick and per packet.
func procCost(p *proc, ticks, packets uint64) dayProc {
	<-p.done
	var c dayProc
	ps := p.cmd.ProcessState
	if ps == nil {
		return c
	}
	c.UserS, c.SysS = ps.UserTime().Seconds(), ps.SystemTime().Seconds()
	c.CPUS = c.UserS + c.SysS
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		c.PeakRSSMB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	if ticks > 0 {
		c.UsPerTick = 1e6 * c.CPUS / float64(ticks)
	}
	if packets > 0 {
		c.UsPerPacket = 1e6 * c.CPUS / float64(packets)
	}
	return c
}

// dayKey is one configuration of the rounds: a peer at a size.
type dayKey struct {
	peer           string
	channels, subs int
}

// printDay prints the medians over the rounds of every configuration, and
// the floor's, as Markdown tables.
func printDay(w io.Writer, r *dayResult) {
	fmt.Fprintf(w, "tickbench --day  %s  %s  %d CPUs  loopback multicast via 127.0.0.1, TTL 0\n\n", r.Date, r.Go, r.CPUs)
	fmt.Fprintf(w, "input: %s, %d ITCH messages, %.0f MB; feedhandler --source itch:FILE --rate 0 --linger 1s --send-batch %d (the window subtracts the linger); subscribers at their defaults (--recovery=false: a loss shows as missing; their keys from the feed handler's NATS)\n",
		r.File, r.ITCHMessages, float64(r.FileBytes)/1e6, r.Batch)
	fmt.Fprintf(w, "floor: raw sendmmsg (batch %d) → raw recvmmsg, %d datagrams × %d B (tickcast's packets in the warm-up run); %d rounds, medians (min–max)\n\n",
		r.Batch, r.FloorCount, r.FloorSize, len(r.Rounds))
	var floorRate, floorSend, floorRecv []float64
	groups := map[dayKey][]dayRun{}
	var keys []dayKey
	for _, rd := range r.Rounds {
		floorRate = append(floorRate, rd.Floor.DgramsPerS)
		floorSend = append(floorSend, rd.Floor.SendCPUPerDgramUs)
		floorRecv = append(floorRecv, rd.Floor.RecvCPUPerDgramUs)
		for _, run := range rd.Runs {
			k := dayKey{run.Peer, run.Channels, run.Subs}
			if _, ok := groups[k]; !ok {
				keys = append(keys, k)
			}
			groups[k] = append(groups[k], run)
		}
	}
	fmt.Fprintf(w, "floor: %s datagrams/s, sender %s µs CPU/datagram, receiver %s µs CPU/datagram\n",
		spread(floorRate, 1e-3, "%.0fk"), spread(floorSend, 1, "%.2f"), spread(floorRecv, 1, "%.2f"))
	writeFloorVariant(w, r, "floor with UDP GSO (%d datagrams a write, the same size)", func(rd dayRound) (*floorResult, string) { return rd.FloorGSO, rd.FloorGSOError })
	writeFloorVariant(w, r, "floor with UDP GSO (%d datagrams a write) and a receiver with UDP GRO", func(rd dayRound) (*floorResult, string) { return rd.FloorGRO, rd.FloorGROError })
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| peer | channels | subscribers | ITCH msg/s | ticks/s | packets/s | × floor packets/s | feed handler µs/tick | µs/packet | × floor sender | peak RSS MB | subscriber µs/packet | × floor receiver | subscriber peak RSS MB | missing |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range keys {
		runs := groups[k]
		col := func(f func(dayRun) float64, scale float64, format string) string {
			var v []float64
			for _, run := range runs {
				v = append(v, f(run))
			}
			return spread(v, scale, format)
		}
		var missing uint64
		for _, run := range runs {
			missing = max(missing, run.Missing)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", k.peer, k.channels, k.subs,
			col(func(d dayRun) float64 { return d.ITCHPerS }, 1e-6, "%.2fM"),
			col(func(d dayRun) float64 { return d.TicksPerS }, 1e-6, "%.2fM"),
			col(func(d dayRun) float64 { return d.PacketsPerS }, 1e-3, "%.0fk"),
			col(func(d dayRun) float64 { return d.PktRatio }, 1, "%.2f"),
			col(func(d dayRun) float64 { return d.FeedHandler.UsPerTick }, 1, "%.3f"),
			col(func(d dayRun) float64 { return d.FeedHandler.UsPerPacket }, 1, "%.1f"),
			col(func(d dayRun) float64 { return d.PubCPURatio }, 1, "%.2f"),
			col(func(d dayRun) float64 { return d.FeedHandler.PeakRSSMB }, 1, "%.0f"),
			col(func(d dayRun) float64 { return maxOf(d.Subscribers, func(p dayProc) float64 { return p.UsPerPacket }) }, 1, "%.1f"),
			col(func(d dayRun) float64 { return d.SubCPURatio }, 1, "%.2f"),
			col(func(d dayRun) float64 { return maxOf(d.Subscribers, func(p dayProc) float64 { return p.PeakRSSMB }) }, 1, "%.0f"),
			missing)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "µs/tick and µs/packet: the process's user + system CPU time over the ticks and packets published; on loopback the")
	fmt.Fprintln(w, "sender's system time includes delivering every datagram to every receiving socket. Subscriber columns: the costliest subscriber.")
}

// maxOf is the largest f over ps.
func maxOf(ps []dayProc, f func(dayProc) float64) float64 {
	var m float64
	for _, p := range ps {
		m = max(m, f(p))
	}
	return m
}

// spread formats the median of v (times scale) and, with more than one
// value, its range.
func spread(v []float64, scale float64, format string) string {
	if len(v) == 0 {
		return "-"
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	out := fmt.Sprintf(format, med*scale)
	if len(s) > 1 {
		out += " (" + fmt.Sprintf(format, s[0]*scale) + "–" + fmt.Sprintf(format, s[len(s)-1]*scale) + ")"
	}
	return out
}

// The --day report's section of a Markdown file (BENCHMARKS.md), between
// these marks: a latency run that rewrites the file keeps it, and a day run
// replaces it or, the first time, appends it.
const (
	dayBegin = "<!-- tickbench --day: begin -->"
	dayEnd   = "<!-- tickbench --day: end -->"
)

// daySection returns the marked day section of md, marks included.
func daySection(md string) (string, bool) {
	i := strings.Index(md, dayBegin)
	j := strings.Index(md, dayEnd)
	if i < 0 || j < i {
		return "", false
	}
	return md[i:j+len(dayEnd)] + "\n", true
}

// writeDaySection writes r as the day section of the Markdown file path,
// replacing the one there or appending it; a missing file is created.
func writeDaySection(path string, r *dayResult) error {
	var sec strings.Builder
	sec.WriteString(dayBegin + "\n\n## The whole path: an ITCH day (tickbench --day)\n\n")
	sec.WriteString("<!-- Generated by go run ./cmd/tickbench --day --markdown FILE; do not edit by hand. -->\n\n")
	sec.WriteString("```\n")
	printDay(&sec, r)
	sec.WriteString("```\n\n" + dayEnd + "\n")
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	md := string(old)
	if cur, ok := daySection(md); ok {
		md = strings.Replace(md, cur, sec.String(), 1)
	} else {
		if md != "" && !strings.HasSuffix(md, "\n\n") {
			md = strings.TrimRight(md, "\n") + "\n\n"
		}
		md += sec.String()
	}
	return os.WriteFile(path, []byte(md), 0o644)
}

// writeFloorVariant writes one line for a variant of the floor that rounds
// may hold (get returns it, or why it did not run): its rates and CPU per
// datagram over the rounds. title takes the datagrams per write.
func writeFloorVariant(w io.Writer, r *dayResult, title string, get func(dayRound) (*floorResult, string)) {
	var rate, send, recv []float64
	var why string
	for _, rd := range r.Rounds {
		if g, err := get(rd); g != nil {
			rate, send, recv = append(rate, g.DgramsPerS), append(send, g.SendCPUPerDgramUs), append(recv, g.RecvCPUPerDgramUs)
		} else if err != "" {
			why = err
		}
	}
	name := fmt.Sprintf(title, min(maxGSOSegments, maxGSOBytes/max(1, r.FloorSize)))
	switch {
	case len(rate) > 0:
		fmt.Fprintf(w, "%s: %s datagrams/s, sender %s µs CPU/datagram, receiver %s µs CPU/datagram\n",
			name, spread(rate, 1e-3, "%.0fk"), spread(send, 1, "%.2f"), spread(recv, 1, "%.2f"))
	case why != "":
		fmt.Fprintf(w, "%s: not run: %s\n", name, why)
	}
}

// runGSOFloors runs the round's floor with UDP GSO writes, and with a GRO
// receiver too, recording each result or why it could not run.
func runGSOFloors(ctx context.Context, fc floorConfig, rd *dayRound, progress io.Writer) {
	gc := fc
	gc.GSO = min(maxGSOSegments, maxGSOBytes/fc.Size)
	g, err := runFloor(ctx, gc)
	if err != nil {
		rd.FloorGSOError = err.Error()
		fmt.Fprintf(progress, "; floor with GSO: %v", err)
		return
	}
	rd.FloorGSO = &g
	fmt.Fprintf(progress, "; floor with GSO (%d a write) %.0f dg/s", gc.GSO, g.DgramsPerS)
	gc.GRO = true
	if g, err := runFloor(ctx, gc); err != nil {
		rd.FloorGROError = err.Error()
		fmt.Fprintf(progress, "; floor with GSO and GRO: %v", err)
	} else {
		rd.FloorGRO = &g
		fmt.Fprintf(progress, "; and GRO %.0f dg/s", g.DgramsPerS)
	}
}
