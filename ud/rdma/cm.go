// This file holds the C calls that set up and tear down an endpoint (device
// lookup, rdma_cm id, queue pair, memory region, multicast join). It is built
// with the rdma tag on Linux with cgo; stub.go replaces the package otherwise.

//go:build linux && cgo && rdma

package rdma

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/ud"
)

// Available reports whether this binary was built with the verbs backend.
const Available = true

// endpoint is the Go view of one C endpoint (struct tc_ep): Go types only,
// so that sender.go and receiver.go never touch C.
type endpoint struct {
	ep        *C.struct_tc_ep
	dev       Device
	mtu       int    // largest datagram
	maxInline int    // inline size the QP granted
	sendOnly  bool   // the join was send-only
	qkey      uint32 // the group's qkey, from the join event
	remoteQPN uint32 // the destination QPN, from the join event

	// mem is the registered region (C memory): receive slots first, at
	// recvStride, then send slots at sendStride.
	mem        []byte
	recvStride int
	sendStride int
	sendOff    int

	// Views of the C result and parameter arrays (batch entries each).
	rcID, rcLen, rcStatus []uint32
	sLen                  []uint32

	// Blocking receivers only: a dup of the completion channel's
	// non-blocking fd, registered with the runtime's poller, so that a
	// receive loop waiting for a completion is a parked goroutine, not an
	// OS thread asleep in C. The channel keeps its own fd, which only
	// ibv_destroy_comp_channel closes. See waitEvent.
	cc     *os.File
	ccConn syscall.RawConn
	ccRead func(uintptr) bool      // x.takeEvent, bound once
	evErr  error                   // set by takeEvent
	ccWake atomic.Pointer[os.File] // cc, for wake from other goroutines

	// Events: the rdma_cm channel's watch and the device context's
	// async event monitor (watch.go) report to sup.
	sup   *supervisor
	cm    *cmWatch
	async *asyncMonitor

	// The slot memory is freed by a cleanup on the receive ring
	// (freeMemWhenUnreachable), not by freeMem.
	memCleanup bool
}

func ip4(a netip.Addr) C.uint32_t {
	b := a.As4()
	// Network byte order in memory, as struct in_addr holds it.
	return C.uint32_t(*(*uint32)(unsafe.Pointer(&b[0])))
}

// convErr turns a C error report into the package's error types.
func convErr(e *C.struct_tc_err, group, iface netip.Addr) error {
	msg := C.GoString(&e.msg[0])
	var cause error
	switch e.kind {
	case C.TC_ERR_NODEV:
		cause = fmt.Errorf("%w (%s)", ErrNoDevice, msg)
	case C.TC_ERR_PORT:
		cause = fmt.Errorf("%w: %s", ErrPortNotActive, msg)
	case C.TC_ERR_JOIN:
		cause = fmt.Errorf("%w: %s", ErrJoin, msg)
	case C.TC_ERR_TOO_LARGE:
		cause = fmt.Errorf("%w: %s", ErrTooLarge, msg)
	default:
		cause = syscall.Errno(e.errnum)
	}
	if e.errnum != 0 && e.kind != C.TC_ERR_SYS {
		cause = fmt.Errorf("%w [%w]", cause, syscall.Errno(e.errnum))
	}
	return &OpError{Op: C.GoString(&e.op[0]), Group: group, Interface: iface, Err: cause}
}

func portStateName(s C.int) string {
	return C.GoString(C.ibv_port_state_str(uint32(s)))
}

func convDev(d *C.struct_tc_dev) Device {
	return Device{
		Name:      C.GoString(&d.name[0]),
		Port:      int(d.port),
		State:     portStateName(d.state),
		Active:    d.state == C.IBV_PORT_ACTIVE,
		ActiveMTU: int(d.active_mtu),
		MaxMTU:    int(d.max_mtu),
	}
}

// LookupDevice returns the RDMA device and port that serve the interface
// address iface. The error wraps ErrNoDevice when there is none. A port
// that is not ACTIVE is reported in Device, not as an error.
func LookupDevice(iface netip.Addr) (Device, error) {
	if !iface.Is4() {
		return Device{}, &ConfigError{Field: "Interface", Value: iface, Reason: "not an IPv4 address"}
	}
	var d C.struct_tc_dev
	var e C.struct_tc_err
	if C.tc_lookup(ip4(iface), &d, &e) != 0 {
		return Device{}, convErr(&e, netip.Addr{}, iface)
	}
	return convDev(&d), nil
}

