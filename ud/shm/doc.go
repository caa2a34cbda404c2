// Package shm is tickcast's shared-memory transport, for subscribers on the
// feed handler's own host: the writer (Sender) puts each channel's
// MoldUDP64 packets, byte for byte as they would go on the wire, into a
// ring file under /dev/shm, and every reader (Receiver) maps that file and
// follows the writer. The packets are in memory once, the writer's copy;
// while data flows neither side makes a system call per packet.
//
// # The ring file
//
// A ring file is a header page of 4096 bytes and then Config.Slots slots of
// a fixed size, each room for one packet of up to Config.MaxDatagram bytes
// (variable-length packets in fixed slots: the ring is indexed by packet,
// not by byte). The header holds, in the host's byte order:
//
//   - written once, before the file is visible: a magic string, the format
//     version, the geometry (slot count and size, largest packet), the
//     writer's pid and the ring's generation (its creation time in
//     nanoseconds), which tells rings of one path apart;
//   - the session of the latest packet, under a small sequence lock;
//   - on the writer's cache line: the position (packets published, which
//     is the next packet's index), the futex word (the position's low 32
//     bits) and the closed flag;
//   - on the readers' cache line: the sleeping mask, one bit per reader
//     about to sleep on the futex, the highest position a reader went to
//     sleep at (armed), and a table of 64 waiter slots, each holding the
//     pid of the process whose reader owns that bit.
//
// A slot holds a sequence word, the packet's length and the packet. Packet
// i lives in slot i mod Slots; its sequence word is 2i+1 while the writer
// writes it and 2i+2 once written (a sequence lock whose value also names
// the packet, so a reused slot can never pass for the one a reader wants).
//
// # Writer
//
// NewSender takes an exclusive flock on the lock file PATH.lock, which it
// never deletes, and writes its pid in it: a second writer is refused with
// a *HeldError naming the ring and that pid. It then builds a new ring in a
// temporary file beside the path, maps it read-write and renames it over
// the path. A restarted writer therefore never reuses a file: readers of
// the old ring keep an intact file to drain, and find the new one by its
// inode.
//
// Send writes each packet: the slot's sequence word to 2i+1, the length
// and bytes, the word to 2i+2. After the batch it stores the position
// (sequentially consistent, so a reader that loads it sees every slot below
// it written), stores the futex word, and loads the sleeping mask: only if
// a reader sleeps does it make a system call, FUTEX_WAKE. This is ud.Ring's
// waiting handshake across processes: a reader sets its bit and then loads
// the position, the writer stores the position and then loads the mask, so
// either the writer sees the bit or the reader sees the packet. A reader
// about to sleep also raises armed to the position it sleeps at, and the
// writer wakes only if armed has reached the position of its previous wake:
// the readers that wake took off the futex are not woken again while they
// get going (their bits still set), so a writer faster than its readers'
// wake-ups makes one wake per sleep, not one per Send. The writer reads
// nothing else of the readers, and never waits for one. Close sets the
// closed flag and wakes every sleeper; the file stays for readers to
// drain.
//
// # Reader
//
// NewReceiver maps the slots read-only and joins live, at the writer's
// position; the subscriber's sequence tracker sees the session start as it
// would on a multicast line. A reader copies packet i out of the shared
// slot into a slot of its private ud.Ring, and accepts the copy only if
// the sequence word read 2i+2 both before and after it. Anything else means
// the writer lapped the reader and reused the slot: the copy, possibly
// torn, is discarded, the packets from i up to the oldest still in the
// ring are counted lost (RecvStats.KernelDrops, exactly), and the reader
// resumes there. For the subscriber the loss is an ordinary sequence gap
// that recovery fills. Readers hold no lock and write only their own bit
// and waiter slot, so a reader that stops or dies mid-copy has no effect on
// the writer or the other readers.
//
// The modes are ud's:
//
//   - Blocking: a receive goroutine copies and, when it has taken
//     everything, registers its bit and sleeps on the futex (after
//     Config.SpinPolls empty polls: spin, then wait), at most
//     Config.CheckInterval at a time.
//   - BusyPoll: the receive goroutine spins on the position from a locked
//     thread (ud.LockThread, ud.Spinner), as ud/udp's does.
//   - Direct: no receive goroutine: the consumer copies with Fill. With a
//     Notifier, the receiver registers with it (ud.Notifier.WatchFutex):
//     when the consumer has taken everything, the Notifier arms every ring
//     it watches (the receiver sets its bit and checks the position once
//     more, Arm) and sleeps in one futex_waitv over the rings' futex words
//     and its own, which a recovery answer's Signal wakes. The writer's wake
//     reaches the consumer's thread with nothing in between, and the bits
//     are cleared as soon as it wakes (Disarm), so a busy ring costs the
//     writer no wake-ups. On a kernel without futex_waitv (before Linux
//     5.16) a small waker goroutine sleeps on the futex instead and signals
//     the Notifier: two wake-ups. Without a Notifier, Wait sleeps on the
//     futex on the consumer's own thread.
//   - DirectSpin: the consumer copies with Fill and never sleeps.
//
// The waiting modes (Blocking, Direct) map the header page read-write to
// register as waiters, and need write permission on the ring file; the spin
// modes only read. A reader claims a waiter slot when it maps a ring and
// frees it when it unmaps; a reader killed while it slept leaves its bit
// set, which costs the writer one more futex wake (see Writer), and its
// slot is freed by the next reader to map the ring, which finds that pid
// gone.
//
// # Faults
//
// Every Config.CheckInterval the copying side checks the mapped file
// (fstat) and the path (stat). A file replaced by a new writer's is
// drained, then mapped in its place and read from its start
// (Restarts, Generation). A deleted file is reported (Err: ErrDeleted)
// and still followed until a new ring appears at the path. A truncated file
// is reported (ErrTruncated) and unmapped; a copy that touches a page
// beyond the new end of file between two checks faults, and the fault is
// caught (runtime/debug.SetPanicOnFault) instead of killing the process
// with SIGBUS. Before a ring file exists the reader waits for one
// (ErrNoRing). Missing permissions, on the directory or the file, are
// errors that say which.
//
// # Lines
//
// Senders and Receivers are the hooks a tickcast publisher and subscriber
// take: the ring of channel CH of feed FEED is Dir/tickcast-FEED-CH
// (RingName). A ring is one copy in memory, so there is no line B: the
// hooks refuse it (ErrLineB).
//
// Nothing allocates per packet, on either side.
package shm
