package ud

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FutexSource is implemented by Direct receivers whose datagrams arrive in
// memory shared with their writer, which wakes readers through a futex
// word in that memory (ud/shm). A Notifier given such receivers with
// WatchFutex sleeps on all their words at once, on the consumer's own
// thread.
type FutexSource interface {
	// Arm announces that the consumer is about to sleep: from now on the
	// writer must wake the word it returns when it publishes. It returns
	// Ready when a datagram already waits, so the consumer must not sleep.
	// Consumer only; Disarm follows every Arm, whatever it returned.
	Arm() FutexArm
	// Disarm ends what Arm began: the writer need not wake this consumer
	// any more.
	Disarm()
}

// FutexArm is what FutexSource.Arm returns.
type FutexArm struct {
	// Word is the futex word to sleep on, shared between processes; nil
	// when the source has nothing to sleep on (no ring yet).
	Word *atomic.Uint32
	// Val is the value Word held when the source found nothing new: the
	// sleep ends at once if the word no longer holds it.
	Val uint32
	// Max is the longest the source lets the consumer sleep before it
	// looks again (a check of its file, a ring that may appear); 0 for no
	// limit of its own.
	Max time.Duration
	// Ready says that a datagram already waits: do not sleep.
	Ready bool
}

// maxFutexes is the most futex words one futex_waitv takes
// (FUTEX_WAITV_MAX), the Notifier's own among them.
const maxFutexes = 128

// futex_waitv flags (linux/futex.h).
const (
	futex2SizeU32 = 0x02
	futex2Private = 128
)

// futexWaitv is struct futex_waitv.
type futexWaitv struct {
	val      uint64
	uaddr    uint64
	flags    uint32
	reserved uint32
}

var (
	waitvOnce sync.Once
	waitvErr  error
)

// errNoWaitv says that the kernel has no futex_waitv (before Linux 5.16).
var errNoWaitv = errors.New("ud: this kernel has no futex_waitv (Linux 5.16 and later)")

// futexWaitvSupported reports whether the kernel has futex_waitv: a call
// with no futexes is refused with EINVAL where it exists, ENOSYS where not.
func futexWaitvSupported() error {
	waitvOnce.Do(func() {
		_, _, e := unix.Syscall6(unix.SYS_FUTEX_WAITV, 0, 0, 0, 0, 0, 0)
		if e == unix.ENOSYS {
			waitvErr = errNoWaitv
		}
	})
	return waitvErr
}

// WatchFutex adds src to the sources Wait sleeps on: with futex sources,
// Wait arms each and sleeps in one futex_waitv over their words and the
// Notifier's own, which Signal wakes. It fails, and the caller wakes the
// Notifier some other way, when the kernel has no futex_waitv, when the
// Notifier already watches descriptors (Watch), or when it watches the most
// futexes one wait takes. Call it before the consumer starts.
func (n *Notifier) WatchFutex(src FutexSource) error {
	if err := futexWaitvSupported(); err != nil {
		return err
	}
	if n.epfd >= 0 {
		return errors.New("ud: this notifier waits on descriptors and cannot also wait on shared-memory futexes; use one transport per subscriber")
	}
	if len(n.futexes) >= maxFutexes-1 {
		return fmt.Errorf("ud: a notifier waits on at most %d shared-memory rings", maxFutexes-1)
	}
	if n.fwait == nil {
		n.fwait = make([]futexWaitv, 1, maxFutexes)
		n.fwait[0] = futexWaitv{uaddr: uint64(uintptr(unsafe.Pointer(&n.sig))), flags: futex2SizeU32 | futex2Private}
	}
	n.futexes = append(n.futexes, src)
	n.futexOn.Store(true)
	return nil
}

// futexWait is Wait's sleep over futex sources, after the consumer's last
// poll found nothing: it arms every source, sleeps in futex_waitv unless
// one is ready, and disarms them.
func (n *Notifier) futexWait(timeout time.Duration, done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
	}
	w := n.fwait[:1]
	armed, ready := 0, false
	for _, src := range n.futexes {
		a := src.Arm()
		armed++
		if a.Ready {
			ready = true
			break
		}
		if a.Max > 0 && a.Max < timeout {
			timeout = a.Max
		}
		if a.Word != nil {
			w = append(w, futexWaitv{val: uint64(a.Val), uaddr: uint64(uintptr(unsafe.Pointer(a.Word))), flags: futex2SizeU32})
		}
	}
	if !ready {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err == nil {
			ts = unix.NsecToTimespec(ts.Nano() + int64(max(timeout, time.Microsecond)))
			// EAGAIN (a word changed), ETIMEDOUT and EINTR all mean: poll again.
			_, _, _ = unix.Syscall6(unix.SYS_FUTEX_WAITV, uintptr(unsafe.Pointer(&w[0])), uintptr(len(w)), 0,
				uintptr(unsafe.Pointer(&ts)), uintptr(unix.CLOCK_MONOTONIC), 0)
		}
	}
	for _, src := range n.futexes[:armed] {
		src.Disarm()
	}
	select {
	case <-done:
		return false
	default:
	}
	return true
}

// futexWakePrivate wakes one thread of this process sleeping on w.
func futexWakePrivate(w *atomic.Uint32) {
	const futexWakeOpPrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOpPrivate, 1, 0, 0, 0)
}
