package main

// Percentile plots as SVG, drawn like HdrHistogram's plotter: the x axis is
// the percentile on a log scale of 1/(1-p) (0%, 90%, 99%, 99.9%, ...), the
// y axis the latency, here on a log scale too so that a p50 of 20 µs and a
// max of 5 ms both stay readable.

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// plotSeries is one line of a plot.
type plotSeries struct {
	Name   string
	Points []hgrmPoint
}

// plotPalette colours the series in order.
var plotPalette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"}

// plotMaxX is the rightmost percentile decade drawn: 99.9999%.
const plotMaxX = 6

// percentileX is where percentile p (0..1) sits on the x axis.
func percentileX(p float64) float64 {
	if p >= 1 {
		return plotMaxX
	}
	return min(plotMaxX, math.Log10(1/(1-p)))
}

// svgPlot draws the series as an SVG document.
func svgPlot(title, yLabel string, series []plotSeries) string {
	const w, h, left, right, top, bottom = 900.0, 520.0, 70.0, 220.0, 40.0, 50.0
	pw, ph := w-left-right, h-top-bottom
	lo, hi, xmax := math.Inf(1), math.Inf(-1), 1.0
	for _, s := range series {
		for _, p := range s.Points {
			v := max(p.ValueUs, 0.1)
			lo, hi = min(lo, v), max(hi, v)
			if p.Percentile < 1 {
				xmax = max(xmax, math.Ceil(percentileX(p.Percentile)-1e-9))
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	ylo, yhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yhi <= ylo {
		yhi = ylo + 1
	}
	xmax = min(xmax, plotMaxX)
	px := func(x float64) float64 { return left + pw*min(x, xmax)/xmax }
	py := func(v float64) float64 { return top + ph*(1-(math.Log10(max(v, 0.1))-ylo)/(yhi-ylo)) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15">%s</text>`+"\n", left, html.EscapeString(title))
	// Grid and axes.
	for d := 0.0; d <= xmax; d++ {
		label := "0%"
		if d > 0 {
			label = fmt.Sprintf("%.*f%%", int(max(0, d-2)), 100*(1-math.Pow(10, -d))) // 90%, 99%, 99.9%, ...
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px(d), top, px(d), top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(d), top+ph+18, label)
	}
	for e := ylo; e <= yhi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if math.Log10(v) > yhi+1e-9 {
				break
			}
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, py(v), left+pw, py(v), stroke)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(v)+4, strings.TrimSuffix(fmt.Sprintf("%g", v), ".0"))
		}
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">percentile</text>`+"\n", left+pw/2, h-12)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+ph/2, html.EscapeString(yLabel))
	// Series.
	for i, s := range series {
		c := plotPalette[i%len(plotPalette)]
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(percentileX(p.Percentile)), py(p.ValueUs)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		ly := top + 16 + 18*float64(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", left+pw+12, ly-4, left+pw+32, ly-4, c)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+pw+38, ly, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// writePlots draws one plot per channel count and rate (every peer's
// median round) and one of the ping-pong round trips, into outdir, and
// returns their paths.
func writePlots(r *latResult, outdir string) ([]string, error) {
	var paths []string
	write := func(name, title, yLabel string, series []plotSeries) error {
		if len(series) == 0 {
			return nil
		}
		p := filepath.Join(outdir, name)
		if err := os.WriteFile(p, []byte(svgPlot(title, yLabel, series)), 0o644); err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	}
	for _, ch := range r.Channels {
		for _, rate := range r.Rates {
			var series []plotSeries
			for _, s := range r.Summary {
				if s.Channels != ch || s.Rate != rate || s.Probe || s.Hgrm == "" {
					continue
				}
				pts, err := readHgrm(s.Hgrm)
				if err != nil {
					return paths, err
				}
				series = append(series, plotSeries{s.Peer, pts})
			}
			title := fmt.Sprintf("latency at %s msg/s, %d channel(s) (median round)", rateName(rate), ch)
			if err := write(fmt.Sprintf("latency_c%d_%s.svg", ch, rateName(rate)), title, "latency (µs)", series); err != nil {
				return paths, err
			}
		}
	}
	// Ping-pong: the round with each transport's median RTT p50.
	var series []plotSeries
	for _, t := range []string{ppUDP, ppTickcast + "-direct", ppTickcast + "-blocking", ppNATS} {
		var runs []ppRun
		for _, p := range r.PingPong {
			if p.Transport == t && p.Err == "" && p.Hgrm != "" {
				runs = append(runs, p)
			}
		}
		if len(runs) == 0 {
			continue
		}
		p50s := mapSlice(runs, func(p ppRun) float64 { return p.RTT.P50Us })
		med := summarize(p50s).Median
		best := runs[0]
		for _, p := range runs {
			if math.Abs(p.RTT.P50Us-med) < math.Abs(best.RTT.P50Us-med) {
				best = p
			}
		}
		pts, err := readHgrm(best.Hgrm)
		if err != nil {
			return paths, err
		}
		series = append(series, plotSeries{t, pts})
	}
	if err := write("pingpong.svg", "ping-pong round trip (median round)", "round trip (µs)", series); err != nil {
		return paths, err
	}
	return paths, nil
}
