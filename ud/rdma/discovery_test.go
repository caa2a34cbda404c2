// The discovery tests read the real sysfs of an RDMA device: they run in
// the Soft-RoCE VM (bash test/softroce/run.sh) on rxe0, and skip elsewhere
// (or fail when TICKCAST_REQUIRE includes "rdma").

//go:build linux && cgo && rdma

package rdma_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Mellanox/rdmamap"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickcast/tickcast/tickprom"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

// vmDevice returns the expected device and netdev names, from the guest's
// environment.
func vmDevice(t *testing.T) (dev, netdev string) {
	t.Helper()
	iface(t) // skips outside the VM
	dev, netdev = os.Getenv(envDevice), os.Getenv(envNetdev)
	if dev == "" || netdev == "" {
		t.Fatalf("%s and %s must name the device and its netdev", envDevice, envNetdev)
	}
	return dev, netdev
}

// TestDiscoveryList: devices.List finds rxe0 with port 1 ACTIVE on veth0,
// no NUMA information (rxe0 has no device/numa_node file: unknown, -1, not
// node 0), no counters/
// directory and a hw_counters/ directory with the packet counters; the
// --list-devices text says so.
func TestDiscoveryList(t *testing.T) {
	name, netdev := vmDevice(t)
	devs, err := devices.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(devs, func(d devices.Device) bool { return d.Name == name })
	if i < 0 {
		t.Fatalf("List found %d devices, not %s: %+v", len(devs), name, devs)
	}
	d := devs[i]
	t.Logf("%s: NUMA node %d (numa_node file %q), %d port(s)", d.Name, d.NUMANode, d.NUMAFile, len(d.Ports))
	if d.NUMAKnown() || d.NUMANode != -1 {
		t.Errorf("NUMA node %d, known %v: the VM has no NUMA information, want -1 (unknown)", d.NUMANode, d.NUMAKnown())
	}
	if len(d.Ports) != 1 {
		t.Fatalf("%d ports, want 1: %+v", len(d.Ports), d.Ports)
	}
	p := d.Ports[0]
	t.Logf("port %d: %s (%s), link layer %s, netdevs %v, counters/ %v, hw_counters/ %v (%d)",
		p.Num, p.State, p.PhysState, p.LinkLayer, p.Netdevs, p.Counters.HasPort, p.Counters.HasHW, len(p.Counters.HW))
	if p.Num != 1 || !p.Active() || p.PhysState != "LinkUp" || p.LinkLayer != "Ethernet" {
		t.Errorf("port %+v: want port 1 ACTIVE, LinkUp, Ethernet", p)
	}
	if !slices.Equal(p.Netdevs, []string{netdev}) {
		t.Errorf("netdevs %v, want [%s]", p.Netdevs, netdev)
	}
	c := p.Counters
	if c.HasPort || len(c.Port) != 0 {
		t.Errorf("rxe has no counters/ directory, but HasPort %v, %d counters", c.HasPort, len(c.Port))
	}
	hw := map[string]bool{}
	for _, x := range c.HW {
		hw[x.Name] = true
	}
	if !c.HasHW || !hw["sent_pkts"] || !hw["rcvd_pkts"] || hw["lifespan"] {
		t.Errorf("hw_counters: HasHW %v, %v: want sent_pkts and rcvd_pkts, without lifespan", c.HasHW, c.HW)
	}
	text := devices.Format(devs, false)
	t.Logf("--list-devices:\n%s", text)
	for _, want := range []string{
		name + ": NUMA node unknown (",
		"  port 1: ACTIVE (LinkUp), link layer Ethernet, netdev " + netdev + "\n",
		"    no port counters on this device (no counters/ directory)",
		"    hw_counters: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("--list-devices text lacks %q", want)
		}
	}
}

// TestDiscoveryInterface: --iface, as the transport's address and as the
// netdev's name, leads to rxe0 port 1 on veth0, the device and port the
// verbs lookup (rdma.LookupDevice) finds too; loopback leads nowhere.
func TestDiscoveryInterface(t *testing.T) {
	name, netdev := vmDevice(t)
	a := iface(t)
	vd, err := rdma.LookupDevice(a)
	if err != nil {
		t.Fatalf("LookupDevice(%s): %v", a, err)
	}
	for _, in := range []string{a.String(), netdev} {
		b, err := devices.ForInterface(in)
		if err != nil {
			t.Errorf("ForInterface(%q): %v", in, err)
			continue
		}
		t.Logf("--iface %s", b)
		if b.Device != name || b.Port != 1 || b.Netdev != netdev {
			t.Errorf("ForInterface(%q) = %+v, want %s port 1 on %s", in, b, name, netdev)
		}
		if b.Device != vd.Name || b.Port != vd.Port {
			t.Errorf("ForInterface(%q) = %s port %d, verbs found %s port %d", in, b.Device, b.Port, vd.Name, vd.Port)
		}
	}
	if b, err := devices.ForInterface("127.0.0.1"); err == nil {
		t.Errorf("ForInterface(127.0.0.1) = %+v, want ErrNoDevice", b)
	}
}

