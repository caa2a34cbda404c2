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
