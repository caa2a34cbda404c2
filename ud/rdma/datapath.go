// This file holds the hot-path C calls: posting receive and send lists and
// polling completions. Each is one cgo call per batch, with integer
// arguments; results come back through C arrays that endpoint views as Go
// slices. It is built with the rdma tag on Linux with cgo.

//go:build linux && cgo && rdma

package rdma

/*
#include "verbs.h"
*/
import "C"

import (
	"fmt"
	"syscall"
)

// postRecv posts the receive slots start..start+n-1 (wrapping) as one list.
func (x *endpoint) postRecv(start uint64, n int) error {
	if rc := C.tc_post_recv(x.ep, C.uint32_t(start), C.uint32_t(n)); rc != 0 {
		return syscall.Errno(rc)
	}
	return nil
}

// pollRecv takes up to a batch of receive completions into rcID, rcLen and
// rcStatus and returns how many, or -1 on error.
func (x *endpoint) pollRecv() int { return int(C.tc_poll_recv(x.ep)) }

// armRecv is pollRecv that, when nothing is waiting, arms the receive CQ
// and polls once more, so that no completion slips in between the last
// poll and the arm. A return of 0 means the CQ is armed: its next
// completion raises an event on the completion channel (waitEvent).
// It returns -1 with a nil error when ibv_poll_cq failed, as pollRecv
// does. Blocking mode only.
func (x *endpoint) armRecv() (int, error) {
	n, err := C.tc_arm_recv(x.ep)
	if n == -2 {
		return -1, fmt.Errorf("ibv_req_notify_cq: %w", err)
	}
	return int(n), nil
}

// waitEvent waits in the runtime's poller, parking the goroutine and
// holding no OS thread, until the completion channel has an event, and
// takes it. It returns the poller's error (os.ErrClosed once stopWait has
// run) or the one ibv_get_cq_event reported. Blocking mode only.
func (x *endpoint) waitEvent() error {
	x.evErr = nil
	if err := x.ccConn.Read(x.ccRead); err != nil {
		return err
	}
	return x.evErr
}

// takeEvent is waitEvent's callback, made once in openEndpoint so that a
// wait allocates no closure. It takes one event without sleeping from the
// channel's own fd, not from the dup the poller watches: both name the same
// open file, and ep stays valid until close, which runs only after the
// receive loop has returned. It returns false (park until readable) when
// no event is pending.
func (x *endpoint) takeEvent(uintptr) bool {
	switch r, err := C.tc_get_cq_event(x.ep); {
	case r > 0:
		return true
	case r < 0:
		x.evErr = fmt.Errorf("ibv_get_cq_event: %w", err)
		return true
	}
	return false
}

// takeCQEvent takes one event from the completion channel without
// sleeping: 1 when it took one, 0 when none was pending (Direct mode).
func (x *endpoint) takeCQEvent() (int, error) {
	r, err := C.tc_get_cq_event(x.ep)
	if r < 0 {
		return 0, fmt.Errorf("ibv_get_cq_event: %w", err)
	}
	return int(r), nil
}

// postSend posts the n datagrams seq..seq+n-1, already copied into their
// send slots with their lengths in sLen, as one signaled list.
func (x *endpoint) postSend(seq uint64, n int) error {
	if r, err := C.tc_post_send(x.ep, C.uint64_t(seq), C.int(n)); r < 0 {
		return err
	}
	return nil
}

// pollSend takes send completions and returns the number of datagrams
// whose sends are complete, or an error for a failed completion.
func (x *endpoint) pollSend() (uint64, error) {
	n := C.tc_poll_send(x.ep)
	switch {
	case n == -2:
		return uint64(x.ep.completed), &wcError{status: wcStatus(uint32(x.ep.last_status))}
	case n < 0:
		return uint64(x.ep.completed), syscall.EIO
	}
	return uint64(x.ep.completed), nil
}

// wcError is a failed work completion.
type wcError struct{ status string }

func (e *wcError) Error() string { return "work completion failed: " + e.status }

// wcStatus names a work completion status, e.g. "Work Request Flushed Error".
func wcStatus(st uint32) string { return C.GoString(C.ibv_wc_status_str(st)) }
