package itch

import (
	"bytes"
	"os"
	"testing"

	"github.com/tickcast/tickcast/feed"
)

// BenchmarkDecode reads and parses the real snippet over and over: framing
// plus length check plus a few field reads, per message.
func BenchmarkDecode(b *testing.B) {
	in, err := os.ReadFile(snippetPath)
	if err != nil {
		b.Fatal(err)
	}
	rd := bytes.NewReader(in)
	r := NewReader(rd)
	var sum uint64
	b.ReportAllocs()
	b.SetBytes(int64(len(in)) / 1000)
	for b.Loop() {
		raw, _, err := r.Next()
		if err != nil {
			rd.Reset(in)
			r.Reset(rd)
			raw, _, _ = r.Next()
		}
		m, err := Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		sum += uint64(m.StockLocate()) + uint64(m.Timestamp())
	}
	_ = sum
}

// BenchmarkNormalize runs a steady stream of order events (no order left
// behind, so it can repeat) through a Source: decode, books, normalize.
// The metric is per normalized message; itch_ns/msg is per ITCH message.
func BenchmarkNormalize(b *testing.B) { benchNormalize(b, 0) }

// BenchmarkNormalizeDepth is BenchmarkNormalize with level deltas of the
// top 10 levels per side (cmd/feedhandler's default --depth): compare their
// itch_ns/msg, measured in the same run, for the cost of depth.
func BenchmarkNormalizeDepth(b *testing.B) { benchNormalize(b, 10) }

func benchNormalize(b *testing.B, depth int) {
	in := steadyStream(100000)
	newSrc := func() *Source {
		src, err := NewSource(bytes.NewReader(in), Config{OrderCapacity: 1 << 16, Depth: depth, Clock: func() int64 { return 0 }})
		if err != nil {
			b.Fatal(err)
		}
		return src
	}
	src := newSrc()
	var m feed.Msg
	itch := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := src.Next(&m); err != nil {
			itch += src.Stats().Messages
			b.StopTimer()
			src = newSrc()
			b.StartTimer()
		}
	}
	itch += src.Stats().Messages
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(itch), "itch_ns/msg")
}
