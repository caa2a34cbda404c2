// Package ud defines the datagram transports tickcast publishes and receives
// MoldUDP64 packets over: UDP multicast (package ud/udp, pure Go), RDMA UD
// queue pairs (build tag rdma), and, for subscribers on the publisher's own
// host, a ring file in shared memory (package ud/shm).
//
// A transport has two halves. A Sender sends whole datagrams to one multicast
// group and states the largest datagram it can carry, which the MoldUDP64
// packet builder uses as its limit. A Receiver owns a ring of pre-allocated
// receive slots. Its receive loop (one goroutine per line) fills free slots and
// publishes them to the consumer; the consumer reads them in arrival order,
// borrowing each slot's bytes in place, and releases them in the same order,
// which hands the slots back to the receive loop. Nothing is copied between the
// wire and the consumer. A consumer that must keep a message beyond the release
// (reordering, recovery) copies it out first, so a held message never starves
// the receive queue.
//
// When the consumer falls behind and the ring is full, the receive loop stops
// taking datagrams from the transport until slots are released; the loss that
// follows happens in the kernel (or NIC) queue, is counted there and reported in
// RecvStats.KernelDrops, and reaches the consumer as a sequence gap like any
// other. The ring never drops silently.
//
// Ring is the single-producer single-consumer slot ring that receivers embed:
// the receive loop fills and publishes slots in batches, the consumer peeks
// and releases them in order, and each side can block until the other moves
// without allocating. Lender is the consumer side built on it that the
// ring-based receivers share (ud/udp, ud/rdma, ud/natslive); Wrapper is what
// a receiver that wraps another (ud/faults) passes through. LockThread and
// Spinner are the thread pinning and the idle pacing of every loop that
// spins.
//
// # Lines
//
// Every Sender and Receiver serves one line of one channel, and is opened
// for it: LineID names the channel, the line (LineA, LineB; LineRecovery
// names recovery where a line is expected) and the line's multicast group.
// A publisher or subscriber takes a transport as a hook, NewSenderFunc or
// NewReceiverFunc, which it calls once per line with that identity; each
// transport package provides its own (udp.Senders and udp.Receivers,
// rdma.Senders and rdma.Receivers), and a hook may wrap another to act on
// one line only (the reference subscriber's fault injection).
package ud

import (
	"errors"
	"time"
)

// ErrClosed is returned by Send and Wait after Close.
var ErrClosed = errors.New("ud: transport closed")

// Slot is one received datagram, lent by a Receiver to its consumer until the
// consumer releases it.
type Slot struct {
	// Buf is the slot's pre-allocated buffer; Buf[:N] holds the datagram.
	Buf []byte
	// N is the datagram's length in bytes.
	N int
	// RecvNs is when the receive loop took the datagram from the transport
	// (Unix nanoseconds, wall clock).
	RecvNs int64
	// Opened says that the receiver has already verified the datagram's
	// seal and removed it (a replay of the archive, which holds the
	// session's keys), so the consumer must not open it again. Receivers
	// of a network never set it.
	Opened bool
}

// Data returns the received datagram. It is valid until the slot is released.
func (s *Slot) Data() []byte { return s.Buf[:s.N] }

// Sender sends datagrams to one destination group.
type Sender interface {
	// MaxDatagram is the largest datagram payload Send accepts, in bytes.
	MaxDatagram() int
	// Send transmits the datagrams in order, batching system calls where the
	// transport can. It returns the first error; datagrams before it were sent.
	Send(datagrams [][]byte) error
	// Stats returns cumulative counters.
	Stats() SendStats
	// Close releases the transport's resources.
	Close() error
}

// Receiver receives datagrams from one group into a ring of lent slots.
//
// Peek, Release and Wait are called by one consumer goroutine; the receive loop
// is the ring's only producer.
type Receiver interface {
	// MaxDatagram is the size of each receive slot's payload area.
	MaxDatagram() int
	// Peek returns the i-th unreleased slot (0 = oldest) or nil when fewer
	// than i+1 datagrams are waiting. It never blocks.
	Peek(i int) *Slot
	// Release hands the n oldest lent slots back to the receive loop.
	Release(n int)
	// Wait blocks until at least one datagram is waiting, the timeout passes,
	// or the receiver is closed. It returns nil in the first two cases (the
	// consumer checks with Peek) and ErrClosed once the receiver is closed
	// and no datagram is waiting: datagrams received before Close can still
	// be drained. It is for consumers that do not spin; its resolution is the
	// Go scheduler's (about a millisecond).
	Wait(timeout time.Duration) error
	// Stats returns cumulative counters.
	Stats() RecvStats
	// Close stops the receive loop and releases the transport's resources.
	Close() error
}

// Filler is implemented by receivers that have no receive loop of their own
// (Mode Direct and DirectSpin): the consumer's goroutine receives by calling
// Fill, typically whenever the ring is empty, and waits on the Notifier the
// receiver was given. A consumer that sees a Receiver implement Filler must
// call Fill, or nothing arrives.
type Filler interface {
	// Fill receives what the transport holds into free ring slots without
	// blocking, publishes it, and returns how many datagrams it received.
	// Consumer only.
	Fill() int
}

// DropSyncer is implemented by receivers whose kernel drop count reaches the
// receive path late (with the next datagram) and can be brought up to date
// by asking the kernel directly. It is optional and off the hot path.
type DropSyncer interface {
	// SyncDrops updates RecvStats.KernelDrops.
	SyncDrops() error
}

// RingReporter is implemented by receivers that can tell how full their
// receive ring is. It is optional: a consumer checks for it with a type
// assertion.
type RingReporter interface {
	// RingLen returns how many received datagrams wait in the ring, not
	// yet released. Consumer only.
	RingLen() int
	// RingCap returns the ring's number of slots, or 0 if unknown.
	RingCap() int
}

// SendStats are a Sender's cumulative counters.
type SendStats struct {
	Datagrams uint64 // datagrams sent
	Bytes     uint64 // payload bytes sent
	Syscalls  uint64 // send system calls (or post-list submissions) made
	Errors    uint64 // send errors
	Retries   uint64 // send calls repeated after a partial send or a transient error (EAGAIN, ENOBUFS, EINTR)
	Segmented uint64 // datagrams among Datagrams sent by segmentation offload: several in one buffer that the kernel cut (UDP GSO)
}

// Segmenter is implemented by Senders that send a run of equal-length
// datagrams (the last of the run may be shorter) as one buffer the kernel
// cuts into datagrams (UDP generic segmentation offload). A publisher that
// sees every line of a channel segment fills its full packets to
// MaxDatagram, so that runs are long. It is optional.
type Segmenter interface {
	// Segments reports whether Send currently uses segmentation offload.
	// It turns false for good when the kernel refuses it.
	Segments() bool
}

// RecvStats are a Receiver's cumulative counters.
type RecvStats struct {
	Datagrams   uint64 // datagrams received into slots
	Bytes       uint64 // payload bytes received
	Syscalls    uint64 // receive system calls (or completion polls) that returned data
	KernelDrops uint64 // datagrams the kernel or NIC dropped for this receiver
	RingFull    uint64 // times the receive loop found every slot lent out
	Truncated   uint64 // datagrams longer than a slot, dropped and counted
	Errors      uint64 // receive errors other than "no data yet" (the loop carries on)
	Coalesced   uint64 // datagrams that arrived as segments of one larger buffer (UDP GRO), cut apart by the receiver
	RcvBuf      int    // socket receive buffer size the kernel granted (0 if none)
}
