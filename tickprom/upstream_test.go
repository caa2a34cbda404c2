package tickprom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tickcast/tickcast/feed/upstream"
	"github.com/tickcast/tickcast/seqgap"
)

// TestUpstreamCollector: each counter of upstream.Stats is exported under
// its name and labels, every loss reason present at 0 when nothing was
// lost for it, and the metrics pass the linter.
func TestUpstreamCollector(t *testing.T) {
	var st upstream.Stats
	st.Tracker.PacketsOnLine = [2]uint64{7, 5}
	st.Tracker.Recovered = 11
	st.Lines[1].KernelDrops = 2
	st.Lost[seqgap.LossRefused] = 3
	st.Lost[seqgap.LossSkipped] = 99
	st.GaveUp, st.BadAnswers, st.Requests = 1, 4, 13
	c := NewUpstreamCollector(func() upstream.Stats { return st })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	got := gather(t, reg)
	want := map[string]float64{
		"tickcast_upstream_packets_total{line=a}":                        7,
		"tickcast_upstream_packets_total{line=b}":                        5,
		"tickcast_upstream_kernel_drops_total{line=b}":                   2,
		"tickcast_upstream_recovered_messages_total":                     11,
		"tickcast_upstream_lost_messages_total{reason=refused}":          3,
		"tickcast_upstream_lost_messages_total{reason=skipped}":          99,
		"tickcast_upstream_lost_messages_total{reason=timeout}":          0,
		"tickcast_upstream_lost_messages_total{reason=window-full}":      0,
		"tickcast_upstream_lost_messages_total{reason=session-replaced}": 0,
		"tickcast_upstream_rerequests_given_up_total":                    1,
		"tickcast_upstream_rerequest_bad_answers_total":                  4,
		"tickcast_upstream_rerequests_total":                             13,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (exported: %v), want %v", k, g, ok, v)
		}
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}
