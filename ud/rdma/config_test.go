package rdma

import (
	"errors"
	"net/netip"
	"testing"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Group: netip.MustParseAddr("239.1.2.3"), Interface: netip.MustParseAddr("192.0.2.1")}.withDefaults()
	err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	if c.RingSlots != DefaultRingSlots || c.Batch != DefaultBatch || c.SendSlots != DefaultSendSlots ||
		c.MaxInline != DefaultMaxInline || c.JoinTimeout != DefaultJoinTimeout {
		t.Errorf("defaults not applied: %+v", c)
	}
	c = Config{Group: netip.MustParseAddr("239.1.2.3"), Interface: netip.MustParseAddr("192.0.2.1"), Batch: 200, SendSlots: 10}.withDefaults()
	err = c.validate()
	if err != nil || c.SendSlots != 400 {
		t.Errorf("SendSlots = %d, %v; want 2*Batch", c.SendSlots, err)
	}
}

func TestConfigInvalid(t *testing.T) {
	g, i := netip.MustParseAddr("239.1.2.3"), netip.MustParseAddr("192.0.2.1")
	for _, tc := range []struct {
		field string
		c     Config
	}{
		{"Group", Config{Interface: i}},
		{"Group", Config{Group: netip.MustParseAddr("10.0.0.1"), Interface: i}},
		{"Interface", Config{Group: g}},
		{"Interface", Config{Group: g, Interface: netip.MustParseAddr("::1")}},
		{"RingSlots", Config{Group: g, Interface: i, RingSlots: 100}},
		{"Batch", Config{Group: g, Interface: i, Batch: MaxBatch + 1}},
		{"MaxDatagram", Config{Group: g, Interface: i, MaxDatagram: -1}},
		{"MaxInline", Config{Group: g, Interface: i, MaxInline: -2}},
		{"Mode", Config{Group: g, Interface: i, Mode: 7}},
		{"CPU", Config{Group: g, Interface: i, CPU: -2}},
	} {
		err := tc.c.withDefaults().validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: got %v, want a ConfigError for %s", tc.c, err, tc.field)
		}
	}
}

func TestModeString(t *testing.T) {
	if Blocking.String() != "blocking" || BusyPoll.String() != "busy-poll" || Mode(9).String() != "Mode(9)" {
		t.Error("Mode.String")
	}
}
