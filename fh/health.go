package fh

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Phases of a feed handler's life, as its health check reports them.
const (
	phaseStarting int32 = iota // New returned; Run has not started publishing
	phasePublishing
	phaseLingering // end of session sent; serving recovery (Config.Linger)
	phaseDone
	phaseRejoining // catching up with a peer's sessions: not publishing yet
)

// healthState is what the health check (metricsrv.HealthPath) reads: the
// phase, and when the publisher last sent a packet, sampled from the
// packet count by a ticker rather than timed on the publishing path.
type healthState struct {
	phase   atomic.Int32
	mu      sync.Mutex
	count   uint64    // packets seen at the last sample
	moved   time.Time // when the count last moved
	started time.Time // when publishing started
}

// silentAfter is how long a publishing feed handler may send nothing, not
// even a heartbeat, before it reports itself unhealthy: five heartbeat
// intervals, at least a second.
func (h *FeedHandler) silentAfter() time.Duration {
	return max(time.Second, 5*h.cfg.Heartbeat)
}

// sample notes whether the publisher sent a packet since the last sample.
func (hs *healthState) sample(count uint64, now time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if count != hs.count || hs.moved.IsZero() {
		hs.count, hs.moved = count, now
	}
}

// watchHealth samples the packet count every 100 ms until done closes.
func (h *FeedHandler) watchHealth(done <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			h.health.sample(h.sink.sent.Load(), now)
		}
	}
}

// healthy is the feed handler's health check: publishing (a packet, data or
// heartbeat, within silentAfter) or lingering after the end of session, and
// connected to NATS, which serves recovery.
func (h *FeedHandler) healthy() error {
	switch h.health.phase.Load() {
	case phaseStarting:
		return errors.New("starting: not publishing yet")
	case phaseDone:
		return errors.New("stopped")
	case phaseRejoining:
		return errors.New("catching up with the feed's peer: not publishing yet")
	case phasePublishing:
		h.health.mu.Lock()
		moved := h.health.moved
		h.health.mu.Unlock()
		if moved.IsZero() {
			moved = h.health.started
		}
		if quiet := time.Since(moved); quiet > h.silentAfter() {
			return fmt.Errorf("nothing sent for %v, not even a heartbeat", quiet.Round(time.Millisecond))
		}
	}
	if !h.nc.IsConnected() {
		return fmt.Errorf("not connected to NATS (%s): recovery is not served", h.natsURL)
	}
	return nil
}