// TestDiscoveryRdmamapCounters pins down why devices.ReadCounters checks
// the directories itself: on rxe, which has no counters/ directory,
// rdmamap's combined statistics call returns no error and no counters/
// values, indistinguishable from a device whose counters/ is empty.
func TestDiscoveryRdmamapCounters(t *testing.T) {
	name, _ := vmDevice(t)
	st, err := rdmamap.GetRdmaSysfsAllStats(name, 1)
	t.Logf("rdmamap.GetRdmaSysfsAllStats(%s, 1): %d hw_counters, %d counters, port %d, error %v", name, len(st.HwStats), len(st.Stats), st.Port, err)
	if err != nil || len(st.Stats) != 0 || len(st.HwStats) == 0 {
		t.Errorf("rdmamap: error %v, %d counters/ values, %d hw_counters: expected no error and no counters/ values on rxe (the behaviour ReadCounters guards against)",
			err, len(st.Stats), len(st.HwStats))
	}
	_, err = rdmamap.GetRdmaSysfsStats(name, 1)
	t.Logf("rdmamap.GetRdmaSysfsStats(%s, 1): %v", name, err)
	c, err := devices.ReadCounters(name, 1)
	if err != nil || c.HasPort || !c.HasHW {
		t.Errorf("ReadCounters: %+v, %v: want no counters/ and hw_counters/ present", c, err)
	}
}

// TestDiscoveryMetrics: the port collector exports rxe0's hw_counters and
// says it has no counters/ directory (no series for it, not zeros); the
// counters it exports move with the traffic of a real sender and receiver.
func TestDiscoveryMetrics(t *testing.T) {
	name, _ := vmDevice(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tickprom.NewRDMAPortCollector(name, 1))
	before := gatherRDMA(t, reg)
	l := "device=" + name + ",port=1"
	for k, v := range map[string]float64{
		"tickcast_rdma_port_active{" + l + ",state=ACTIVE}":                                 1,
		"tickcast_rdma_device_numa_node{device=" + name + "}":                               -1,
		"tickcast_rdma_port_counters_available{device=" + name + ",dir=counters,port=1}":    0,
		"tickcast_rdma_port_counters_available{device=" + name + ",dir=hw_counters,port=1}": 1,
	} {
		if g, ok := before[k]; !ok || g != v {
			t.Errorf("%s = %v (exported: %v), want %v", k, g, ok, v)
		}
	}
	for k := range before {
		if strings.HasPrefix(k, "tickcast_rdma_port_counter_total") || strings.HasPrefix(k, "tickcast_rdma_port_drops_total") {
			t.Errorf("%s exported, but rxe has no such counter", k)
		}
	}
	sentKey := "tickcast_rdma_port_hw_counter_total{counter=sent_pkts," + l + "}"
	rcvdKey := "tickcast_rdma_port_hw_counter_total{counter=rcvd_pkts," + l + "}"
	if _, ok := before[sentKey]; !ok {
		t.Fatalf("%s not exported", sentKey)
	}
	a, g := iface(t), group()
	r := newReceiver(t, rdma.Config{Group: g, Interface: a, RingSlots: 64})
	s := newSender(t, rdma.Config{Group: g, Interface: a})
	const n = 20
	for i := 0; i < n; i++ {
		send(t, s, payload(uint64(i), 64))
		recvOne(t, r, 5*time.Second)
	}
	// rxe caches hw_counters for hw_counters/lifespan (ms): wait it out.
	var after map[string]float64
	deadline := time.Now().Add(3 * time.Second)
	for {
		after = gatherRDMA(t, reg)
		if after[sentKey]-before[sentKey] >= n && after[rcvdKey]-before[rcvdKey] >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("sent_pkts %v -> %v, rcvd_pkts %v -> %v over %d datagrams", before[sentKey], after[sentKey], before[rcvdKey], after[rcvdKey], n)
	if after[sentKey]-before[sentKey] < n || after[rcvdKey]-before[rcvdKey] < n {
		t.Errorf("sent_pkts rose %v, rcvd_pkts %v: want at least %d each", after[sentKey]-before[sentKey], after[rcvdKey]-before[rcvdKey], n)
	}
}

// TestBusyPollPlacement: a busy-poll receiver without a CPU asks sysfs for
// its device's NUMA node; in the VM there is none (-1), so placement is
// left alone and Placement says so.
func TestBusyPollPlacement(t *testing.T) {
	name, _ := vmDevice(t)
	r := newReceiver(t, rdma.Config{Group: group(), Interface: iface(t), RingSlots: 16, Mode: rdma.BusyPoll, CPU: -1})
	p := r.Placement()
	t.Logf("%s", p)
	if p.Device != name || p.Node != -1 || p.Pinned || len(p.CPUs) != 0 {
		t.Errorf("Placement %+v: want %s, node -1, not pinned", p, name)
	}
	if !strings.Contains(p.String(), "left alone") {
		t.Errorf("Placement.String %q does not say placement was left alone", p)
	}
}

// gatherRDMA returns the registry's tickcast_rdma_* series as
// name{label=value,...} → value, the labels in name order.
func gatherRDMA(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			k := mf.GetName()
			if len(ls) > 0 {
				k += "{" + strings.Join(ls, ",") + "}"
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[k] = v
		}
	}
	return out
}
