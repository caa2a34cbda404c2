package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// listDevices is what the guest reported of feedhandler --list-devices and
// subscriber --list-devices, run on rxe0 with --iface the veth0 address:
//
//	@listdevices NAME RC    NAME exited RC
//	@listout NAME LINE      a line of its output
//
// and, after the end-to-end run, each program's log line about the RDMA
// device behind --iface:
//
//	@rdmadev NAME LINE      NAME is sub1, sub2 or feedhandler
type listDevices struct {
	exit map[string]int
	out  map[string][]string
	logs map[string]string
}

func newListDevices() *listDevices {
	return &listDevices{exit: map[string]int{}, out: map[string][]string{}, logs: map[string]string{}}
}

// add records one @listdevices or @listout line.
func (l *listDevices) add(line string) {
	f := strings.SplitN(line, " ", 3)
	if len(f) < 2 {
		return
	}
	switch f[0] {
	case "@listdevices":
		if len(f) == 3 {
			rc, err := strconv.Atoi(f[2])
			if err != nil {
				rc = -1
			}
			l.exit[f[1]] = rc
		}
	case "@rdmadev":
		if len(f) == 3 {
			l.logs[f[1]] = f[2]
		}
	case "@listout":
		rest := ""
		if len(f) == 3 {
			rest = f[2]
		}
		l.out[f[1]] = append(l.out[f[1]], rest)
	}
}

// listDevicesWant are the lines (prefixes) both commands' --list-devices
// must print in the VM: rxe0 with its NUMA node unknown (no numa_node in
// sysfs), port 1
// ACTIVE on veth0, no counters/ directory, hw_counters present, and
// --iface 192.0.2.1 leading to rxe0 port 1.
var listDevicesWant = []string{
	"1 RDMA device(s) in /sys/class/infiniband:",
	"rxe0: NUMA node unknown (",
	"  port 1: ACTIVE (LinkUp), link layer Ethernet, netdev veth0",
	"    no port counters on this device (no counters/ directory): drops and discards are not reported, not zero",
	"    hw_counters: ",
	"--iface 192.0.2.1 (veth0): RDMA device rxe0 port 1",
}

// check prints each command's output and returns its problems: it did not
// run, exited non-zero, or lacks a line of listDevicesWant.
func (l *listDevices) check() []string {
	var problems []string
	for _, c := range e2eCommands {
		rc, ran := l.exit[c]
		fmt.Printf("\n=== %s --list-devices --iface 192.0.2.1: ", c)
		if !ran {
			fmt.Println("did not run")
			problems = append(problems, c+" --list-devices: did not run in the guest")
			continue
		}
		fmt.Printf("exit %d\n", rc)
		for _, s := range l.out[c] {
			fmt.Printf("         | %s\n", s)
		}
		if rc != 0 {
			problems = append(problems, fmt.Sprintf("%s --list-devices: exit %d", c, rc))
		}
		for _, w := range listDevicesWant {
			found := false
			for _, s := range l.out[c] {
				if strings.HasPrefix(s, w) {
					found = true
					break
				}
			}
			fmt.Printf("  %-4s %s --list-devices prints %q\n", map[bool]string{true: "PASS", false: "FAIL"}[found], c, w)
			if !found {
				problems = append(problems, fmt.Sprintf("%s --list-devices lacks a line starting %q", c, w))
			}
		}
	}
	return problems
}

// checkLogs prints each end-to-end program's log line about its RDMA device
// and returns its problems: a program logged none, or the line does not
// name rxe0 port 1 on veth0 with its NUMA node unknown and placement left
// alone.
func (l *listDevices) checkLogs() []string {
	var problems []string
	fmt.Println()
	for _, n := range e2eProcs {
		line := l.logs[n]
		fmt.Printf("%s RDMA device log: %s\n", n, line)
		var ev struct {
			Device string `json:"rdma_device"`
			Port   int    `json:"rdma_port"`
			Netdev string `json:"netdev"`
			Node   *int   `json:"numa_node"`
			Msg    string `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			problems = append(problems, fmt.Sprintf("%s: no log line about its RDMA device (%v): %q", n, err, line))
			continue
		}
		if ev.Device != "rxe0" || ev.Port != 1 || ev.Netdev != "veth0" || ev.Node == nil || *ev.Node != -1 ||
			!strings.Contains(ev.Msg, "NUMA node unknown") || !strings.Contains(ev.Msg, "left alone") {
			problems = append(problems, fmt.Sprintf("%s: RDMA device log %q: want rxe0 port 1 on veth0, numa_node -1, placement left alone", n, line))
		}
	}
	return problems
}
