package devices

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rdmamap reads the fixed sysfs paths (rdmamap.RdmaClassDir): it cannot be
// pointed at a fake tree, so the host tests cover what needs no RDMA
// device; the VM suite (ud/rdma, bash test/softroce/run.sh) covers the
// rest on a real rxe0.

func TestParseState(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"4: ACTIVE", "ACTIVE", true},
		{"1: DOWN\n", "DOWN", true},
		{"5: LinkUp", "LinkUp", true},
		{"ACTIVE", "", false},
		{"x: ACTIVE", "", false},
		{"4:", "", false},
	} {
		got, err := ParseState(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseState(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestParseNUMANode: -1 (and any negative value) is unknown, reported as -1,
// never as node 0.
func TestParseNUMANode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"-1\n", -1, true},
		{"-2", -1, true},
		{"0\n", 0, true},
		{"3", 3, true},
		{"", -1, false},
		{"node1", -1, false},
	} {
		got, err := ParseNUMANode(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseNUMANode(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if (Device{NUMANode: -1}).NUMAKnown() || !(Device{NUMANode: 0}).NUMAKnown() {
		t.Error("NUMAKnown: -1 must be unknown and 0 known")
	}
}

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0-3,8-11\n", []int{0, 1, 2, 3, 8, 9, 10, 11}, true},
		{"0", []int{0}, true},
		{"1,3,5-6", []int{1, 3, 5, 6}, true},
		{"", nil, true},
		{"3-1", nil, false},
		{"0-3,2", nil, false},
		{"a-b", nil, false},
		{"-1", nil, false},
	} {
		got, err := ParseCPUList(tc.in)
		if !slices.Equal(got, tc.want) || (err == nil) != tc.ok {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
			continue
		}
		if tc.ok {
			if f := FormatCPUList(got); f != strings.TrimSpace(tc.in) {
				t.Errorf("FormatCPUList(%v) = %q, want %q", got, f, strings.TrimSpace(tc.in))
			}
		}
	}
}

func FuzzCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8-11", "0", "1,3,5-6", "", "3-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		again, err := ParseCPUList(FormatCPUList(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("%q: %v formats as %q, which parses as %v, %v", s, cpus, FormatCPUList(cpus), again, err)
		}
	})
}

// TestFormat checks the --list-devices text for a Soft-RoCE-like device
// (NUMA unknown, no counters/), a device with counters/ on a known node
// and a host without devices.
func TestFormat(t *testing.T) {
	devs := []Device{
		{Name: "rxe0", NUMANode: -1, NUMAFile: "-1", Ports: []Port{{Num: 1, State: "ACTIVE", PhysState: "LinkUp",
			LinkLayer: "Ethernet", Netdevs: []string{"veth0"},
			Counters: Counters{HasHW: true, HW: []Counter{{"rcvd_pkts", 7}, {"sent_pkts", 5}}}}}},
		{Name: "rxe1", NUMANode: -1, Ports: []Port{{Num: 1, State: "DOWN", PhysState: "Disabled", LinkLayer: "Ethernet"}}},
		{Name: "mlx5_0", NUMANode: 1, NUMAFile: "1", Ports: []Port{{Num: 1, State: "ACTIVE", PhysState: "LinkUp",
			LinkLayer: "InfiniBand", Counters: Counters{HasPort: true, Port: []Counter{{"port_rcv_discards", 3}}, HasHW: true}}}},
	}
	got := Format(devs, false)
	for _, want := range []string{
		"3 RDMA device(s) in /sys/class/infiniband:\n",
		"rxe0: NUMA node unknown (sysfs numa_node -1: no NUMA information): thread placement left alone\n",
		"  port 1: ACTIVE (LinkUp), link layer Ethernet, netdev veth0\n",
		"    no port counters on this device (no counters/ directory): drops and discards are not reported, not zero\n",
		"    hw_counters: 2: rcvd_pkts 7, sent_pkts 5\n",
		"rxe1: NUMA node unknown (no device/numa_node in sysfs): thread placement left alone\n",
		"  port 1: DOWN (Disabled), link layer Ethernet, no netdev\n",
		"    no hw_counters on this device (no hw_counters/ directory)\n",
		"mlx5_0: NUMA node 1",
		"    port counters (counters/): 1: port_rcv_discards 3\n",
		"    hw_counters: 0 (the directory is empty)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Format lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "NUMA node 0") {
		t.Errorf("an unknown NUMA node is printed as node 0:\n%s", got)
	}
	if got, want := Format(nil, true), "no RDMA devices found in /sys/class/infiniband (it does not exist: no RDMA driver is loaded)\n"; got != want {
		t.Errorf("Format(nil, true) = %q, want %q", got, want)
	}
	if got, want := Format(nil, false), "no RDMA devices found in /sys/class/infiniband (it is empty)\n"; got != want {
		t.Errorf("Format(nil, false) = %q, want %q", got, want)
	}
}

