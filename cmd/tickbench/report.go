package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// result is everything one tickbench run measured; --json prints it.
type result struct {
	Date         string   `json:"date"`
	Go           string   `json:"go"`
	OS           string   `json:"os"`
	Arch         string   `json:"arch"`
	CPUs         int      `json:"cpus"`
	Count        uint64   `json:"count"` // messages per tickcast run
	Repeat       int      `json:"repeat"`
	Batch        int      `json:"batch"`      // sendmmsg batch, floor and feed handler
	RecvBatch    int      `json:"recv_batch"` // the floor's recvmmsg batch
	Channels     int      `json:"channels"`
	Modes        []string `json:"modes"`
	MeanMsgBytes float64  `json:"mean_msg_bytes"` // block header + message, synthetic feed
	Size         int      `json:"size"`           // floor datagram bytes
	SizeSource   string   `json:"size_source"`    // "warm-up" (tickcast's mean packet size) or "--size"
	FloorCount   uint64   `json:"floor_count"`    // datagrams per floor run

	Warmup  tickcastResult `json:"warmup"`
	Rounds  []round        `json:"rounds"`
	Summary []metric       `json:"summary"`
}

// round is one floor run and the tickcast runs that followed it.
type round struct {
	Floor    floorResult      `json:"floor"`
	Tickcast []tickcastResult `json:"tickcast"` // one per mode
}

// metric is the summary of one figure over the rounds.
type metric struct {
	Name string `json:"name"`
	stat
}

// stat summarizes repeated measurements of one figure.
type stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// SpreadPct is (max-min)/median in percent: how far apart the rounds
	// were, the first thing to look at before trusting a median.
	SpreadPct float64 `json:"spread_pct"`
	N         int     `json:"n"`
}

