package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Loss is the loss injected on one line.
type Loss struct {
	// P is the probability that a data packet starts a loss burst, 0..1.
	// Heartbeats and end of session are not lost this way.
	P float64
	// Burst is how many consecutive data packets a loss burst drops,
	// counting the one that starts it; 0 means 1.
	Burst int
	// Silence, when Until > From, is a window of time after the first packet
	// in which the line sends nothing: data, heartbeats, end of session.
	Silence Window
}

// Window is a stretch of time measured from the first packet sent.
type Window struct{ From, Until time.Duration }

// active reports whether the window is set.
func (w Window) active() bool { return w.Until > w.From }

// contains reports whether t, the time since the first packet, is inside.
func (w Window) contains(t time.Duration) bool { return w.active() && t >= w.From && t < w.Until }

// String returns the window as parseWindow reads it.
func (w Window) String() string {
	if !w.active() {
		return ""
	}
	return w.From.String() + ":" + w.Until.String()
}

// parseWindow reads FROM:UNTIL, two durations from the first packet, the
// second later than the first ("2s:5s"). The empty text is no window.
func parseWindow(s string) (Window, error) {
	if s == "" {
		return Window{}, nil
	}
	from, until, ok := strings.Cut(s, ":")
	if !ok {
		return Window{}, fmt.Errorf("%q: want FROM:UNTIL, two durations such as 2s:5s", s)
	}
	f, err := time.ParseDuration(from)
	if err != nil {
		return Window{}, fmt.Errorf("%q: FROM: %v", s, err)
	}
	u, err := time.ParseDuration(until)
	if err != nil {
		return Window{}, fmt.Errorf("%q: UNTIL: %v", s, err)
	}
	if f < 0 || u <= f {
		return Window{}, fmt.Errorf("%q: want 0 <= FROM < UNTIL", s)
	}
	return Window{f, u}, nil
}

// lossState decides, packet by packet, what a line loses. Its random
// numbers come from a generator seeded by the run's seed and the line, one
// draw per data packet outside a burst or silence, so a run with the same
// packets loses the same ones.
type lossState struct {
	cfg  Loss
	rng  *rand.Rand
	left int // packets the current burst still drops
}

func newLossState(cfg Loss, seed uint64, line int) *lossState {
	return &lossState{cfg: cfg, rng: rand.New(rand.NewPCG(seed, uint64(line)+1))}
}

// verdict is what happens to one packet on one line.
type verdict uint8

const (
	sent verdict = iota
	dropped
	silenced
)

// decide returns the verdict on a packet sent at since (time since the first
// packet); data says whether it carries messages.
func (l *lossState) decide(since time.Duration, data bool) verdict {
	if l.cfg.Silence.contains(since) {
		return silenced
	}
	if !data {
		return sent
	}
	if l.left > 0 {
		l.left--
		return dropped
	}
	if l.cfg.P > 0 && l.rng.Float64() < l.cfg.P {
		l.left = max(l.cfg.Burst, 1) - 1
		return dropped
	}
	return sent
}
