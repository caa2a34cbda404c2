package subapp

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/tickprom"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

// RDMADevice logs the RDMA device and port behind iface (the rdma
// transport's --iface), its NUMA node and that node's CPUs, and what
// becomes of thread placement, and returns the port's counter collector
// (tickprom.NewRDMAPortCollector) together with the transport's event
// counters (tickprom.NewRDMAEventCollector), or nil when iface leads to no
// device (the transport then fails with its own error). pinned says the program's
// polling threads are pinned to the node's CPUs when it is known (busy-poll
// receive threads without --cpu); otherwise hint says what the operator
// can do with the CPUs. cpu is an explicit --cpu (-1: none), checked
// against the node.
func RDMADevice(log zerolog.Logger, iface string, pinned bool, cpu int, hint string) prometheus.Collector {
	b, err := devices.ForInterface(iface)
	if err != nil {
		log.Warn().Err(err).Str("iface", iface).Msg("no RDMA device found behind --iface")
		return nil
	}
	ev := log.Info().Str("iface", iface).Str("netdev", b.Netdev).Str("rdma_device", b.Device).Int("rdma_port", b.Port)
	p, err := devices.PlacementFor(b.Device)
	switch {
	case err != nil:
		log.Warn().Err(err).Str("rdma_device", b.Device).Msg("cannot read the RDMA device's NUMA node: thread placement left alone")
	case p.Node < 0:
		ev = ev.Int("numa_node", -1)
		ev.Msg("RDMA device: NUMA node unknown (sysfs numa_node -1 or absent: no NUMA information), thread placement left alone")
	case cpu >= 0 && !slices.Contains(p.CPUs, cpu):
		ev.Int("numa_node", p.Node).Str("node_cpus", devices.FormatCPUList(p.CPUs)).Msg("RDMA device")
		log.Warn().Int("cpu", cpu).Int("numa_node", p.Node).Str("node_cpus", devices.FormatCPUList(p.CPUs)).
			Msg("--cpu is not on the RDMA device's NUMA node: choose one of node_cpus")
	case cpu >= 0:
		ev.Int("numa_node", p.Node).Str("node_cpus", devices.FormatCPUList(p.CPUs)).Int("cpu", cpu).
			Msg("RDMA device: --cpu is on its NUMA node")
	case pinned:
		ev.Int("numa_node", p.Node).Str("node_cpus", devices.FormatCPUList(p.CPUs)).
			Msg("RDMA device: busy-poll receive threads are pinned to its NUMA node's CPUs")
	default:
		ev.Int("numa_node", p.Node).Str("node_cpus", devices.FormatCPUList(p.CPUs)).Msg("RDMA device: " + hint)
	}
	return rdmaCollectors{tickprom.NewRDMAPortCollector(b.Device, b.Port), tickprom.NewRDMAEventCollector()}
}

// rdmaCollectors is the port's counters and the transport's events
// (tickcast_rdma_events_total) as one collector.
type rdmaCollectors []prometheus.Collector

// Describe implements prometheus.Collector.
func (cs rdmaCollectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (cs rdmaCollectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
