package ud

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Notifier lets one consumer block until any of several rings (one per
// channel and line) has data, instead of waiting on each ring in turn. Each
// ring given to SetNotifier signals it after publishing, but only while the
// consumer has announced that it is about to sleep, so a busy consumer costs
// the producers one atomic load per batch.
//
// The handshake is the ring's own: the consumer sets the flag, checks every
// ring once more (its Poll), and only then sleeps; a producer publishes, then
// loads the flag. Both are sequentially consistent atomics, so either the
// producer sees the flag or the consumer sees the data.
//
// Receivers without a receive loop (Mode Direct) register their socket with
// Watch instead. The Notifier then sleeps in epoll_wait over every watched
// descriptor and an eventfd, which Signal writes, and marks the descriptors
// that became readable (Ready) for the consumer to receive from. Nothing
// wakes between the datagram's arrival and the consumer: the kernel wakes
// the consumer's thread itself.
//
// Receivers whose datagrams arrive in memory shared with their writer
// (ud/shm) register with WatchFutex instead: the Notifier then sleeps in one
// futex_waitv over their futex words and a word of its own, which Signal
// wakes, so the writer's wake reaches the consumer's thread with nothing in
// between. A Notifier watches descriptors or futexes, not both.
type Notifier struct {
	waiting atomic.Bool
	wake    chan struct{}
	timer   *time.Timer

	// Futex mode (WatchFutex): set up before the consumer starts.
	futexes []FutexSource
	fwait   []futexWaitv // the kernel's view: [0] is sig, then one per armed source
	sig     atomic.Uint32
	futexOn atomic.Bool

	// Set up by the first Watch; consumer only afterwards, but for evfd,
	// which Signal reads under evMu.
	evMu       sync.RWMutex
	epfd, evfd int
	ready      []bool // by watch index: epoll reported the descriptor readable
	events     []unix.EpollEvent
	evbuf      [8]byte
}

// NewNotifier returns a notifier.
func NewNotifier() *Notifier {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Notifier{wake: make(chan struct{}, 1), timer: t, epfd: -1, evfd: -1}
}

// wakeData is the epoll user data of the eventfd; watched descriptors carry
// their watch index, which is smaller.
const wakeData = 1<<31 - 1

// Watch adds fd to the set Wait sleeps on and returns its index for Ready
// and SetReady. The descriptor starts out marked ready, so that whatever
// arrived before the first Wait is received. Call it before the consumer
// starts; the caller keeps fd open until the Notifier is closed.
func (n *Notifier) Watch(fd int) (int, error) {
	if len(n.futexes) > 0 {
		return 0, fmt.Errorf("ud: fd %d: this notifier waits on shared-memory futexes and cannot also wait on descriptors; use one transport per subscriber", fd)
	}
	if n.epfd < 0 {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return 0, fmt.Errorf("ud: epoll_create1: %w", err)
		}
		ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			unix.Close(ep)
			return 0, fmt.Errorf("ud: eventfd: %w", err)
		}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ev, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeData}); err != nil {
			unix.Close(ev)
			unix.Close(ep)
			return 0, fmt.Errorf("ud: epoll_ctl eventfd: %w", err)
		}
		n.evMu.Lock()
		n.epfd, n.evfd = ep, ev
		n.evMu.Unlock()
	}
	i := len(n.ready)
	if err := unix.EpollCtl(n.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}); err != nil {
		return 0, fmt.Errorf("ud: epoll_ctl add fd %d: %w", fd, err)
	}
	n.ready = append(n.ready, true)
	n.events = make([]unix.EpollEvent, len(n.ready)+1)
	return i, nil
}

