package subapp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestRDMADeviceNone: an --iface with no RDMA device behind it (loopback)
// gets a warning naming it and no collector; the transport then fails with
// its own error. The device found case is checked on rxe0 in the Soft-RoCE
// VM (@rdmadev).
func TestRDMADeviceNone(t *testing.T) {
	var buf bytes.Buffer
	c := RDMADevice(zerolog.New(&buf), "127.0.0.1", true, -1, "")
	if c != nil {
		t.Errorf("a collector for loopback")
	}
	s := buf.String()
	for _, want := range []string{`"level":"warn"`, `"iface":"127.0.0.1"`, "no RDMA device found behind --iface", "127.0.0.1 (lo)"} {
		if !strings.Contains(s, want) {
			t.Errorf("log lacks %s: %s", want, s)
		}
	}
}
