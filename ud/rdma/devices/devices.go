package devices

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/Mellanox/rdmamap"
)

// ClassDir is the sysfs directory of the RDMA devices.
const ClassDir = rdmamap.RdmaClassDir

// Errors. The errors of this package wrap these, so that callers can tell
// them apart with errors.Is.
var (
	// ErrNoInterface means no network interface has the name or the
	// address asked for.
	ErrNoInterface = errors.New("no such network interface")
	// ErrNoDevice means the interface has no RDMA device behind it.
	ErrNoDevice = errors.New("no RDMA device for this interface")
)

// Device is one RDMA device, as sysfs describes it.
type Device struct {
	Name string // e.g. "mlx5_0", "rxe0"
	// NUMANode is the device's NUMA node, or -1 when sysfs gives none
	// (numa_node is -1 or absent): unknown, not node 0.
	NUMANode int
	// NUMAFile is what sysfs holds: the numa_node text, or "" when the file
	// does not exist.
	NUMAFile string
	Ports    []Port
}

// NUMAKnown reports whether the device's NUMA node is known.
func (d Device) NUMAKnown() bool { return d.NUMANode >= 0 }

// Port is one port of a device.
type Port struct {
	Num       int      // from 1
	State     string   // e.g. "ACTIVE", "DOWN", "INIT" (sysfs "4: ACTIVE")
	PhysState string   // e.g. "LinkUp", "Disabled" (sysfs "5: LinkUp")
	LinkLayer string   // "Ethernet" (RoCE, Soft-RoCE) or "InfiniBand"
	Netdevs   []string // the netdevs the port's GID table names, sorted
	Counters  Counters
}

// Active reports whether the port is ACTIVE.
func (p Port) Active() bool { return p.State == "ACTIVE" }

// Counter is one counter file of a port.
type Counter struct {
	Name  string
	Value uint64
}

// Counters are a port's counters, from its two sysfs directories.
type Counters struct {
	// HasPort reports that the port has a counters/ directory; when false,
	// Port is empty because there is nothing to read, not because every
	// counter is zero.
	HasPort bool
	// Port are the counters/ values (InfiniBand port counters, including
	// the drops and discards: port_rcv_discards, port_xmit_discards,
	// VL15_dropped), sorted by name.
	Port []Counter
	// HasHW reports that the port has a hw_counters/ directory.
	HasHW bool
	// HW are the hw_counters/ values, sorted by name, without lifespan.
	HW []Counter
}

// RQEmptyCounters are the hw_counters files, by driver, that count the
// packets a device dropped because the receive queue of the queue pair they
// were for had no work request posted (for a UD receiver: its ring was
// full). They count for the whole device port, not per queue pair. Soft-RoCE
// (rxe) has none: it drops such a datagram without counting it (its
// rcvd_pkts counts the datagram as received).
var RQEmptyCounters = []string{
	"out_of_buffer", // mlx5 (ConnectX-4 and later)
}

// Drops returns the counters of either directory that count dropped or
// discarded packets (a name containing "drop" or "discard", or one of
// RQEmptyCounters), each name once (counters/ first).
func (c Counters) Drops() []Counter {
	var d []Counter
	for _, cs := range [][]Counter{c.Port, c.HW} {
		for _, x := range cs {
			n := strings.ToLower(x.Name)
			dup := slices.ContainsFunc(d, func(y Counter) bool { return y.Name == x.Name })
			if !dup && (strings.Contains(n, "drop") || strings.Contains(n, "discard") || slices.Contains(RQEmptyCounters, x.Name)) {
				d = append(d, x)
			}
		}
	}
	return d
}

