package udp

import (
	"errors"
	"net/netip"
)

// ErrTooLarge is returned (wrapped in an *OpError) by Send for a datagram
// longer than Config.MaxDatagram.
var ErrTooLarge = errors.New("datagram longer than MaxDatagram")

// OpError is the error type of socket operations, shaped like net.OpError: it
// names the operation, the line it was for and the local interface.
type OpError struct {
	Op        string     // the system call or socket option, e.g. "sendmmsg", "setsockopt IP_ADD_MEMBERSHIP"
	Group     netip.Addr // the multicast group
	Port      int        // the UDP port
	Interface netip.Addr // the local interface address
	Err       error      // the underlying error, often a syscall.Errno
}

// Error returns "udp <op> <group>:<port> on <interface>: <cause>".
func (e *OpError) Error() string {
	return "udp " + e.Op + " " + netip.AddrPortFrom(e.Group, uint16(e.Port)).String() +
		" on " + e.Interface.String() + ": " + e.Err.Error()
}

// Unwrap returns the underlying error, so errors.Is(err, syscall.EPERM) works.
func (e *OpError) Unwrap() error { return e.Err }

// opError builds an *OpError for the line c describes.
func (c *Config) opError(op string, err error) error {
	return &OpError{Op: op, Group: c.Group, Port: c.Port, Interface: c.Interface, Err: err}
}
