package ud

import (
	"sync/atomic"
	"time"
)

// Notifier lets one consumer block until any of several rings (one per
// channel and line) has data, instead of waiting on each ring in turn. Each
// ring given to SetNotifier signals it after publishing, but only while the
// consumer has announced that it is about to sleep, so a busy consumer costs
// the producers one atomic load per batch.
//
// The handshake is the ring's own: the consumer sets the flag, checks every
// ring once more (its Poll), and only then sleeps; a producer publishes, then
// loads the flag. Both are sequentially consistent atomics, so either the
// producer sees the flag or the consumer sees the data.
type Notifier struct {
	waiting atomic.Bool
	wake    chan struct{}
	timer   *time.Timer
}

// NewNotifier returns a notifier.
func NewNotifier() *Notifier {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Notifier{wake: make(chan struct{}, 1), timer: t}
}

// Signal wakes the consumer if it announced it is waiting. Rings call it
// after publishing; other producers of work for the consumer (recovery
// answers) call it too.
func (n *Notifier) Signal() {
	if n.waiting.Load() {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// Wait blocks until a ring signals, the timeout passes or done is closed.
// poll is called after the consumer announced it is waiting and must take
// whatever the rings hold; Wait returns at once if it took anything. Wait
// returns false only when done was closed. Consumer only.
func (n *Notifier) Wait(timeout time.Duration, done <-chan struct{}, poll func() int) bool {
	n.waiting.Store(true)
	defer n.waiting.Store(false)
	if poll() > 0 {
		return true
	}
	n.timer.Reset(timeout)
	defer n.timer.Stop()
	select {
	case <-n.wake:
	case <-n.timer.C:
	case <-done:
		return false
	}
	return true
}

// SetNotifier makes the ring signal n after each Publish. Call it before the
// producer starts.
func (r *Ring) SetNotifier(n *Notifier) { r.notifier = n }
