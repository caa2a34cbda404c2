// This file is built when the verbs backend is not: without the rdma build
// tag, without cgo, or off Linux. Every constructor returns ErrNotBuilt.

//go:build !(linux && cgo && rdma)

package rdma

import (
	"net/netip"
	"time"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

// Available reports whether this binary was built with the verbs backend.
const Available = false

// Sender is the RDMA sender; in this build it cannot be created.
type Sender struct{}

// Receiver is the RDMA receiver; in this build it cannot be created.
type Receiver struct{}

var (
	_ ud.Sender   = (*Sender)(nil)
	_ ud.Receiver = (*Receiver)(nil)
)

func notBuilt(op string, c Config) error {
	return &OpError{Op: op, Group: c.Group, Interface: c.Interface, Err: ErrNotBuilt}
}

// NewSender returns an error wrapping ErrNotBuilt.
func NewSender(cfg Config) (*Sender, error) { return nil, notBuilt("sender", cfg) }

// NewReceiver returns an error wrapping ErrNotBuilt.
func NewReceiver(cfg Config) (*Receiver, error) { return nil, notBuilt("receiver", cfg) }

// LookupDevice returns an error wrapping ErrNotBuilt.
func LookupDevice(iface netip.Addr) (Device, error) {
	return Device{}, notBuilt("lookup", Config{Interface: iface})
}

// MaxDatagram returns 0.
func (s *Sender) MaxDatagram() int { return 0 }

// MaxInline returns 0.
func (s *Sender) MaxInline() int { return 0 }

// Device returns the zero Device.
func (s *Sender) Device() Device { return Device{} }

// Send returns ErrNotBuilt.
func (s *Sender) Send([][]byte) error { return ErrNotBuilt }

// Stats returns zero counters.
func (s *Sender) Stats() ud.SendStats { return ud.SendStats{} }

// Close does nothing.
func (s *Sender) Close() error { return nil }

// Health returns the zero Health.
func (s *Sender) Health() Health { return Health{} }

// Health returns the zero Health.
func (r *Receiver) Health() Health { return Health{} }

// MaxDatagram returns 0.
func (r *Receiver) MaxDatagram() int { return 0 }

// Device returns the zero Device.
func (r *Receiver) Device() Device { return Device{} }

// Placement returns the zero Placement.
func (r *Receiver) Placement() devices.Placement { return devices.Placement{} }

// Peek returns nil.
func (r *Receiver) Peek(int) *ud.Slot { return nil }

// Release does nothing.
func (r *Receiver) Release(int) {}

// Wait returns ud.ErrClosed.
func (r *Receiver) Wait(time.Duration) error { return ud.ErrClosed }

// Stats returns zero counters.
func (r *Receiver) Stats() ud.RecvStats { return ud.RecvStats{} }

// Close does nothing.
func (r *Receiver) Close() error { return nil }

// Starvation returns the zero Starvation.
func (r *Receiver) Starvation() Starvation { return Starvation{} }
