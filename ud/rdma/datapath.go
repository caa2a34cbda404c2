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

// waitRecv is pollRecv that, when nothing is waiting, sleeps on the
// completion channel for up to timeoutMs or until wake. Blocking mode only.
func (x *endpoint) waitRecv(timeoutMs int) int { return int(C.tc_wait_recv(x.ep, C.int(timeoutMs))) }

// wake interrupts a waitRecv.
func (x *endpoint) wake() { C.tc_wake(x.ep) }

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
		return uint64(x.ep.completed), &wcError{status: C.GoString(C.ibv_wc_status_str(uint32(x.ep.last_status)))}
	case n < 0:
		return uint64(x.ep.completed), syscall.EIO
	}
	return uint64(x.ep.completed), nil
}

// wcError is a failed work completion.
type wcError struct{ status string }

func (e *wcError) Error() string { return "work completion failed: " + e.status }
