package config

import (
	"errors"
	"testing"
)

func TestError(t *testing.T) {
	c := Checker{Pkg: "udp", Struct: "Config"}
	err := c.Invalid("RingSlots", 3, "not a power of two up to %d", 1<<20)
	if got, want := err.Error(), "udp: invalid Config.RingSlots 3: not a power of two up to 1048576"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := c.Invalid("Feed", "a b", "no spaces").Error(), `udp: invalid Config.Feed "a b": no spaces`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Field != "RingSlots" || ce.Value != 3 {
		t.Errorf("errors.As: %#v", ce)
	}
}

func TestChannels(t *testing.T) {
	c := Checker{Pkg: "tickcast", Struct: "PublisherConfig"}
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, false}, {1, true}, {MaxChannels, true}, {MaxChannels + 1, false}, {-1, false}} {
		err := c.Channels("Channels", tc.n)
		if (err == nil) != tc.ok {
			t.Errorf("Channels(%d) = %v, want ok %v", tc.n, err, tc.ok)
		}
		var ce *Error
		if err != nil && (!errors.As(err, &ce) || ce.Field != "Channels") {
			t.Errorf("Channels(%d): %v does not name the field", tc.n, err)
		}
	}
}

func TestDefault(t *testing.T) {
	n, m := 0, 7
	Default(&n, 5)
	Default(&m, 5)
	s := ""
	Default(&s, "tickcast")
	if n != 5 || m != 7 || s != "tickcast" {
		t.Errorf("Default: zero int became %d (want 5), 7 became %d, empty string became %q", n, m, s)
	}
}
