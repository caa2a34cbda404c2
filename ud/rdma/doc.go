// Package rdma is tickcast's RDMA transport: MoldUDP64 datagrams sent and
// received as unreliable-datagram (UD) messages on an InfiniBand or RoCE
// multicast group, through libibverbs and librdmacm. It implements
// ud.Sender and ud.Receiver.
//
// # Building
//
// The verbs code is cgo and is built only with the rdma build tag on Linux:
//
//	go build -tags rdma ./...   (needs libibverbs-dev and librdmacm-dev)
//
// Without the tag, or with CGO_ENABLED=0, the package still compiles, and
// NewSender, NewReceiver and LookupDevice return an error wrapping
// ErrNotBuilt that names the tag and the packages. At run time the binary
// needs libibverbs1, librdmacm1 and a verbs provider (ibverbs-providers).
//
// # Setup
//
// Each Sender and Receiver owns one rdma_cm id in the UDP port space, bound
// to Config.Interface: the bind selects the RDMA device and port behind that
// address (ErrNoDevice if there is none) and the port must be ACTIVE
// (ErrPortNotActive otherwise). The id gets one UD queue pair, a send and a
// receive completion queue, and a single memory region, registered once,
// that holds every receive and send slot: nothing is registered on the hot
// path. The queue pair then joins Config.Group with rdma_join_multicast (a
// Sender joins send-only where the kernel supports it, so it does not
// receive its own datagrams); the join event supplies the address handle
// attributes, the remote QPN (0xFFFFFF for multicast) and the group's
// qkey.
//
// On RoCE the group's MGID is the IPv4-mapped address ::ffff:a.b.c.d of
// Config.Group; the UDP port of the tickcast line plays no part, so two
// lines must use different group addresses.
//
// Senders and Receivers make the hooks a tickcast publisher and subscriber
// take: each line opened gets its group from its ud.LineID
// (Config.ForLine).
//
// # Datagram size
//
// A UD message is one packet: the largest datagram is the port's active MTU
// (1024 bytes for RoCE over a 1500-byte Ethernet MTU, 4096 at most), not the
// Ethernet MTU. MaxDatagram reports it, and Send rejects longer datagrams
// with ErrTooLarge.
//
// # Receiving
//
// A Receiver keeps every free slot of its ud.Ring posted as a receive work
// request of MTU + 40 bytes: each UD receive starts with a 40-byte Global
// Route Header slot, which the slot's buffer skips, so Slot.Data is the
// datagram alone. The receive loop polls the completion queue in batches of
// Config.Batch, publishes the completed slots to the consumer in order
// (a UD receive queue completes in posting order). Release posts the slots
// the consumer hands back, so the queue is refilled as soon as the consumer
// is done, whether or not the loop is awake. When every slot is lent out
// the receive queue runs empty and the device drops what arrives; the loss
// reaches the consumer as a sequence gap.
//
// # Ring occupancy, starvation and drops
//
// Like every ring-based receiver, a Receiver tells how full its ring is
// (RingLen, RingCap: ud.RingReporter), which a subscriber exports as
// ring_used_slots and ring_slots. RecvStats.RingFull counts the times the
// receive loop found every slot lent out; for this transport that is when
// the receive queue ran empty, and Starvation adds how long it stayed so
// (measured by the loop, the clock read once when the ring fills and once
// when it frees).
//
// What the device dropped meanwhile has no per-receiver count:
// RecvStats.KernelDrops stays 0. A UD queue pair has no drop counter, and a
// device that counts receives that found no work request posted counts them
// for the whole port, all queue pairs and processes together:
// ReadDeviceDrops reads that counter (mlx5's hw_counters/out_of_buffer),
// the RDMA counterpart of a socket's kernel drops, and says when the device
// has none. Soft-RoCE (rxe) has none: it drops such a datagram without
// counting it. Its hw_counters rcvd_pkts counts every packet the device
// received and rdma_recvs every receive completion, so with a single
// receiving queue pair on the device the difference is what was dropped
// (verified in the Soft-RoCE VM: 56 datagrams sent to a 16-slot receiver
// that never releases raise rcvd_pkts by 56 and rdma_recvs by 16, and no
// other counter). The datagrams lost always reach the consumer as a
// sequence gap, recovered or reported lost like any other.
//
// In BusyPoll mode the loop spins on ibv_poll_cq on a goroutine locked to
// its OS thread, pinned to Config.CPU, or with Config.CPU -1 to the CPUs of
// the device's NUMA node when sysfs knows it (package devices; a numa_node
// of -1 leaves placement alone; Receiver.Placement says which). In Blocking
// mode, when a poll finds nothing, it arms the completion queue
// (ibv_req_notify_cq), polls once more so that no completion slips in
// before the arm, and waits for the completion channel's event in the Go
// runtime's poller: the channel's non-blocking fd (a dup of it, since the
// channel closes its own) is an os.File, and the loop is a parked goroutine
// that holds no OS thread while it waits, so many Blocking receivers cost
// no thread each. Events are acknowledged in batches of 256, and the rest
// before the completion queue is destroyed. Close closes the dup, which
// wakes the loop.
//
// In Direct and DirectSpin mode there is no receive loop: one consumer
// goroutine serves any number of receivers (ud.Filler). Fill polls the
// completion queue into the ring. In Direct mode, when the queue is empty,
// Fill arms it (polling once more after the arm) and clears the receiver's
// mark in the consumer's ud.Notifier, which sleeps in one epoll_wait over
// every line: each receiver gives it an epoll set of its own holding the
// completion channel's fd and an eventfd, so the set's fd stays the same
// when a rebuild replaces the channel. A completion wakes the consumer
// directly, with no hand-off between goroutines. DirectSpin never arms nor
// sleeps. Rebuilds happen in Fill too, without waiting: the endpoint is torn
// down at once, and each later Fill tries to open it again once
// Config.RebuildPoll has passed and the port is ACTIVE.
//
// # Events and rebuilds
//
// Every Sender and Receiver watches two event sources, both through
// non-blocking fds in the Go runtime's poller (no thread waits in C): its own
// rdma_cm event channel (RDMA_CM_EVENT_MULTICAST_ERROR,
// RDMA_CM_EVENT_DEVICE_REMOVAL, RDMA_CM_EVENT_ADDR_CHANGE), and the async
// events of its device context (IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR,
// QP fatal, CQ error, IBV_EVENT_DEVICE_FATAL). librdmacm opens one device
// context per device and process, shared by every endpoint on it, so one
// monitor per context reads its async events and hands each to the
// endpoints it concerns: a port event to those on that port, a QP or CQ
// event to the owner of the QP or CQ, a device event to all. Every event is
// acknowledged as soon as it is read, logged on Config.Logger, and counted
// per kind (Event): Receiver.Health and Sender.Health give an endpoint's
// counts, Totals the process's, which tickprom exports as
// tickcast_rdma_events_total. A work completion with an error status counts
// as EventCompletionError.
//
// Every event but PORT_ACTIVE and EventOther breaks the endpoint: a queue
// pair in the error state does not come back, and one that survived a port
// error cannot be trusted to. The endpoint is torn down (queue pair,
// completion queues, completion channel, memory registration, multicast
// membership, rdma_cm id) and opened again once LookupDevice says the port
// behind Config.Interface is ACTIVE, checked every Config.RebuildPoll. A
// failed completion often comes first (a flush error when the queue pair
// went to the error state): it is enough, no async event is awaited.
//
//   - A Receiver rebuilds in its receive loop. The new endpoint registers
//     the same slot memory, so slots lent to the consumer stay valid, and
//     posts the free slots in ring order from where the ring stands. What
//     arrived meanwhile is lost and reaches the consumer as a sequence gap,
//     recovered or reported lost like any other. Err stays nil: it reports
//     only what stops the loop for good.
//   - A Sender rebuilds in Send. While its port is not back, Send sends
//     nothing and returns an error wrapping ErrPortNotActive (the publisher
//     counts it and goes on; subscribers recover the packets from the
//     retransmission store).
//   - While torn down after a port or queue pair error, an endpoint stays
//     registered with its context's monitor, so it still counts the port
//     coming back (PORT_ACTIVE). A removed or fatally failed device is
//     released entirely, monitor included.
//
// Health.Rebuilds, RebuildFailures, Down and LastOutage (from the event to
// the endpoint joined again) say what happened; tickprom exports the
// process totals as tickcast_rdma_rebuilds_total,
// tickcast_rdma_rebuild_failures_total and
// tickcast_rdma_last_rebuild_outage_seconds, and every rebuild is logged
// ("rdma endpoint torn down", "rdma endpoint rebuilt" with the outage).
// Measured in the Soft-RoCE VM (software emulation, so only the order of
// magnitude carries over): a forced queue pair error is rebuilt in 8 to 42
// ms; after a link flap both ends are back about 0.1 s after the link is.
//
// On device removal rdma_cm reports RDMA_CM_EVENT_DEVICE_REMOVAL within
// about 0.1 s and both ends release every object at once. The removal
// (rdma link delete) completes when librdmacm closes its own context of the
// device, which it does only when it can still list another RDMA device: in
// the VM, with a second device present, removal took 0.1 s and the stream
// resumed 32 ms after rdma link add; with the removed device the host's
// only one, the removal waits until the process exits.
//
// # Sending
//
// Send copies each datagram into a send slot of the registered region and
// posts up to Config.Batch of them as one linked list of work requests with
// one ibv_post_send call. Datagrams up to the queue pair's max_inline_data
// are sent inline. Only the last work request of each list asks for a
// completion (selective signaling); its completion frees the slots of the
// whole list.
package rdma
