package rdma

import (
	"slices"
	"time"

	"github.com/tickcast/tickcast/ud/rdma/devices"
)

// Starvation is how often and how long a Receiver's receive queue was
// empty because its consumer held every ring slot: the device dropped
// every datagram for the receiver that arrived meanwhile.
//
// It counts time, not datagrams: a queue pair has no drop counter of its
// own. The datagrams lost show up as a sequence gap to the consumer, and
// on a device that counts receives with no work request posted, device-wide
// in DeviceDrops.
type Starvation struct {
	// Episodes counts the times the receive loop found every slot lent
	// out (RecvStats.RingFull).
	Episodes uint64
	// Time is their total duration, measured by the receive loop from
	// the moment it found the ring full to the moment it found a slot
	// released. The receive queue may stay empty a little longer, until
	// the released slots are posted again (Release posts them in groups).
	Time time.Duration
	// InProgress reports that the ring is full now.
	InProgress bool
}

// DeviceDrops is a device port's count of datagrams dropped because a
// receive queue was empty: the RDMA equivalent of a socket's kernel drop
// count, but device-wide (every queue pair, every process).
type DeviceDrops struct {
	Device string
	Port   int
	// Counter is the hw_counters file that holds the count, or "" when
	// the device has none: Soft-RoCE (rxe) drops a UD datagram that finds
	// its receive queue empty without counting it anywhere (its rcvd_pkts
	// counts the datagram as received). Then Value is 0 and means
	// nothing.
	Counter string
	Value   uint64
}

// Known reports whether the device counts these drops (Counter is set).
func (d DeviceDrops) Known() bool { return d.Counter != "" }

// ReadDeviceDrops reads the device-wide count of datagrams dropped for want
// of a posted receive on port port of device dev (e.g. Receiver.Device's
// Name and Port). It reads sysfs: call it off the hot path.
func ReadDeviceDrops(dev string, port int) (DeviceDrops, error) {
	d := DeviceDrops{Device: dev, Port: port}
	c, err := devices.ReadCounters(dev, port)
	if err != nil {
		return d, err
	}
	for _, x := range c.HW {
		if slices.Contains(devices.RQEmptyCounters, x.Name) {
			d.Counter, d.Value = x.Name, x.Value
			break
		}
	}
	return d, nil
}
