// This file is built with the rdma tag on Linux with cgo.

//go:build linux && cgo && rdma

package rdma

import "time"

// Starvation returns how often and how long the receiver's receive queue was
// empty because the consumer held every ring slot (RingFull episodes). An
// episode still in progress counts up to now. Any goroutine may call it.
func (r *Receiver) Starvation() Starvation {
	st := Starvation{Episodes: r.ringFull.Load(), Time: time.Duration(r.starvedNs.Load())}
	if at := r.starvedAt.Load(); at != 0 {
		st.Time += time.Duration(time.Now().UnixNano() - at)
		st.InProgress = true
	}
	return st
}

// endStarved ends the ring-full episode in progress at now (Unix ns).
// Receive loop only.
func (r *Receiver) endStarved(now int64) {
	if at := r.starvedAt.Swap(0); at != 0 && now > at {
		r.starvedNs.Add(uint64(now - at))
	}
}
