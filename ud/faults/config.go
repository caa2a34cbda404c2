package faults

import (
	"fmt"
	"github.com/tickcast/tickcast/config"
	"math"
	"strings"
	"time"
)

// DefaultBurstLen is the burst length used when Config.BurstLen is 0.
const DefaultBurstLen = 10

// Config says which faults a Receiver injects. The zero value injects none.
type Config struct {
	// Seed selects the random choices. Every choice about the k-th datagram
	// the wrapped receiver delivers is a function of Seed and k only, so
	// the same seed and the same arrival order give the same faults.
	Seed uint64
	// Loss is the probability that a datagram is dropped, in [0, 1].
	Loss float64
	// Burst is the probability, in [0, 1], that a datagram dropped by Loss
	// starts a burst: it and the BurstLen-1 datagrams after it are dropped.
	// It has no effect without Loss, and setting it alone is an error.
	Burst float64
	// BurstLen is the number of datagrams a burst drops, counting the one
	// that started it; 0 means DefaultBurstLen.
	BurstLen int
	// Dup is the probability, in [0, 1], that a datagram is delivered
	// twice in a row.
	Dup float64
	// Reorder is the probability, in [0, 1], that a datagram is swapped
	// with the next one. The swap happens only when the next datagram has
	// already arrived (the Receiver never waits for it) and is not dropped
	// itself; otherwise the datagram is delivered in order.
	Reorder float64
	// Silence turns on the silent window: every datagram received from
	// SilenceAfter after the first datagram, for SilenceFor (0: until the
	// end), is dropped. The times are the slots' RecvNs stamps.
	Silence bool
	// SilenceAfter is when the silent window opens, measured from the
	// first datagram's receive time. Only with Silence.
	SilenceAfter time.Duration
	// SilenceFor is how long the silent window lasts; 0 means until the
	// receiver is closed. Only with Silence.
	SilenceFor time.Duration
	// CountMessages, if set, counts the messages of a dropped datagram for
	// Stats.DroppedMessages and Stats.SilencedMessages: n messages, or ok
	// false for a datagram it does not recognize (counted as 0). The caller
	// supplies the protocol's count (mold.MessageCount for MoldUDP64); nil
	// counts no messages. It runs on the consumer's goroutine for every
	// dropped datagram and must not allocate.
	CountMessages func(pkt []byte) (n int, ok bool)
}

// Enabled reports whether c injects any fault.
func (c Config) Enabled() bool {
	return c.Loss > 0 || c.Dup > 0 || c.Reorder > 0 || c.Silence
}

// ConfigError reports a Config field with an invalid value: the module's
// configuration error, config.Error.
type ConfigError = config.Error

var check = config.Checker{Pkg: "faults", Struct: "Config"}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	config.Default(&c.BurstLen, DefaultBurstLen)
	return c
}

// Validate returns nil if c is usable, or a *ConfigError naming the first
// invalid field.
func (c Config) Validate() error {
	bad := func(field string, value any, reason string) error {
		return check.Invalid(field, value, "%s", reason)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", c.Loss}, {"Burst", c.Burst}, {"Dup", c.Dup}, {"Reorder", c.Reorder}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return bad(p.name, p.v, "not a probability in [0, 1]")
		}
	}
	switch {
	case c.Burst > 0 && c.Loss == 0:
		return bad("Burst", c.Burst, "bursts start only from Loss drops, and Loss is 0")
	case c.BurstLen < 0:
		return bad("BurstLen", c.BurstLen, "negative")
	case c.SilenceAfter < 0:
		return bad("SilenceAfter", c.SilenceAfter, "negative")
	case c.SilenceFor < 0:
		return bad("SilenceFor", c.SilenceFor, "negative")
	case !c.Silence && c.SilenceAfter != 0:
		return bad("SilenceAfter", c.SilenceAfter, "set without Silence")
	case !c.Silence && c.SilenceFor != 0:
		return bad("SilenceFor", c.SilenceFor, "set without Silence")
	}
	return nil
}

// ParseSilence parses a silent-line setting as the reference subscriber's
// --silence-line takes it:
//
//	""             no silence
//	LINE           LINE is silent from its first datagram on
//	LINE:AFTER     silent from AFTER after the line's first datagram on
//	LINE:AFTER+FOR silent from AFTER after the first datagram, for FOR
//
// LINE is A or B (either case), AFTER and FOR are Go durations ("1s",
// "250ms"); an empty AFTER means 0 ("A:+2s" silences the first two seconds).
// The line comes back upper-cased; after and dur go into
// Config.SilenceAfter and Config.SilenceFor.
func ParseSilence(s string) (line string, after, dur time.Duration, err error) {
	if s == "" {
		return "", 0, 0, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("silence %q: %s; want A or B, optionally followed by :AFTER or :AFTER+FOR (e.g. A:1s+2s)", s, why)
	}
	line, timing, hasTiming := strings.Cut(s, ":")
	line = strings.ToUpper(strings.TrimSpace(line))
	if line != "A" && line != "B" {
		return "", 0, 0, bad(fmt.Sprintf("line %q", line))
	}
	if !hasTiming {
		return line, 0, 0, nil
	}
	a, f, hasFor := strings.Cut(timing, "+")
	if a = strings.TrimSpace(a); a != "" {
		if after, err = time.ParseDuration(a); err != nil || after < 0 {
			return "", 0, 0, bad(fmt.Sprintf("AFTER %q is not a non-negative duration", a))
		}
	}
	if hasFor {
		f = strings.TrimSpace(f)
		if dur, err = time.ParseDuration(f); err != nil || dur <= 0 {
			return "", 0, 0, bad(fmt.Sprintf("FOR %q is not a positive duration", f))
		}
	} else if a == "" {
		return "", 0, 0, bad("empty timing")
	}
	return line, after, dur, nil
}
