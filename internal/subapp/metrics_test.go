package subapp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
)

// TestTickLatency checks that the tick-to-handler latency runs from the
// message header's receive timestamp to the release time Released was
// given, beside the send-to-release latency, and that --latency-out writes
// the send-to-release histogram.
func TestTickLatency(t *testing.T) {
	m := newAppMetrics()
	const base = int64(1_767_364_200_000_000_000)
	msg := feed.Msg{Header: feed.Header{Type: feed.TypeTrade, Instrument: 1, RecvNs: base, SendNs: base + 30_000}}
	b := make([]byte, feed.Size(feed.TypeTrade))
	if _, err := msg.Encode(b); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 100; i++ {
		rel := base + 100_000 + i*1000 // 100..199 µs after the receive stamp
		m.Released(0, base+30_000, 0, rel)
		m.tick(b)
	}
	m.tick(b[:feed.HeaderLen-1]) // too short: skipped
	s := m.summary()
	if s.TickLatencyCount != 100 || s.LatencyCount != 100 {
		t.Fatalf("counts: tick %d, send %d, want 100 each", s.TickLatencyCount, s.LatencyCount)
	}
	if s.TickLatencyP50Us < 149 || s.TickLatencyP50Us > 151 || s.TickLatencyMaxUs < 198.9 || s.TickLatencyMaxUs > 199.1 {
		t.Errorf("tick latency p50 %v max %v µs, want about 150 and 199", s.TickLatencyP50Us, s.TickLatencyMaxUs)
	}
	if s.LatencyP50Us < 119 || s.LatencyP50Us > 121 {
		t.Errorf("send-to-release p50 %v µs, want about 120", s.LatencyP50Us)
	}
	path := filepath.Join(t.TempDir(), "lat.hgrm")
	m.writeLatency(path, zerolog.Nop())
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), " Value\tPercentile\tTotalCount") || !strings.Contains(string(out), "Total count    =          100") {
		t.Errorf("latency-out file:\n%s", out)
	}
}

// TestRecoveryP99 checks the summary's recovery_p99_us: the 99th
// percentile of the latencies Recovered was given.
func TestRecoveryP99(t *testing.T) {
	m := newAppMetrics()
	if p := m.recoveryP99(); p != 0 {
		t.Fatalf("p99 %v µs before any answer, want 0", p)
	}
	for i := range 1000 {
		m.Recovered(0, time.Duration(i+1)*time.Microsecond) // 1..1000 µs
	}
	if p := m.recoveryP99(); p < 989 || p > 991 {
		t.Errorf("p99 of 1..1000 µs: %v µs, want about 990", p)
	}
}
