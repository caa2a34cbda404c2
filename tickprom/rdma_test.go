package tickprom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tickcast/tickcast/ud/rdma"
)

// TestRDMAPortCollectorNoDevice: for a device sysfs does not have (removed,
// or never there) the collector says the port is not active and the NUMA
// node unknown, and exports no counter as zero. The series of a real
// device are checked on rxe0 in the Soft-RoCE VM (ud/rdma
// TestDiscoveryMetrics).
func TestRDMAPortCollectorNoDevice(t *testing.T) {
	c := NewRDMAPortCollector("tickcast-no-such-device", 1)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	got := gather(t, reg)
	want := map[string]float64{
		"tickcast_rdma_port_active{device=tickcast-no-such-device,port=1,state=unknown}": 0,
		"tickcast_rdma_device_numa_node{device=tickcast-no-such-device}":                 -1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (exported: %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.Contains(k, "counter") || strings.Contains(k, "drops") {
			t.Errorf("%s exported for a device that does not exist", k)
		}
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

// TestRDMAEventCollector: every event kind is exported, zeros included,
// with the rebuild counters; the collector lints clean. The counts moving
// with real events are checked in the Soft-RoCE VM (ud/rdma fault tests,
// rdma.Totals).
func TestRDMAEventCollector(t *testing.T) {
	c := NewRDMAEventCollector()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	got := gather(t, reg)
	for _, k := range []string{"tickcast_rdma_events_total{event=port_down}", "tickcast_rdma_events_total{event=port_active}",
		"tickcast_rdma_events_total{event=device_removal}", "tickcast_rdma_events_total{event=completion_error}",
		"tickcast_rdma_rebuilds_total", "tickcast_rdma_rebuild_failures_total", "tickcast_rdma_last_rebuild_outage_seconds"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s not exported (got %v)", k, got)
		}
	}
	if n, want := len(got), int(rdma.NumEvents)+3; n != want {
		t.Errorf("%d series, want %d: one per event kind and three for rebuilds", n, want)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}
