// Built with stub.go: without the rdma tag, without cgo, or off Linux.

//go:build !(linux && cgo && rdma)

package rdma

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/ud"
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

// TestLineHooksNotBuilt: the hooks a publisher and subscriber take fail
// with ErrNotBuilt, name the line's group, and return no transport at all
// (a nil interface, not a nil pointer in one).
func TestLineHooksNotBuilt(t *testing.T) {
	id := ud.LineID{Channel: 2, Line: ud.LineB, Group: netip.MustParseAddrPort("239.1.2.3:31001")}
	c := Config{Interface: netip.MustParseAddr("192.0.2.1")}
	s, err := Senders(c)(id)
	if !errors.Is(err, ErrNotBuilt) || s != nil || !strings.Contains(err.Error(), "rdma sender 239.1.2.3:31001") {
		t.Errorf("Senders: %v, %v", s, err)
	}
	r, err := Receivers(c)(id, nil)
	if !errors.Is(err, ErrNotBuilt) || r != nil || !strings.Contains(err.Error(), "rdma receiver 239.1.2.3:31001") {
		t.Errorf("Receivers: %v, %v", r, err)
	}
}