// Unwatch removes fd from the set; its index is not reused.
func (n *Notifier) Unwatch(fd int) {
	if n.epfd >= 0 {
		_ = unix.EpollCtl(n.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// Ready reports whether watched descriptor i may have data: epoll said so
// and the consumer has not since drained it. Consumer only.
func (n *Notifier) Ready(i int) bool { return n.ready[i] }

// SetReady marks watched descriptor i; the consumer clears it once a
// receive found the socket empty. Consumer only.
func (n *Notifier) SetReady(i int, ready bool) { n.ready[i] = ready }

// SetAllReady marks every watched descriptor ready, so that the next Fill
// of each receives whatever its socket holds. A consumer calls it when it
// has not waited for a while (its handler or a recovery call held it): the
// marks are only as fresh as the last epoll_wait, and a channel whose socket
// was not asked could otherwise look silent. Consumer only.
func (n *Notifier) SetAllReady() {
	for i := range n.ready {
		n.ready[i] = true
	}
}

// Close releases the epoll set and the eventfd, if Watch made them. A
// producer may still Signal (a recovery answer arriving while the consumer
// closes): evMu keeps it from writing to an eventfd being closed, whose
// number the process could reuse.
func (n *Notifier) Close() {
	if n.epfd >= 0 {
		n.evMu.Lock()
		unix.Close(n.evfd)
		n.evfd = -1
		n.evMu.Unlock()
		unix.Close(n.epfd)
		n.epfd = -1
	}
}

// Signal wakes the consumer if it announced it is waiting. Rings call it
// after publishing; other producers of work for the consumer (recovery
// answers) call it too.
func (n *Notifier) Signal() {
	if n.waiting.Load() {
		if n.futexOn.Load() {
			n.sig.Add(1)
			futexWakePrivate(&n.sig)
			return
		}
		// Only while the consumer sleeps: the lock costs nothing on the
		// busy path.
		n.evMu.RLock()
		if n.evfd >= 0 {
			one := [8]byte{1}
			_, _ = unix.Write(n.evfd, one[:])
			n.evMu.RUnlock()
			return
		}
		n.evMu.RUnlock()
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// Wait blocks until a ring signals, a watched descriptor becomes readable,
// the timeout passes or done is closed. poll is called after the consumer
// announced it is waiting and must take whatever the rings hold; Wait
// returns at once if it took anything. Wait returns false only when done was
// closed; with watched descriptors, done is noticed within the timeout.
// Consumer only.
func (n *Notifier) Wait(timeout time.Duration, done <-chan struct{}, poll func() int) bool {
	if len(n.futexes) > 0 {
		n.fwait[0].val = uint64(n.sig.Load()) // before waiting: a Signal from now on changes sig
	}
	n.waiting.Store(true)
	defer n.waiting.Store(false)
	if poll() > 0 {
		return true
	}
	if n.epfd >= 0 {
		return n.epollWait(timeout, done)
	}
	if len(n.futexes) > 0 {
		return n.futexWait(timeout, done)
	}
	n.timer.Reset(timeout)
	defer n.timer.Stop()
	select {
	case <-n.wake:
	case <-n.timer.C:
	case <-done:
		return false
	}
	return true
}

// Refresh asks epoll, without waiting, which watched descriptors are
// readable, and marks them ready. A consumer that keeps finding work never
// waits, so a mark it cleared (a socket found empty) would stay cleared
// while that socket fills, for as long as another one keeps it busy: a
// convoy in which one channel's backlog starves the others. The consumer
// calls Refresh between busy polls. It costs one system call. Consumer
// only.
func (n *Notifier) Refresh() {
	if n.epfd < 0 {
		return
	}
	k, err := unix.EpollWait(n.epfd, n.events, 0)
	if err != nil {
		return // EINTR: the next refresh or wait asks again
	}
	for _, ev := range n.events[:k] {
		if ev.Fd == wakeData {
			_, _ = unix.Read(n.evfd, n.evbuf[:])
			continue
		}
		n.ready[ev.Fd] = true
	}
}

func (n *Notifier) epollWait(timeout time.Duration, done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
	}
	ms := int((timeout + time.Millisecond - 1) / time.Millisecond)
	k, err := unix.EpollWait(n.epfd, n.events, max(ms, 1))
	if err != nil {
		k = 0 // EINTR: a signal; the caller polls again
	}
	for _, ev := range n.events[:k] {
		if ev.Fd == wakeData {
			_, _ = unix.Read(n.evfd, n.evbuf[:])
			continue
		}
		n.ready[ev.Fd] = true
	}
	select {
	case <-done:
		return false
	default:
	}
	return true
}

// SetNotifier makes the ring signal n after each Publish. Call it before the
// producer starts.
func (r *Ring) SetNotifier(n *Notifier) { r.notifier = n }
