package subapp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLatencySplit checks the summary's latency_first_* and
// latency_steady_*: messages released within a second of the first one
// count as the first second, the rest as the steady state, and the counts
// add up to latency_count. Released must not allocate for it.
func TestLatencySplit(t *testing.T) {
	m := newAppMetrics()
	const t0 = int64(1_767_364_200_000_000_000)
	rel := t0
	for i := range 3000 { // one per ms for 3 s
		rel = t0 + int64(i)*int64(time.Millisecond)
		lat := int64(500_000) // 500 µs in the first second
		if rel-t0 >= int64(time.Second) {
			lat = 50_000 // 50 µs after
		}
		m.Released(0, rel-lat, 0, rel)
	}
	if n := testing.AllocsPerRun(100, func() { rel += 1000; m.Released(0, rel-50_000, 0, rel) }); n != 0 {
		t.Errorf("Released: %v allocations per call, want 0", n)
	}
	s := m.summary()
	if s.FirstCount != 1000 || s.SteadyCount != s.LatencyCount-1000 {
		t.Fatalf("counts: first %d, steady %d, whole %d; want 1000 and the rest", s.FirstCount, s.SteadyCount, s.LatencyCount)
	}
	if s.FirstP50Us < 499 || s.FirstP50Us > 501 || s.SteadyP99Us < 49.9 || s.SteadyP99Us > 50.1 || s.SteadyMaxUs > 50.1 {
		t.Errorf("first p50 %v µs, steady p99 %v max %v µs; want 500, 50 and 50", s.FirstP50Us, s.SteadyP99Us, s.SteadyMaxUs)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"latency_first_p99_us":`, `"latency_steady_p999_us":`, `"latency_steady_count":`, `"latency_p50_us":`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("summary JSON lacks %s: %s", k, b)
		}
	}
}