// List returns every RDMA device, sorted by name. It returns no devices and
// no error when ClassDir is missing or empty: the kernel has no RDMA device
// (or no RDMA support loaded).
func List() ([]Device, error) {
	names := rdmamap.GetRdmaDeviceList()
	slices.Sort(names)
	devs := make([]Device, 0, len(names))
	for _, n := range names {
		d, err := Lookup(n)
		if err != nil {
			return devs, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// Lookup returns the device named name.
func Lookup(name string) (Device, error) {
	d := Device{Name: name, NUMANode: -1}
	if _, err := os.Stat(filepath.Join(ClassDir, name)); err != nil {
		return d, fmt.Errorf("RDMA device %s: %w", name, err)
	}
	var err error
	if d.NUMANode, d.NUMAFile, err = numaNode(name); err != nil {
		return d, err
	}
	for _, num := range portNums(name) {
		p, err := readPort(name, num)
		if err != nil {
			return d, err
		}
		d.Ports = append(d.Ports, p)
	}
	if len(d.Ports) == 0 {
		return d, fmt.Errorf("RDMA device %s: no ports in %s", name, filepath.Join(ClassDir, name, "ports"))
	}
	return d, nil
}

// portNums returns the device's port numbers, in order.
func portNums(dev string) []int {
	var nums []int
	for _, s := range rdmamap.GetPorts(dev) {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums
}

func portDir(dev string, port int) string {
	return filepath.Join(ClassDir, dev, rdmamap.RdmaPortsdir, strconv.Itoa(port))
}

// readPort reads one port's state, link layer, netdevs and counters.
func readPort(dev string, num int) (Port, error) {
	p := Port{Num: num}
	dir := portDir(dev, num)
	var err error
	if p.State, err = readState(filepath.Join(dir, "state")); err != nil {
		return p, err
	}
	if p.PhysState, err = readState(filepath.Join(dir, "phys_state")); err != nil {
		return p, err
	}
	if p.LinkLayer, err = readTrim(filepath.Join(dir, "link_layer")); err != nil {
		return p, err
	}
	p.Netdevs = portNetdevs(dev, num)
	if p.Counters, err = ReadCounters(dev, num); err != nil {
		return p, err
	}
	return p, nil
}

// readState reads a sysfs state file ("4: ACTIVE") and returns its name.
func readState(file string) (string, error) {
	s, err := readTrim(file)
	if err != nil {
		return "", err
	}
	return ParseState(s)
}

// ParseState returns the name of a sysfs port state or physical state:
// "ACTIVE" for "4: ACTIVE".
func ParseState(s string) (string, error) {
	num, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	name = strings.TrimSpace(name)
	if _, err := strconv.Atoi(strings.TrimSpace(num)); !ok || err != nil || name == "" {
		return "", fmt.Errorf("port state %q: want \"N: NAME\"", s)
	}
	return name, nil
}

func readTrim(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// portNetdevs returns the netdevs the port's GID table names (the
// gid_attrs/ndevs files of its populated entries), sorted, each once. The
// kernel refuses to read an unpopulated entry (EINVAL); those are skipped.
func portNetdevs(dev string, port int) []string {
	dir := filepath.Join(portDir(dev, port), rdmamap.RdmaGidAttrDir, rdmamap.RdmaGidAttrNdevDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var nd []string
	for _, e := range ents {
		s, err := readTrim(filepath.Join(dir, e.Name()))
		if err != nil || s == "" || slices.Contains(nd, s) {
			continue
		}
		nd = append(nd, s)
	}
	slices.Sort(nd)
	return nd
}

// ReadCounters reads a port's counters/ and hw_counters/ directories. It
// checks that each exists itself (rdmamap's combined call reports a missing
// one as an empty list and no error) and returns the error of a directory
// that exists but cannot be read.
func ReadCounters(dev string, port int) (Counters, error) {
	var c Counters
	dir := portDir(dev, port)
	if _, err := os.Stat(dir); err != nil {
		return c, fmt.Errorf("RDMA device %s port %d: %w", dev, port, err)
	}
	var err error
	if c.HasPort, err = isDir(filepath.Join(dir, rdmamap.RdmaCountersDir)); err != nil {
		return c, err
	}
	if c.HasPort {
		st, err := rdmamap.GetRdmaSysfsStats(dev, port)
		if err != nil {
			return c, fmt.Errorf("RDMA device %s port %d counters: %w", dev, port, err)
		}
		c.Port = counters(st)
	}
	if c.HasHW, err = isDir(filepath.Join(dir, rdmamap.RdmaHwCountersDir)); err != nil {
		return c, err
	}
	if c.HasHW {
		st, err := rdmamap.GetRdmaSysfsHwStats(dev, port)
		if err != nil {
			return c, fmt.Errorf("RDMA device %s port %d hw_counters: %w", dev, port, err)
		}
		c.HW = counters(st)
	}
	return c, nil
}

// counters converts rdmamap's entries, sorted, without hw_counters'
// lifespan (a setting, not a counter).
func counters(st []rdmamap.RdmaStatEntry) []Counter {
	cs := make([]Counter, 0, len(st))
	for _, e := range st {
		if e.Name != "lifespan" {
			cs = append(cs, Counter{Name: e.Name, Value: e.Value})
		}
	}
	slices.SortFunc(cs, func(a, b Counter) int { return strings.Compare(a.Name, b.Name) })
	return cs
}

// isDir reports whether path is a directory; a missing path is false and
// no error.
func isDir(path string) (bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

// Binding is where an interface leads: its netdev, the RDMA device behind
// it and the device's port.
type Binding struct {
	Iface  string // as asked: an address or a name
	Netdev string
	Device string
	Port   int
}

// String returns "IFACE (NETDEV): RDMA device DEV port N".
func (b Binding) String() string {
	s := b.Iface
	if b.Netdev != b.Iface {
		s += " (" + b.Netdev + ")"
	}
	return fmt.Sprintf("%s: RDMA device %s port %d", s, b.Device, b.Port)
}

// ForInterface maps iface, an IPv4 address of a local interface (the RDMA
// transport's --iface) or an interface name, to its netdev, RDMA device
// and port. The error wraps ErrNoInterface or ErrNoDevice.
func ForInterface(iface string) (Binding, error) {
	b := Binding{Iface: iface}
	var err error
	if b.Netdev, err = netdevOf(iface); err != nil {
		return b, err
	}
	dev, err := rdmamap.GetRdmaDeviceForNetdevice(b.Netdev)
	if err != nil || dev == "" {
		if err == nil {
			err = errors.New("no device matches its hardware address")
		}
		return b, fmt.Errorf("interface %s (%s): %w: %v", iface, b.Netdev, ErrNoDevice, err)
	}
	b.Device = dev
	ports := portNums(dev)
	for _, p := range ports {
		if slices.Contains(portNetdevs(dev, p), b.Netdev) {
			b.Port = p
			return b, nil
		}
	}
	if len(ports) == 1 { // InfiniBand: IPoIB is matched by GUID, the GID table names no netdev
		b.Port = ports[0]
		return b, nil
	}
	return b, fmt.Errorf("interface %s (%s): RDMA device %s has %d ports and no GID table names %s: %w",
		iface, b.Netdev, dev, len(ports), b.Netdev, ErrNoDevice)
}

// netdevOf returns the name of the interface iface names or whose address
// it is.
func netdevOf(iface string) (string, error) {
	a, err := netip.ParseAddr(iface)
	if err != nil {
		if _, err := net.InterfaceByName(iface); err != nil {
			return "", fmt.Errorf("interface %q: %w (neither an interface name nor an IP address)", iface, ErrNoInterface)
		}
		return iface, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing interfaces: %w", err)
	}
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			if p, err := netip.ParsePrefix(ad.String()); err == nil && p.Addr().Unmap() == a.Unmap() {
				return i.Name, nil
			}
		}
	}
	return "", fmt.Errorf("address %s: %w (no local interface has it)", iface, ErrNoInterface)
}
