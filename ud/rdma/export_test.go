//go:build linux && cgo && rdma

package rdma

// ForceQPError moves r's queue pair to the error state, as a failing device
// would: the event tests' hook.
func ForceQPError(r *Receiver) error { return r.x.forceQPError() }
