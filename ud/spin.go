package ud

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// BackoffSleep is how long a Spinner with Backoff sleeps in the kernel when
// its loop has been idle.
const BackoffSleep = 50 * time.Microsecond

// backoffSpec is BackoffSleep for clock_nanosleep, made once.
var backoffSpec = unix.NsecToTimespec(int64(BackoffSleep))

// LockThread prepares the calling goroutine to spin: it locks it to its OS
// thread (runtime.LockOSThread) and, with cpu >= 0, pins that thread to the
// CPU (sched_setaffinity). With backoff it also sets the thread's timer slack
// to 1 ns, so that a Spinner's kernel sleeps last what they ask rather than
// the default 50 µs of slack longer. It does not unlock: a receive loop that
// changed its thread's affinity returns with the thread locked, and the
// runtime then ends the thread instead of reusing it. The error is
// sched_setaffinity's (the caller names the CPU and the line); the goroutine
// stays locked all the same.
func LockThread(cpu int, backoff bool) error {
	runtime.LockOSThread()
	if cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return err
		}
	}
	if backoff {
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // per thread
	}
	return nil
}

// Spinner paces a loop that polls without blocking (a BusyPoll receive loop,
// a spinning consumer): it counts the polls that found nothing and, after
// Polls of them in a row, pauses the loop. A pause sleeps BackoffSleep in the
// kernel with Backoff, for hosts with fewer cores than spinning threads, and
// then yields the goroutine's P with Yield, so that goroutines queued on it
// do not wait for the runtime's 10 ms time slice. A busy loop pays for
// neither: the count restarts with every poll that found work.
type Spinner struct {
	// Polls is how many empty polls in a row make a pause.
	Polls int
	// Backoff pauses with a kernel sleep of BackoffSleep.
	Backoff bool
	// Yield pauses with runtime.Gosched, after any sleep.
	Yield bool

	idle int
}

// Empty counts a poll that found nothing. After Polls of them in a row it
// pauses (see Spinner), restarts the count and returns true.
func (s *Spinner) Empty() bool {
	if s.idle++; s.idle < s.Polls {
		return false
	}
	s.idle = 0
	if s.Backoff {
		_ = unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &backoffSpec, nil)
	}
	if s.Yield {
		runtime.Gosched()
	}
	return true
}

// Busy restarts the count: a poll found work.
func (s *Spinner) Busy() { s.idle = 0 }
