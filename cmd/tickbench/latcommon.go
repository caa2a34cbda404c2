package main

// Pieces shared by the latency peers: the stamped payload, the HDR
// histograms every receiver records into, and the .hgrm files they write.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickcast/tickcast/internal/hgrm"
)

// latMaxNs is the largest latency the histograms tell apart; longer ones are
// recorded as this.
const latMaxNs = int64(time.Minute)

// stampLen is the stamped part at the start of every latency payload: the
// big-endian sequence number (or endMagic) and the sender's wall clock in
// Unix ns (or, in an end marker, how many data messages it sent there).
const stampLen = 16

// latStats are the percentiles of one latency histogram in µs. The JSON
// names are the subscriber summary's, so that one type reads both.
type latStats struct {
	Count  int64   `json:"latency_count"`
	P50Us  float64 `json:"latency_p50_us"`
	P90Us  float64 `json:"latency_p90_us"`
	P99Us  float64 `json:"latency_p99_us"`
	P999Us float64 `json:"latency_p999_us"`
	MaxUs  float64 `json:"latency_max_us"`
}

// newLatHist returns a histogram of ns latencies, three significant digits.
func newLatHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, latMaxNs, 3) }

// newLatSplit returns the first-second and steady-state histograms of a
// receiver, of the same range as newLatHist's.
func newLatSplit() *hgrm.Split { return hgrm.NewSplit(latMaxNs) }

// recordLat records ns clamped into the histogram's range, so RecordValue
// cannot fail (a negative latency, a clock step, counts as 1 ns).
func recordLat(h *hdrhistogram.Histogram, ns int64) { _ = h.RecordValue(min(max(ns, 1), latMaxNs)) }

// statsOf returns h's percentiles in µs.
func statsOf(h *hdrhistogram.Histogram) latStats {
	us := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	return latStats{Count: h.TotalCount(), P50Us: us(50), P90Us: us(90), P99Us: us(99), P999Us: us(99.9),
		MaxUs: float64(h.Max()) / 1e3}
}

// putStamp writes a data payload's stamp.
func putStamp(b []byte, seq uint64, ns int64) {
	binary.BigEndian.PutUint64(b, seq)
	binary.LittleEndian.PutUint64(b[8:], uint64(ns))
}

// putEnd writes an end marker announcing sent data messages.
func putEnd(b []byte, sent uint64) {
	binary.BigEndian.PutUint64(b, endMagic)
	binary.LittleEndian.PutUint64(b[8:], sent)
}

// readStamp reads a payload: a data message's send stamp, or an end
// marker's announced count.
func readStamp(b []byte) (ns int64, end bool, announced uint64) {
	if len(b) < stampLen {
		return 0, false, 0
	}
	if binary.BigEndian.Uint64(b) == endMagic {
		return 0, true, binary.LittleEndian.Uint64(b[8:])
	}
	return int64(binary.LittleEndian.Uint64(b[8:])), false, 0
}

// printLatReport finishes a receiver's or pinger's run: it puts hist's
// percentiles into *stats (rep's), writes hist to the .hgrm file at path
// (none when path is empty) and prints rep as the role's JSON line.
func printLatReport(stdout io.Writer, rep any, stats *latStats, hist *hdrhistogram.Histogram, path string) error {
	*stats = statsOf(hist)
	if err := hgrm.Write(path, hist); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rep)
}

// hgrmPoint is one line of a .hgrm file.
type hgrmPoint struct {
	ValueUs    float64
	Percentile float64 // 0..1
	Count      int64
}

// parseHgrm reads a .hgrm percentile distribution: a header line, then
// "value percentile total-count 1/(1-percentile)" lines, then "#[...]"
// footer lines. It checks the percentiles and counts never decrease.
func parseHgrm(r io.Reader) ([]hgrmPoint, error) {
	sc := bufio.NewScanner(r)
	var pts []hgrmPoint
	header := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "", strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "Value"):
			header = true
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: %d fields, want 4", n, len(f))
		}
		var p hgrmPoint
		var err error
		if p.ValueUs, err = strconv.ParseFloat(f[0], 64); err != nil {
			return nil, fmt.Errorf("line %d: value: %w", n, err)
		}
		if p.Percentile, err = strconv.ParseFloat(f[1], 64); err != nil || p.Percentile < 0 || p.Percentile > 1 {
			return nil, fmt.Errorf("line %d: percentile %q: want 0..1", n, f[1])
		}
		if p.Count, err = strconv.ParseInt(f[2], 10, 64); err != nil {
			return nil, fmt.Errorf("line %d: count: %w", n, err)
		}
		if k := len(pts); k > 0 && (p.Percentile < pts[k-1].Percentile || p.Count < pts[k-1].Count || p.ValueUs < pts[k-1].ValueUs) {
			return nil, fmt.Errorf("line %d: decreasing percentile, count or value", n)
		}
		pts = append(pts, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !header || len(pts) == 0 {
		return nil, fmt.Errorf("not a percentile distribution: header %v, %d points", header, len(pts))
	}
	return pts, nil
}

// readHgrm parses the .hgrm file at path.
func readHgrm(path string) ([]hgrmPoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pts, err := parseHgrm(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pts, nil
}

// monoEpoch anchors monoNs.
var monoEpoch = time.Now()

// monoNs is the pacers' clock: monotonic ns since the process started.
func monoNs() int64 { return int64(time.Since(monoEpoch)) }

// channelGroup is channel ch's group: the address of channel 0 plus ch,
// as tickcast numbers its channels.
func channelGroup(g netip.Addr, ch int) netip.Addr {
	b := g.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(ch)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
