package ud

import (
	"net/netip"
	"testing"
)

func TestLineString(t *testing.T) {
	for _, c := range []struct {
		l    Line
		want string
	}{{LineA, "A"}, {LineB, "B"}, {LineRecovery, "recovery"}, {Line(5), "Line(5)"}} {
		if got := c.l.String(); got != c.want {
			t.Errorf("Line(%d).String() = %q, want %q", int(c.l), got, c.want)
		}
	}
	id := LineID{Channel: 3, Line: LineB, Group: netip.MustParseAddrPort("239.78.0.4:31001")}
	if got, want := id.String(), "channel 3 line B (239.78.0.4:31001)"; got != want {
		t.Errorf("LineID.String() = %q, want %q", got, want)
	}
}
