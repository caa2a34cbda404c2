package devices

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NodeDir is the sysfs directory of the NUMA nodes.
const NodeDir = "/sys/devices/system/node"

// numaNode reads the device's numa_node file: the node, or -1 when the file
// is missing or says -1, and the file's text ("" when missing).
func numaNode(dev string) (node int, text string, err error) {
	file := filepath.Join(ClassDir, dev, "device", "numa_node")
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, "", nil
	}
	if err != nil {
		return -1, "", err
	}
	text = strings.TrimSpace(string(b))
	node, err = ParseNUMANode(text)
	if err != nil {
		return -1, text, fmt.Errorf("%s: %w", file, err)
	}
	return node, text, nil
}

// ParseNUMANode parses the text of a sysfs numa_node file. -1 (the
// kernel's "no NUMA information") and any other negative value return -1:
// unknown, never node 0.
func ParseNUMANode(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return -1, fmt.Errorf("numa_node %q is not a number", s)
	}
	if n < 0 {
		return -1, nil
	}
	return n, nil
}

// NodeCPUs returns the CPUs of NUMA node node, from its sysfs cpulist.
func NodeCPUs(node int) ([]int, error) {
	if node < 0 {
		return nil, fmt.Errorf("NUMA node %d: unknown node", node)
	}
	file := filepath.Join(NodeDir, "node"+strconv.Itoa(node), "cpulist")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cpus, err := ParseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cpus, nil
}

// ParseCPUList parses a kernel CPU list such as "0-3,8,10-11" into the CPU
// numbers it names, in order. An empty list (a node without CPUs) is no
// CPUs and no error.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= 1<<16 {
			return nil, fmt.Errorf("CPU list %q: bad element %q", s, r)
		}
		if len(cpus) > 0 && a <= cpus[len(cpus)-1] {
			return nil, fmt.Errorf("CPU list %q: %q is not in increasing order", s, r)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// FormatCPUList returns cpus (increasing) in the kernel's list form:
// "0-3,8".
func FormatCPUList(cpus []int) string {
	var sb strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			sb.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return sb.String()
}

// Placement is where a device's polling thread belongs: its NUMA node and
// that node's CPUs. Node -1 means the device's node is unknown and
// placement is left alone.
type Placement struct {
	Device string
	Node   int   // -1: unknown
	CPUs   []int // the node's CPUs; empty when Node is -1
	Pinned bool  // PinThread pinned the calling thread to CPUs
}

// String describes the placement in one line.
func (p Placement) String() string {
	if p.Node < 0 {
		return "RDMA device " + p.Device + ": NUMA node unknown (no NUMA information in sysfs): thread placement left alone"
	}
	s := fmt.Sprintf("RDMA device %s: NUMA node %d, CPUs %s", p.Device, p.Node, FormatCPUList(p.CPUs))
	if p.Pinned {
		s += ": polling thread pinned to them"
	}
	return s
}

// PlacementFor returns the placement of device dev's polling thread,
// without pinning anything.
func PlacementFor(dev string) (Placement, error) {
	p := Placement{Device: dev, Node: -1}
	node, _, err := numaNode(dev)
	if err != nil || node < 0 {
		return p, err
	}
	cpus, err := NodeCPUs(node)
	if err != nil {
		return p, fmt.Errorf("RDMA device %s on NUMA node %d: %w", dev, node, err)
	}
	p.Node, p.CPUs = node, cpus
	return p, nil
}

// PinThread pins the calling OS thread to the CPUs of device dev's NUMA
// node, when the node is known and has CPUs, and says what it did. The
// caller must have locked its goroutine to the thread
// (runtime.LockOSThread) for the pinning to mean anything.
func PinThread(dev string) (Placement, error) {
	p, err := PlacementFor(dev)
	if err != nil || p.Node < 0 || len(p.CPUs) == 0 {
		return p, err
	}
	if err := PinCPUs(p.CPUs); err != nil {
		return p, fmt.Errorf("RDMA device %s: pinning to NUMA node %d CPUs %s: %w", dev, p.Node, FormatCPUList(p.CPUs), err)
	}
	p.Pinned = true
	return p, nil
}

// PinCPUs sets the calling OS thread's CPU affinity to cpus
// (sched_setaffinity).
func PinCPUs(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return unix.SchedSetaffinity(0, &set)
}
