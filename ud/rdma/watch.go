// This file watches the events an endpoint can be told about: its rdma_cm
// event channel (one per endpoint) and its device context's async events
// (one context per device and process, shared by every endpoint on it, so
// one monitor reads them and hands each to the endpoints it concerns). Both
// fds are non-blocking and wait in the Go runtime's poller. It is built with
// the rdma tag on Linux with cgo.

//go:build linux && cgo && rdma

package rdma

/*
#include "verbs.h"
*/
import "C"

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// supervisor is what a Sender or Receiver shares with its endpoint's
// watchers: the event counters, the logger, and the first event that asks
// for a rebuild and has not been handled yet.
type supervisor struct {
	role  string // "sender" or "receiver"
	cfg   *Config
	log   *slog.Logger
	h     health
	cause atomic.Int32 // Event+1 of the pending rebuild, 0 for none
	since atomic.Int64 // unix ns of that event
	wake  func()       // tells the owner a rebuild is pending; must not block
	// keepOnPortDown: a port error is counted but does not tear the
	// endpoint down (a test hook: export_test.go).
	keepOnPortDown atomic.Bool
}

func newSupervisor(role string, c *Config) *supervisor {
	return &supervisor{role: role, cfg: c, log: c.logger()}
}

// event counts and logs e, and when e breaks the endpoint, records the
// rebuild as pending and wakes the owner.
func (s *supervisor) event(e Event, detail string) {
	s.h.count(e)
	lvl := slog.LevelWarn
	if e == EventPortActive {
		lvl = slog.LevelInfo
	}
	s.log.Log(context.Background(), lvl, "rdma event", "event", e.String(), "detail", detail, "role", s.role,
		"group", s.cfg.Group.String(), "iface", s.cfg.Interface.String(), "rebuild", e.rebuilds())
	if !e.rebuilds() || (e == EventPortDown && s.keepOnPortDown.Load()) {
		return
	}
	if s.cause.CompareAndSwap(0, int32(e)+1) {
		s.since.Store(time.Now().UnixNano())
	}
	if s.wake != nil {
		s.wake()
	}
}

// pending returns the event that asks for a rebuild, if any.
func (s *supervisor) pending() (Event, bool) {
	c := s.cause.Load()
	return Event(c - 1), c != 0
}

// ---- rdma_cm event channel, one per endpoint

type cmWatch struct {
	f    *os.File
	done chan struct{}
}