// openEndpoint sets up a sender's or a receiver's endpoint for c (defaults
// applied), joins the group and starts watching its events, which go to
// sup.
func openEndpoint(c *Config, sender bool, sup *supervisor) (*endpoint, error) {
	x := &endpoint{sup: sup}
	if err := x.open(c, sender, 0, -1); err != nil {
		return nil, err
	}
	return x, nil
}

// open creates the endpoint's verbs objects and joins the group. When x
// already has slot memory (a rebuild), that memory is registered again
// rather than replaced, and a receiver posts the postN slots from
// postStart (postN -1: every slot).
func (x *endpoint) open(c *Config, sender bool, postStart uint64, postN int) error {
	p := C.struct_tc_params{
		ifaddr:     ip4(c.Interface),
		group:      ip4(c.Group),
		nrecv:      C.int(c.RingSlots),
		nsend:      C.int(c.SendSlots),
		batch:      C.int(c.Batch),
		max_inline: C.int(c.MaxInline),
		timeout_ms: C.int(c.JoinTimeout.Milliseconds()),
		max_dgram:  C.int(c.MaxDatagram),
		post_start: C.uint32_t(postStart),
		post_n:     C.int(postN),
	}
	if sender {
		p.sender = 1
	} else if c.Mode == Blocking || c.Mode == Direct {
		p.blocking = 1 // a completion channel
	}
	if x.mem != nil {
		p.buf = (*C.uint8_t)(unsafe.Pointer(&x.mem[0]))
		p.buflen = C.size_t(len(x.mem))
	}
	var e C.struct_tc_err
	ep := C.tc_open(&p, &e)
	if ep == nil {
		return convErr(&e, c.Group, c.Interface)
	}
	b := int(ep.batch)
	u32 := func(p *C.uint32_t) []uint32 { return unsafe.Slice((*uint32)(unsafe.Pointer(p)), b) }
	x.install(ep)
	x.mtu = int(ep.mtu)
	x.maxInline = int(ep.max_inline)
	x.sendOnly = ep.sendonly != 0
	x.qkey = uint32(ep.qkey)
	x.remoteQPN = uint32(ep.remote_qpn)
	if x.mem == nil {
		x.mem = unsafe.Slice((*byte)(unsafe.Pointer(ep.buf)), int(ep.buflen))
	}
	x.recvStride = int(ep.rstride)
	x.sendStride = int(ep.sstride)
	x.sendOff = int(ep.nrecv) * int(ep.rstride)
	x.rcID, x.rcLen, x.rcStatus, x.sLen = u32(ep.rc_id), u32(ep.rc_len), u32(ep.rc_status), u32(ep.s_len)
	x.cc, x.ccConn = nil, nil
	if ep.cc != nil && c.Mode == Blocking {
		// Direct: the consumer's epoll set watches the channel's fd
		// itself (direct.go).
		if err := x.pollChannel(); err != nil {
			x.close()
			return &OpError{Op: "completion channel", Group: c.Group, Interface: c.Interface, Err: err}
		}
	}
	if err := x.watch(); err != nil {
		x.close()
		return &OpError{Op: "event watch", Group: c.Group, Interface: c.Interface, Err: err}
	}
	return nil
}

// channelFD is the completion channel's fd (Direct mode), -1 without one.
func (x *endpoint) channelFD() int {
	if x.ep == nil || x.ep.cc == nil {
		return -1
	}
	return int(x.ep.cc.fd)
}

// forceQPError moves the queue pair to the error state, as a failure of the
// device would (a test hook: export_test.go).
func (x *endpoint) forceQPError() error {
	if r, err := C.tc_qp_error(x.ep); r != 0 {
		return fmt.Errorf("ibv_modify_qp to IBV_QPS_ERR: %w", err)
	}
	return nil
}

