package tickcast

import "time"

// monoEpoch anchors Now; time.Since on it reads the monotonic clock.
var monoEpoch = time.Now()

// Now returns nanoseconds on the monotonic clock since the process started,
// never 0. Deadlines (flush delay, heartbeats, gap delay, lost-after,
// staleness) run on it, so a step of the wall clock (NTP, a manual change)
// cannot fire or freeze them. Timestamps carried in messages (receive, send)
// stay on the wall clock, since they are compared across processes.
func Now() int64 { return int64(time.Since(monoEpoch)) + 1 }
