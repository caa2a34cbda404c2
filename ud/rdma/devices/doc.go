// Package devices finds the RDMA devices of a host and what an operator
// needs to know about them: their ports, port states and link layers, the
// network interfaces (netdevs) behind each port, the device's NUMA node and
// the port counters sysfs keeps. It reads sysfs, through
// github.com/Mellanox/rdmamap where that package has a call for it, and is
// pure Go: it builds without cgo and without the rdma build tag, so that
// every binary can list devices (feedhandler --list-devices, subscriber
// --list-devices), whether or not it carries the verbs transport.
//
// # Interfaces
//
// ForInterface maps the --iface of the RDMA transport (an IPv4 address, or
// an interface name) to the netdev that holds it, the RDMA device behind
// that netdev (rdmamap.GetRdmaDeviceForNetdevice: the GID table's netdev
// for RoCE and Soft-RoCE, the node GUID for IPoIB) and the device port whose
// GID table names the netdev.
//
// # NUMA
//
// A device's NUMA node is sysfs's /sys/class/infiniband/DEV/device/numa_node.
// The kernel writes -1 there when it has no NUMA information (a
// single-node host, a virtual machine); a device with no parent device has
// no such file at all (Soft-RoCE's rxe0 has none in the test VM). Both mean
// "unknown", never node 0: Device.NUMANode is then -1 and nothing is
// placed. When the node is known, NodeCPUs lists its CPUs
// (/sys/devices/system/node/nodeN/cpulist) and PinThread pins the calling,
// locked, OS thread to them.
//
// # Counters
//
// A port may have two counter directories: counters/ (the InfiniBand port
// counters: port_rcv_discards, port_xmit_discards, VL15_dropped, symbol and
// link errors, data and packets) and hw_counters/ (the driver's own, such
// as rxe's sent_pkts and rcvd_pkts). Soft-RoCE (rxe) has hw_counters/ but no
// counters/. rdmamap's combined statistics call returns an empty list and
// no error for a missing directory, so ReadCounters checks each directory
// itself and says which exist (Counters.HasPort, Counters.HasHW): a device
// without counters/ has no drop or discard counts to report, which is not
// the same as zero. rdmamap reads a counter file it cannot read or parse as
// 0; hw_counters/lifespan, which is a setting (how long the driver caches
// the values, in ms) and not a counter, is left out.
package devices
