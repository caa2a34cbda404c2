package tickprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

type rdmaPortCollector struct {
	metricSet
	device string
	port   int

	active, numa, dirs, portCounter, hwCounter, drops *prometheus.Desc
}

// NewRDMAPortCollector returns a Prometheus collector of an RDMA device
// port's sysfs counters (tickcast_rdma_*; package ud/rdma/devices), read at
// scrape time: the port's counters/ (InfiniBand port counters, drops and
// discards among them) and hw_counters/ (the driver's own), each counter
// as the device reports it, with a gauge saying which directories exist. A
// device without counters/ (Soft-RoCE) exports none of its series instead
// of zeros.
func NewRDMAPortCollector(device string, port int) prometheus.Collector {
	c := &rdmaPortCollector{device: device, port: port}
	const n = "tickcast_rdma_"
	c.active = c.desc(n+"port_active", "1 when the RDMA port is ACTIVE, 0 otherwise (or when sysfs cannot be read: the device is gone).", "device", "port", "state")
	c.numa = c.desc(n+"device_numa_node", "NUMA node of the RDMA device; -1: sysfs has no NUMA information (numa_node -1 or absent), thread placement is left alone.", "device")
	c.dirs = c.desc(n+"port_counters_available", "1 when the port has the sysfs counter directory dir (counters or hw_counters), 0 when it has none: its counters are then not exported, which does not mean zero.", "device", "port", "dir")
	c.portCounter = c.desc(n+"port_counter_total", "The port's counters/ values (InfiniBand port counters: port_rcv_discards, port_xmit_discards, VL15_dropped, errors, data and packets), as the device reports them.", "device", "port", "counter")
	c.hwCounter = c.desc(n+"port_hw_counter_total", "The port's hw_counters/ values (the driver's own counters, e.g. rxe's sent_pkts and rcvd_pkts).", "device", "port", "counter")
	c.drops = c.desc(n+"port_drops_total", "The counters of either directory that count dropped or discarded packets (a name with drop or discard, or out_of_buffer: receives that found no receive posted), by counter.", "device", "port", "counter")
	return c
}

// Collect implements prometheus.Collector.
func (c *rdmaPortCollector) Collect(out chan<- prometheus.Metric) {
	port := strconv.Itoa(c.port)
	d, err := devices.Lookup(c.device)
	gauge(out, c.numa, float64(d.NUMANode), c.device)
	var p *devices.Port
	for i := range d.Ports {
		if d.Ports[i].Num == c.port {
			p = &d.Ports[i]
		}
	}
	if err != nil || p == nil {
		gauge(out, c.active, 0, c.device, port, "unknown")
		return
	}
	active := 0.0
	if p.Active() {
		active = 1
	}
	gauge(out, c.active, active, c.device, port, p.State)
	cs := p.Counters
	for _, dir := range []struct {
		name string
		has  bool
		cs   []devices.Counter
		d    *prometheus.Desc
	}{{"counters", cs.HasPort, cs.Port, c.portCounter}, {"hw_counters", cs.HasHW, cs.HW, c.hwCounter}} {
		v := 0.0
		if dir.has {
			v = 1
		}
		gauge(out, c.dirs, v, c.device, port, dir.name)
		for _, x := range dir.cs {
			counter(out, dir.d, x.Value, c.device, port, x.Name)
		}
	}
	for _, x := range cs.Drops() {
		counter(out, c.drops, x.Value, c.device, port, x.Name)
	}
}

type rdmaEventCollector struct {
	metricSet
	events, rebuilds, rebuildFailures, outage *prometheus.Desc
}

// NewRDMAEventCollector returns a Prometheus collector of the process's RDMA
// transport events and endpoint rebuilds (package ud/rdma, rdma.Totals):
// tickcast_rdma_events_total{event} for every event kind (port_active,
// port_down, qp_fatal, cq_error, device_fatal, multicast_error,
// device_removal, addr_change, completion_error, other), zeros included, so
// that a rate over any of them is defined from the start;
// tickcast_rdma_rebuilds_total and tickcast_rdma_rebuild_failures_total; and
// the last rebuild's outage in seconds.
func NewRDMAEventCollector() prometheus.Collector {
	c := &rdmaEventCollector{}
	const n = "tickcast_rdma_"
	c.events = c.desc(n+"events_total", "Device async and rdma_cm events the RDMA senders and receivers observed, by kind (completion_error: a work completion with an error status).", "event")
	c.rebuilds = c.desc(n+"rebuilds_total", "RDMA endpoints torn down after an event or failed completion and opened again (queue pair, completion queues, memory region registration, multicast join).")
	c.rebuildFailures = c.desc(n+"rebuild_failures_total", "Attempts to open a torn-down RDMA endpoint again that failed and were retried.")
	c.outage = c.desc(n+"last_rebuild_outage_seconds", "How long the last rebuild took, from the event that started it to the endpoint joined again.")
	return c
}

// Collect implements prometheus.Collector.
func (c *rdmaEventCollector) Collect(out chan<- prometheus.Metric) {
	h := rdma.Totals()
	for i, v := range h.Events {
		counter(out, c.events, v, rdma.Event(i).String())
	}
	counter(out, c.rebuilds, h.Rebuilds)
	counter(out, c.rebuildFailures, h.RebuildFailures)
	gauge(out, c.outage, h.LastOutage.Seconds())
}