func TestDrops(t *testing.T) {
	c := Counters{Port: []Counter{{"VL15_dropped", 1}, {"port_rcv_discards", 2}, {"port_rcv_packets", 9}},
		HW: []Counter{{"out_of_buffer", 5}, {"rcvd_pkts", 3}, {"rx_discards_phy", 4}}}
	var names []string
	for _, d := range c.Drops() {
		names = append(names, d.Name)
	}
	if want := []string{"VL15_dropped", "port_rcv_discards", "out_of_buffer", "rx_discards_phy"}; !slices.Equal(names, want) {
		t.Errorf("Drops = %v, want %v", names, want)
	}
}

// hostHasNoRDMA skips the test when this host has RDMA devices: the tests
// that call it check the no-device answers.
func hostHasNoRDMA(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(ClassDir); !errors.Is(err, fs.ErrNotExist) {
		t.Skipf("this host has %s: the test checks a host without RDMA devices", ClassDir)
	}
}

// TestNoDevices: on a host without RDMA, List finds nothing without error
// and WriteList says so, naming the sysfs directory, and where --iface
// leads.
func TestNoDevices(t *testing.T) {
	hostHasNoRDMA(t)
	devs, err := List()
	if err != nil || len(devs) != 0 {
		t.Fatalf("List() = %v, %v; want none, no error", devs, err)
	}
	var sb strings.Builder
	if err := WriteList(&sb, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	want := "no RDMA devices found in /sys/class/infiniband (it does not exist: no RDMA driver is loaded)\n" +
		"--iface: interface 127.0.0.1 (lo): no RDMA device for this interface: unknown device type\n"
	if sb.String() != want {
		t.Errorf("WriteList:\n%s\nwant:\n%s", sb.String(), want)
	}
}

func TestForInterfaceErrors(t *testing.T) {
	hostHasNoRDMA(t)
	for _, tc := range []struct {
		iface string
		want  error
	}{
		{"127.0.0.1", ErrNoDevice},
		{"lo", ErrNoDevice},
		{"198.51.100.254", ErrNoInterface}, // TEST-NET-2: no interface here has it
		{"no-such-if0", ErrNoInterface},
	} {
		b, err := ForInterface(tc.iface)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.iface) {
			t.Errorf("ForInterface(%q) = %+v, %v; want an error naming it, wrapping %v", tc.iface, b, err, tc.want)
		}
	}
}

// TestPinCPUs pins a locked thread to the CPUs of NUMA node 0 (as PinThread
// does for a device's node) and reads the affinity back.
func TestPinCPUs(t *testing.T) {
	cpus, err := NodeCPUs(0)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("this host has no %s/node0", NodeDir)
	}
	if err != nil || len(cpus) == 0 {
		t.Fatalf("NodeCPUs(0) = %v, %v", cpus, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := PinCPUs(cpus[:1]); err != nil {
			t.Errorf("PinCPUs(%v): %v", cpus[:1], err)
			return
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			t.Errorf("sched_getaffinity: %v", err)
			return
		}
		if set.Count() != 1 || !set.IsSet(cpus[0]) {
			t.Errorf("affinity after PinCPUs(%v): %d CPUs, CPU %d set: %v", cpus[:1], set.Count(), cpus[0], set.IsSet(cpus[0]))
		}
	}()
	<-done
	if _, err := NodeCPUs(-1); err == nil {
		t.Error("NodeCPUs(-1): no error for the unknown node")
	}
}

// TestPlacementString: an unknown node says placement is left alone.
func TestPlacementString(t *testing.T) {
	if s := (Placement{Device: "rxe0", Node: -1}).String(); !strings.Contains(s, "NUMA node unknown") || !strings.Contains(s, "left alone") {
		t.Errorf("unknown node: %q", s)
	}
	if s, want := (Placement{Device: "mlx5_0", Node: 1, CPUs: []int{8, 9, 10, 11}, Pinned: true}).String(),
		"RDMA device mlx5_0: NUMA node 1, CPUs 8-11: polling thread pinned to them"; s != want {
		t.Errorf("known node: %q, want %q", s, want)
	}
}