// pollChannel puts a dup of the completion channel's fd into the runtime's
// poller. The dup, not the fd itself, goes to os.NewFile: the os.File
// closes what it wraps, and ibv_destroy_comp_channel must stay the only
// close of the channel's own fd.
func (x *endpoint) pollChannel() error {
	fd, err := unix.FcntlInt(uintptr(x.ep.cc.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("dup of fd %d: %w", x.ep.cc.fd, err)
	}
	// The fd is non-blocking (tc_open), so os.NewFile registers it with
	// the poller; a file it could not register would take no deadline.
	f := os.NewFile(uintptr(fd), "rdma-comp-channel")
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return fmt.Errorf("fd %d is not pollable by the Go runtime: %w", fd, err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	x.cc, x.ccConn = f, rc
	x.ccRead = x.takeEvent
	x.ccWake.Store(f)
	return nil
}

// stopWait closes the poller's dup of the completion channel, which wakes
// a waitEvent with os.ErrClosed. Safe to call more than once.
func (x *endpoint) stopWait() {
	x.ccWake.Store(nil)
	if x.cc != nil {
		x.cc.Close()
	}
}

// wake makes a waitEvent in progress (or the next one) return
// os.ErrDeadlineExceeded; the receive loop then clears the deadline with
// rearm. Safe from any goroutine.
func (x *endpoint) wake() {
	if f := x.ccWake.Load(); f != nil {
		f.SetReadDeadline(time.Unix(1, 0))
	}
}

// rearm clears the deadline wake set.
func (x *endpoint) rearm() {
	if x.cc != nil {
		x.cc.SetReadDeadline(time.Time{})
	}
}

// close stops watching events, leaves the group and destroys every verbs
// object, the rdma_cm id and its event channel included. The slot memory is
// not freed (see freeMemWhenUnreachable); open registers it again. Safe to
// call more than once.
func (x *endpoint) close() { x.tearDown(false) }

// tearDown destroys every verbs object of the endpoint, as close does.
// With park, the endpoint stays registered with its device context's async
// event monitor while it waits to be opened again, so that it still
// observes the port coming back (a port error or a broken queue pair leaves
// the context usable; a removed device's must go, and is not parked).
func (x *endpoint) tearDown(park bool) {
	x.stopWait()
	x.unwatchCM()
	var ep *C.struct_tc_ep
	if park && x.async != nil {
		ep = x.async.park(x)
	} else {
		x.unwatchAsync()
		ep, x.ep = x.ep, nil
	}
	if ep != nil {
		C.tc_close(ep)
	}
}

// install makes ep the endpoint's, under the async monitor's lock when the
// endpoint is parked there: the monitor reads ep and dev as it dispatches.
// A parked endpoint whose new ep is on another device context leaves the
// old context's monitor (watch joins the new one).
func (x *endpoint) install(ep *C.struct_tc_ep) {
	if m := x.async; m != nil {
		if m.ctx == ep.id.verbs {
			m.mu.Lock()
			defer m.mu.Unlock()
		} else {
			x.unwatchAsync()
		}
	}
	x.ep = ep
	x.dev = convDev(&ep.dev)
}

// syncDevices lets librdmacm drop a device being removed once nothing
// uses it, closing its device context: rdma link delete waits for that.
func syncDevices() { C.tc_sync_devices() }

// freeMem frees the slot memory at once (the sender, whose slots are never
// lent out).
func (x *endpoint) freeMem() {
	if x.mem != nil && !x.memCleanup {
		C.tc_free_buf(unsafe.Pointer(&x.mem[0]))
		x.mem = nil
	}
}

// freeMemWhenUnreachable frees the slot memory once anchor, the first slot
// of the receive ring (whose slot array every lent *ud.Slot points into), is
// unreachable: a consumer may still read lent slots after the receiver is
// closed.
func (x *endpoint) freeMemWhenUnreachable(anchor *ud.Slot) {
	// The argument is C memory, invisible to the garbage collector, so
	// it does not keep anchor alive.
	runtime.AddCleanup(anchor, func(p unsafe.Pointer) { C.tc_free_buf(p) }, unsafe.Pointer(&x.mem[0]))
	// x.mem stays: a rebuild (open) registers the same memory again, so
	// that the slots lent to the consumer stay valid.
	x.memCleanup = true
}
