package rdma

import (
	"sync/atomic"
	"time"
)

// Event is a kind of device or rdma_cm event a Sender or Receiver observes
// (see the package documentation, "Events and rebuilds").
type Event int

// Event kinds. Each has a counter (EventCounts) and a Prometheus series
// (tickprom, tickcast_rdma_events_total{event}).
const (
	// EventPortActive is IBV_EVENT_PORT_ACTIVE: the port came up.
	EventPortActive Event = iota
	// EventPortDown is IBV_EVENT_PORT_ERR: the port left ACTIVE (link
	// down).
	EventPortDown
	// EventQPFatal is IBV_EVENT_QP_FATAL, QP_REQ_ERR or QP_ACCESS_ERR on
	// the endpoint's queue pair.
	EventQPFatal
	// EventCQError is IBV_EVENT_CQ_ERR on one of the endpoint's
	// completion queues.
	EventCQError
	// EventDeviceFatal is IBV_EVENT_DEVICE_FATAL.
	EventDeviceFatal
	// EventMulticastError is RDMA_CM_EVENT_MULTICAST_ERROR: the group
	// membership was lost.
	EventMulticastError
	// EventDeviceRemoval is RDMA_CM_EVENT_DEVICE_REMOVAL.
	EventDeviceRemoval
	// EventAddrChange is RDMA_CM_EVENT_ADDR_CHANGE.
	EventAddrChange
	// EventCompletionError is a work completion with an error status
	// (e.g. a flush error after the queue pair went to the error state).
	EventCompletionError
	// EventOther is any other async or rdma_cm event (logged, counted,
	// otherwise ignored).
	EventOther
	// NumEvents is the number of event kinds.
	NumEvents
)

var eventNames = [NumEvents]string{"port_active", "port_down", "qp_fatal", "cq_error", "device_fatal",
	"multicast_error", "device_removal", "addr_change", "completion_error", "other"}

// String returns the event's metric label, e.g. "port_down".
func (e Event) String() string {
	if e < 0 || e >= NumEvents {
		return "unknown"
	}
	return eventNames[e]
}

// EventCounts counts events by kind, indexed by Event.
type EventCounts [NumEvents]uint64

// Health is what a Sender or Receiver has been through: the events it
// observed, and the rebuilds of its endpoint they caused.
type Health struct {
	Events EventCounts
	// Rebuilds counts endpoints torn down and opened again; the stream
	// went on after each. RebuildFailures counts attempts to open again
	// that failed (and were retried).
	Rebuilds, RebuildFailures uint64
	// Down reports that the endpoint is torn down now, waiting for the
	// port to be ACTIVE again.
	Down bool
	// LastOutage is how long the last rebuild took, from the event or
	// failed completion that started it to the endpoint joined again.
	LastOutage time.Duration
}

// health holds the counters behind Health; the zero value is ready.
type health struct {
	events                    [NumEvents]atomic.Uint64
	rebuilds, rebuildFailures atomic.Uint64
	down                      atomic.Bool
	lastOutage                atomic.Int64
}

func (h *health) snapshot() Health {
	var s Health
	for i := range h.events {
		s.Events[i] = h.events[i].Load()
	}
	s.Rebuilds, s.RebuildFailures = h.rebuilds.Load(), h.rebuildFailures.Load()
	s.Down = h.down.Load()
	s.LastOutage = time.Duration(h.lastOutage.Load())
	return s
}

// totals are the process's counters over every Sender and Receiver, for
// Totals and the Prometheus metrics.
var totals health

// Totals returns the events and rebuilds of every Sender and Receiver of
// the process so far (Down is not set: it belongs to one endpoint).
func Totals() Health {
	s := totals.snapshot()
	s.Down = false
	return s
}
