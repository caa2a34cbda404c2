// Package udp is tickcast's UDP multicast transport over IPv4: a ud.Sender
// and a ud.Receiver built directly on Linux system calls
// (golang.org/x/sys/unix), with batched sendmmsg/recvmmsg into pre-allocated
// buffers and no allocation per datagram.
//
// # Sockets
//
// A Sender's socket sets IP_MULTICAST_IF to Config.Interface on every open,
// so the interface multicast leaves by is chosen by configuration, never by
// the routing table (whose default route would send it out of the host's
// NIC). It binds to the interface address, connects to the group and port,
// and sets IP_MULTICAST_TTL (default 0: host-local) and IP_MULTICAST_LOOP
// (default on, so receivers on the same host hear it). The defaults, with
// Interface 127.0.0.1, keep every datagram on the loopback interface.
//
// A Receiver's socket binds to the group address and port, not to
// INADDR_ANY. Linux delivers a multicast datagram to every socket whose bound
// address matches the destination; a socket bound to INADDR_ANY:port matches
// every group on that port that any socket on the host has joined, so a
// subscriber to channel 1 would also get channel 2 if both share a port. It
// also turns IP_MULTICAST_ALL off, so only groups joined by the socket itself
// are delivered, sets SO_REUSEADDR so that several receivers (the A and B line
// consumers, other subscriber processes) can bind the same group and port,
// and joins the group on Config.Interface with IP_ADD_MEMBERSHIP.
//
// # Lines
//
// Senders and Receivers make the hooks a tickcast publisher and subscriber
// take (PublisherConfig.NewSender, SubscriberConfig.NewReceiver): one Config
// holds the settings every line shares, and each line opened gets its group
// and port from its ud.LineID (Config.ForLine).
//
// # Receive modes
//
// The receive loop runs in its own goroutine, started by NewReceiver, and is
// the only producer of the receiver's ud.Ring. Each recvmmsg call writes into
// the buffers of up to Config.Batch free ring slots — the descriptors
// (mmsghdr, iovec, control buffer) are built once per slot when the receiver
// opens — and the loop publishes what arrived with one atomic store.
//
// In Blocking mode the socket is blocking and the loop sleeps in
// recvmmsg(MSG_WAITFORONE): it wakes for the first datagram and takes what
// else is queued without waiting for a full batch. It uses no CPU while the
// line is idle. Close wakes it with shutdown(2); SO_RCVTIMEO (100 ms) is a
// backstop that makes the loop re-check the closed flag even if a kernel
// did not wake it.
//
// In BusyPoll mode the socket is non-blocking and the loop spins on
// recvmmsg from a goroutine locked to its OS thread (runtime.LockOSThread),
// pinned to Config.CPU with sched_setaffinity unless CPU is -1. It trades a
// whole core for the wakeup latency. The goroutine permanently holds a P, so
// it needs GOMAXPROCS of at least 2, and on a two-core machine at most one
// receiver should spin; after about a thousand empty polls in a row it yields
// with runtime.Gosched so goroutines queued on its P are not starved until the
// runtime's 10 ms preemption. With Config.Backoff (for hosts with fewer cores
// than spinning threads) it sleeps about 50 µs in the kernel after 64 empty
// polls instead, giving the core back.
//
// Direct and DirectSpin modes have no receive loop: the socket is
// non-blocking and the consumer receives itself with Fill (ud.Filler), one
// recvmmsg into the free slots, whenever its ring is empty. A Direct receiver
// registers its socket with Config.Notifier (Notifier.Watch), so that a
// consumer of many receivers sleeps in one epoll_wait over all of them and
// Fill asks only a socket epoll reported readable; the kernel wakes the
// consumer's own thread, and no other thread is involved in delivering a
// datagram. A DirectSpin receiver is asked on every Fill, for a consumer that
// polls without sleeping. Wait, for a consumer of one receiver, polls the
// socket with poll(2) and fills.
//
// # Ring full
//
// When every slot is lent to the consumer the loop stops reading (counting
// one RecvStats.RingFull per episode) and waits for a release: Blocking
// sleeps on the ring's notification, BusyPoll spins. Datagrams keep queueing
// in the socket buffer meanwhile, and what does not fit is dropped by the
// kernel and counted, as below. Nothing is dropped silently.
//
// # Buffer sizing
//
// The socket receive buffer absorbs bursts while the loop is behind, so by
// default it is as large as allowed: Config.RcvBuf 0 requests DefaultRcvBuf
// (32 MiB) or net.core.rmem_max, whichever is larger. A request above
// rmem_max uses SO_RCVBUFFORCE, which needs CAP_NET_ADMIN; without it the
// receiver falls back to SO_RCVBUF, which the kernel caps at rmem_max.
// RecvStats.RcvBuf is what getsockopt(SO_RCVBUF) returns afterwards, and on
// Linux that is twice the granted request: the kernel doubles the value to
// account for its per-packet overhead (struct sk_buff and alignment), which is
// charged against the same budget. A 1200-byte datagram on loopback costs
// about 2 KiB of it.
//
// Each ring slot holds Config.MaxDatagram bytes (default 1472, the payload of
// a 1500-byte Ethernet frame; loopback allows up to 65507). A longer datagram
// is truncated by the kernel, reported with MSG_TRUNC, dropped by the loop
// and counted in RecvStats.Truncated.
//
// # Drop accounting
//
// The receiver enables SO_RXQ_OVFL: the kernel attaches the socket's
// cumulative drop counter (a wrapping 32-bit count of datagrams it could not
// queue, mostly for want of buffer space) to each received datagram as a
// control message, read from pre-allocated per-slot control buffers. The
// value is the count when the datagram was queued, and the kernel attaches it
// only once it is non-zero; RecvStats.KernelDrops is the latest value,
// extended to 64 bits. Drops that happen after the last datagram received are
// therefore reported with the next one. Once a datagram queued after the
// losses has been received,
//
//	Datagrams + Truncated + KernelDrops == datagrams delivered to the socket
//
// holds exactly, which is what lets a sequence gap be matched with the
// drops that caused it. Receiver.ProcNetDrops reads the same counter from
// /proc/net/udp as a cross-check.
//
// # Sending
//
// Send batches up to Config.Batch datagrams per sendmmsg call through
// mmsghdr and iovec arrays allocated once per Sender. A partial send resumes
// from the first unsent datagram; EAGAIN, ENOBUFS and EINTR are retried and
// counted in SendStats.Retries, and Send gives up with an error only after a
// second without progress. Every datagram Send was given is either sent or
// reported in its error.
//
// Errors from socket operations are *OpError values naming the operation,
// group, port and interface; Config problems are *ConfigError values naming
// the field.
package udp
