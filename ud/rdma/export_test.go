//go:build linux && cgo && rdma

package rdma

import "errors"

// ForceQPError moves r's queue pair to the error state, as a failing device
// would: the fault tests' hook.
func ForceQPError(r *Receiver) error {
	r.postMu.Lock()
	defer r.postMu.Unlock()
	if r.down || r.x.ep == nil {
		return errors.New("rdma: ForceQPError: the endpoint is torn down")
	}
	return r.x.forceQPError()
}

// ForceSenderQPError moves s's queue pair to the error state: the fault
// tests' hook for the sending side.
func ForceSenderQPError(s *Sender) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down || s.x.ep == nil {
		return errors.New("rdma: ForceSenderQPError: the endpoint is torn down")
	}
	return s.x.forceQPError()
}

// KeepOnPortDown makes r count port errors without tearing its endpoint
// down, so that a test can hold a queue pair across a link flap.
func KeepOnPortDown(r *Receiver) { r.sup.keepOnPortDown.Store(true) }
