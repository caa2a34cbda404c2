package devices

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// WriteList writes every RDMA device of the host to w as --list-devices
// prints it (Format), then, if iface is not empty, where iface leads
// (ForInterface). A host without devices is not an error: WriteList says
// none were found and where it looked.
func WriteList(w io.Writer, iface string) error {
	devs, err := List()
	if err != nil {
		return err
	}
	_, statErr := os.Stat(ClassDir)
	text := Format(devs, errors.Is(statErr, fs.ErrNotExist))
	if iface != "" {
		if b, err := ForInterface(iface); err != nil {
			text += "--iface: " + err.Error() + "\n"
		} else {
			text += "--iface " + b.String() + "\n"
		}
	}
	_, err = io.WriteString(w, text)
	return err
}

// Format returns the --list-devices text of devs: per device its NUMA
// node, then per port its state, link layer, netdevs and counters. With no
// devices it says none were found in ClassDir (noClassDir: the directory
// does not exist at all).
func Format(devs []Device, noClassDir bool) string {
	var sb strings.Builder
	if len(devs) == 0 {
		why := "it is empty"
		if noClassDir {
			why = "it does not exist: no RDMA driver is loaded"
		}
		fmt.Fprintf(&sb, "no RDMA devices found in %s (%s)\n", ClassDir, why)
		return sb.String()
	}
	fmt.Fprintf(&sb, "%d RDMA device(s) in %s:\n", len(devs), ClassDir)
	for _, d := range devs {
		fmt.Fprintf(&sb, "%s: %s\n", d.Name, numaText(d))
		for _, p := range d.Ports {
			nd := "no netdev"
			if len(p.Netdevs) > 0 {
				nd = "netdev " + strings.Join(p.Netdevs, ", ")
			}
			fmt.Fprintf(&sb, "  port %d: %s (%s), link layer %s, %s\n", p.Num, p.State, p.PhysState, p.LinkLayer, nd)
			c := p.Counters
			if c.HasPort {
				fmt.Fprintf(&sb, "    port counters (counters/): %s\n", counterText(c.Port))
			} else {
				sb.WriteString("    no port counters on this device (no counters/ directory): drops and discards are not reported, not zero\n")
			}
			if c.HasHW {
				fmt.Fprintf(&sb, "    hw_counters: %s\n", counterText(c.HW))
			} else {
				sb.WriteString("    no hw_counters on this device (no hw_counters/ directory)\n")
			}
		}
	}
	return sb.String()
}

// numaText says a device's NUMA node, or that it is unknown and why.
func numaText(d Device) string {
	if d.NUMAKnown() {
		s := "NUMA node " + strconv.Itoa(d.NUMANode)
		if cpus, err := NodeCPUs(d.NUMANode); err == nil {
			s += ", CPUs " + FormatCPUList(cpus)
		}
		return s
	}
	if d.NUMAFile == "" {
		return "NUMA node unknown (no device/numa_node in sysfs): thread placement left alone"
	}
	return "NUMA node unknown (sysfs numa_node " + d.NUMAFile + ": no NUMA information): thread placement left alone"
}

// counterText lists counters as "N: name value, ...".
func counterText(cs []Counter) string {
	if len(cs) == 0 {
		return "0 (the directory is empty)"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Name + " " + strconv.FormatUint(c.Value, 10)
	}
	return strconv.Itoa(len(cs)) + ": " + strings.Join(parts, ", ")
}