// watch starts reading the endpoint's rdma_cm events and registers it with
// its device context's async event monitor.
func (x *endpoint) watch() error {
	fd, err := unix.FcntlInt(uintptr(x.ep.ch.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("dup of the rdma_cm channel fd %d: %w", x.ep.ch.fd, err)
	}
	f := os.NewFile(uintptr(fd), "rdma-cm-channel")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	w := &cmWatch{f: f, done: make(chan struct{})}
	ep, sup := x.ep, x.sup
	go func() {
		defer close(w.done)
		for {
			var rerr error
			err := rc.Read(func(uintptr) bool {
				for {
					var typ, status C.int
					r, err := C.tc_get_cm_event(ep, &typ, &status)
					switch {
					case r == 0:
						return false
					case r < 0:
						rerr = fmt.Errorf("rdma_get_cm_event: %w", err)
						return true
					}
					sup.event(cmEvent(typ), fmt.Sprintf("%s (status %d)", C.GoString(C.rdma_event_str(uint32(typ))), int(status)))
				}
			})
			if err != nil || rerr != nil {
				// Closed by unwatch, or the channel failed.
				if err == nil {
					sup.log.Warn("rdma_cm event channel failed", "err", rerr, "role", sup.role)
				}
				return
			}
		}
	}()
	x.cm = w
	if x.async != nil {
		// Parked there across a rebuild (tearDown), still registered.
		return nil
	}
	m, err := monitorFor(x.ep.id.verbs)
	if err != nil {
		return err
	}
	m.add(x)
	x.async = m
	return nil
}

// unwatchCM stops reading the rdma_cm channel. ep stays valid until it has
// stopped.
func (x *endpoint) unwatchCM() {
	if x.cm != nil {
		x.cm.f.Close()
		<-x.cm.done
		x.cm = nil
	}
}

// unwatchAsync takes the endpoint off its async event monitor.
func (x *endpoint) unwatchAsync() {
	if x.async != nil {
		x.async.remove(x)
		x.async = nil
	}
}

func cmEvent(t C.int) Event {
	switch t {
	case C.RDMA_CM_EVENT_MULTICAST_ERROR:
		return EventMulticastError
	case C.RDMA_CM_EVENT_DEVICE_REMOVAL:
		return EventDeviceRemoval
	case C.RDMA_CM_EVENT_ADDR_CHANGE:
		return EventAddrChange
	}
	return EventOther
}

// ---- device async events, one monitor per device context

// asyncMonitor reads the async events of one device context (librdmacm
// opens one per device and process) and hands each to the endpoints it
// concerns: a port event to those on that port, a QP or CQ event to the
// endpoint that owns the QP or CQ, a device event to all.
type asyncMonitor struct {
	ctx  *C.struct_ibv_context
	f    *os.File // a dup of the context's async fd, in the poller
	done chan struct{}

	// mu is held while the monitor reads from ctx and while endpoints
	// come and go: the last one to go closes f, so that the monitor
	// never reads from a context librdmacm has closed, and so that the
	// dup does not keep a removed device's context open.
	mu      sync.Mutex
	eps     []*endpoint
	closing bool // the last endpoint left: the monitor stops
}

var monitors struct {
	sync.Mutex
	m map[uintptr]*asyncMonitor
}

// monitorFor returns the monitor of ctx, starting it if there is none.
func monitorFor(ctx *C.struct_ibv_context) (*asyncMonitor, error) {
	monitors.Lock()
	defer monitors.Unlock()
	key := uintptr(unsafe.Pointer(ctx))
	if m := monitors.m[key]; m != nil {
		return m, nil
	}
	if r, err := C.tc_async_nonblock(ctx); r != 0 {
		return nil, fmt.Errorf("fcntl O_NONBLOCK on the async event fd: %w", err)
	}
	fd, err := unix.FcntlInt(uintptr(ctx.async_fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup of the async event fd %d: %w", ctx.async_fd, err)
	}
	f := os.NewFile(uintptr(fd), "rdma-async-events")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	m := &asyncMonitor{ctx: ctx, f: f, done: make(chan struct{})}
	if monitors.m == nil {
		monitors.m = map[uintptr]*asyncMonitor{}
	}
	monitors.m[key] = m
	go m.run(rc)
	return m, nil
}

func (m *asyncMonitor) add(x *endpoint) {
	m.mu.Lock()
	m.eps = append(m.eps, x)
	m.mu.Unlock()
}

// park keeps x registered with its endpoint torn down: it returns x.ep
// and sets it to nil under the monitor's lock, so that dispatch never reads
// an endpoint being destroyed. A parked endpoint gets port and device
// events only.
func (m *asyncMonitor) park(x *endpoint) *C.struct_tc_ep {
	m.mu.Lock()
	defer m.mu.Unlock()
	ep := x.ep
	x.ep = nil
	return ep
}

// remove takes x off the monitor; the last endpoint to go stops it.
func (m *asyncMonitor) remove(x *endpoint) {
	monitors.Lock()
	m.mu.Lock()
	for i, e := range m.eps {
		if e == x {
			m.eps = append(m.eps[:i], m.eps[i+1:]...)
			break
		}
	}
	last := len(m.eps) == 0
	if last {
		m.closing = true
		delete(monitors.m, uintptr(unsafe.Pointer(m.ctx)))
		m.f.Close()
	}
	m.mu.Unlock()
	monitors.Unlock()
	if last {
		<-m.done
	}
}

func (m *asyncMonitor) run(rc syscall.RawConn) {
	defer close(m.done)
	var ev C.struct_tc_async
	for {
		var rerr error
		err := rc.Read(func(uintptr) bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			// Not len(m.eps) == 0: the first endpoint registers
			// after the monitor starts, and an event may come first.
			if m.closing {
				return true
			}
			for {
				r, err := C.tc_get_async_event(m.ctx, &ev)
				switch {
				case r == 0:
					return false
				case r < 0:
					rerr = fmt.Errorf("ibv_get_async_event: %w", err)
					return true
				}
				m.dispatch(&ev)
			}
		})
		if err != nil || rerr != nil {
			if err == nil {
				slog.Warn("rdma async event fd failed", "err", rerr)
			}
			return
		}
		m.mu.Lock()
		closing := m.closing
		m.mu.Unlock()
		if closing {
			return
		}
	}
}

// dispatch hands one event to the endpoints it concerns. m.mu is held.
func (m *asyncMonitor) dispatch(ev *C.struct_tc_async) {
	name := C.GoString(C.ibv_event_type_str(uint32(ev._type)))
	var kind Event
	switch ev._type {
	case C.IBV_EVENT_PORT_ACTIVE:
		kind = EventPortActive
	case C.IBV_EVENT_PORT_ERR:
		kind = EventPortDown
	case C.IBV_EVENT_QP_FATAL, C.IBV_EVENT_QP_REQ_ERR, C.IBV_EVENT_QP_ACCESS_ERR:
		kind = EventQPFatal
	case C.IBV_EVENT_CQ_ERR:
		kind = EventCQError
	case C.IBV_EVENT_DEVICE_FATAL:
		kind = EventDeviceFatal
	default:
		kind = EventOther
	}
	for _, x := range m.eps {
		ep := x.ep
		if ep == nil && (ev.qpn != 0 || ev.cq != 0) {
			continue // parked (tearDown): no QP or CQ of its own
		}
		switch {
		case ev.qpn != 0:
			if ep.qp == nil || uint32(ep.qp.qp_num) != uint32(ev.qpn) {
				continue
			}
		case ev.cq != 0:
			if ev.cq != C.uintptr_t(uintptr(unsafe.Pointer(ep.rcq))) && ev.cq != C.uintptr_t(uintptr(unsafe.Pointer(ep.scq))) {
				continue
			}
		case ev.port != 0:
			if int(ev.port) != x.dev.Port {
				continue
			}
		}
		x.sup.event(kind, fmt.Sprintf("%s on %s port %d", name, x.dev.Name, x.dev.Port))
	}
}

// rebuilds reports whether the event makes the endpoint tear down its
// verbs objects and open them again once the port is ACTIVE.
func (e Event) rebuilds() bool {
	switch e {
	case EventPortDown, EventQPFatal, EventCQError, EventDeviceFatal, EventMulticastError,
		EventDeviceRemoval, EventAddrChange, EventCompletionError:
		return true
	}
	return false
}

// count records event e for h and the process totals.
func (h *health) count(e Event) {
	h.events[e].Add(1)
	totals.events[e].Add(1)
}

func (h *health) rebuilt(outage time.Duration) {
	h.rebuilds.Add(1)
	totals.rebuilds.Add(1)
	h.lastOutage.Store(int64(outage))
	totals.lastOutage.Store(int64(outage))
}

func (h *health) rebuildFailed() {
	h.rebuildFailures.Add(1)
	totals.rebuildFailures.Add(1)
}

// logger returns c.Logger, or slog.Default() when it is nil.
func (c *Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