// summarize computes a stat of xs. The median of an even count is the mean
// of the middle two.
func summarize(xs []float64) stat {
	if len(xs) == 0 {
		return stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	st := stat{Min: s[0], Max: s[len(s)-1], N: len(s)}
	if n := len(s); n%2 == 1 {
		st.Median = s[n/2]
	} else {
		st.Median = (s[n/2-1] + s[n/2]) / 2
	}
	if st.Median != 0 {
		st.SpreadPct = 100 * (st.Max - st.Min) / st.Median
	}
	return st
}

// summarize fills r.Summary from the rounds. Ratios are taken per round
// (each tickcast run against the floor run just before it) and then
// summarized, so that slow phases of a noisy machine affect both sides of a
// ratio alike.
func (r *result) summarize() {
	col := func(f func(rd round) float64) stat {
		var xs []float64
		for _, rd := range r.Rounds {
			xs = append(xs, f(rd))
		}
		return summarize(xs)
	}
	r.Summary = []metric{
		{"floor datagrams/s", col(func(rd round) float64 { return rd.Floor.DgramsPerS })},
		{"floor MB/s", col(func(rd round) float64 { return rd.Floor.BytesPerS / 1e6 })},
		{"floor loss %", col(func(rd round) float64 { return rd.Floor.LossPct })},
		{"floor send CPU µs/dgram", col(func(rd round) float64 { return rd.Floor.SendCPUPerDgramUs })},
		{"floor recv CPU µs/dgram", col(func(rd round) float64 { return rd.Floor.RecvCPUPerDgramUs })},
		{"floor CPU µs/dgram", col(func(rd round) float64 { return rd.Floor.CPUPerDgramUs })},
	}
	for i, mode := range r.Modes {
		tc := func(f func(t tickcastResult) float64) stat {
			return col(func(rd round) float64 { return f(rd.Tickcast[i]) })
		}
		r.Summary = append(r.Summary,
			metric{mode + " ticks/s", tc(func(t tickcastResult) float64 { return t.TicksPerS })},
			metric{mode + " packets/s", tc(func(t tickcastResult) float64 { return t.PacketsPerS })},
			metric{mode + " MB/s", tc(func(t tickcastResult) float64 { return t.BytesPerS / 1e6 })},
			metric{mode + " msgs/packet", tc(func(t tickcastResult) float64 { return t.MsgsPerPacket })},
			metric{mode + " loss %", tc(func(t tickcastResult) float64 { return t.LossPct })},
			metric{mode + " publisher msgs/s", tc(func(t tickcastResult) float64 { return t.PubMsgsPerS })},
			metric{mode + " pkt ratio", tc(func(t tickcastResult) float64 { return t.PktRatio })},
			metric{mode + " byte ratio", tc(func(t tickcastResult) float64 { return t.ByteRatio })},
			metric{mode + " pub CPU µs/packet", tc(func(t tickcastResult) float64 { return t.PubCPUPerPacketUs })},
			metric{mode + " sub CPU µs/packet", tc(func(t tickcastResult) float64 { return t.SubCPUPerPacketUs })},
			metric{mode + " CPU µs/packet", tc(func(t tickcastResult) float64 { return t.CPUPerPacketUs })},
			metric{mode + " CPU ratio", tc(func(t tickcastResult) float64 { return t.CPURatio })},
		)
	}
}

// printTable writes the human-readable report.
func printTable(w io.Writer, r *result) {
	fmt.Fprintf(w, "tickbench  %s  %s %s/%s  %d CPUs  loopback multicast via 127.0.0.1, TTL 0\n",
		r.Date, r.Go, r.OS, r.Arch, r.CPUs)
	fmt.Fprintf(w, "tickcast   feedhandler --rate 0 --count %d --channels %d --send-batch %d → subscriber --mode %s (two processes)\n",
		r.Count, r.Channels, r.Batch, strings.Join(r.Modes, " | "))
	fmt.Fprintf(w, "floor      raw sendmmsg (batch %d) → raw recvmmsg (batch %d, blocking) processes, %s datagrams × %d B per run\n",
		r.Batch, r.RecvBatch, thousands(float64(r.FloorCount)), r.Size)
	if r.SizeSource == "warm-up" {
		fmt.Fprintf(w, "           size = tickcast's mean packet in the warm-up run: %.1f msgs/packet × %.1f B + %d B header\n",
			r.Warmup.MsgsPerPacket, r.MeanMsgBytes, 20)
	} else {
		fmt.Fprintf(w, "           size set by --size; tickcast's mean packet in the warm-up run was %.0f B\n", r.Warmup.MeanPacketBytes)
	}
	fmt.Fprintf(w, "rounds     %d, each a floor run then a tickcast run per mode; the warm-up run (%s messages, %s ticks/s) is not counted\n\n",
		len(r.Rounds), thousands(float64(r.Warmup.Messages)), thousands(r.Warmup.TicksPerS))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tfloor dg/s\tloss %\t\tmode\tticks/s\tpkts/s\tmsgs/pkt\tloss %\tpkt ratio\tbyte ratio\t")
	for i, rd := range r.Rounds {
		for j, t := range rd.Tickcast {
			if j == 0 {
				fmt.Fprintf(tw, "%d\t%s\t%.2f\t\t", i+1, thousands(rd.Floor.DgramsPerS), rd.Floor.LossPct)
			} else {
				fmt.Fprint(tw, "\t\t\t\t")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.2f\t%.3f\t%.3f\t\n", t.Mode, thousands(t.TicksPerS), thousands(t.PacketsPerS),
				t.MsgsPerPacket, t.LossPct, t.PktRatio, t.ByteRatio)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmedian\tmin\tmax\tspread\t")
	for _, m := range r.Summary {
		f := func(x float64) string {
			switch {
			case strings.HasSuffix(m.Name, "ratio"):
				return fmt.Sprintf("%.3f", x)
			case strings.HasSuffix(m.Name, "%"):
				return fmt.Sprintf("%.2f", x)
			case strings.HasSuffix(m.Name, "MB/s"), strings.HasSuffix(m.Name, "msgs/packet"), strings.Contains(m.Name, "µs/"):
				return fmt.Sprintf("%.1f", x)
			}
			return thousands(x)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f%%\t\n", m.Name, f(m.Median), f(m.Min), f(m.Max), m.SpreadPct)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "pkt ratio  = tickcast data packets/s ÷ floor datagrams/s, per round")
	fmt.Fprintln(w, "byte ratio = tickcast MoldUDP64 bytes/s ÷ floor bytes/s, per round; with the default --size it is")
	fmt.Fprintln(w, "             ticks/s ÷ (floor datagrams/s × msgs/packet): how close tickcast gets to the floor's throughput")
	fmt.Fprintln(w, "CPU ratio  = floor CPU time per datagram ÷ tickcast CPU time per packet, both processes, user + system")
	fmt.Fprintln(w, "             (pub = feedhandler, sub = subscriber; loopback delivery is charged to the sending process)")
	fmt.Fprintln(w, "spread     = (max − min) ÷ median over the rounds; rates are received ones, loss = sent but not received")
}

// thousands formats x rounded to an integer, with comma thousands separators.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
