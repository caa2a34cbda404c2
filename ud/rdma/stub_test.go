// Built with stub.go: without the rdma tag, without cgo, or off Linux.

//go:build !(linux && cgo && rdma)

package rdma

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestNotBuilt checks the stub's error when the verbs backend is not built.
func TestNotBuilt(t *testing.T) {
	_, err := NewSender(Config{Group: netip.MustParseAddr("239.1.2.3"), Interface: netip.MustParseAddr("192.0.2.1")})
	if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "-tags rdma") ||
		!strings.Contains(err.Error(), "libibverbs-dev") {
		t.Errorf("NewSender error %v does not name the tag and packages", err)
	}
	if _, err := NewReceiver(Config{}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("NewReceiver error %v", err)
	}
}
