package ud

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSpinnerPausesAfterARunOfEmptyPolls(t *testing.T) {
	s := Spinner{Polls: 3, Yield: true}
	var got []bool
	for range 7 {
		got = append(got, s.Empty())
	}
	want := []bool{false, false, true, false, false, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Empty() results %v, want %v", got, want)
		}
	}
	// A poll that found work restarts the run.
	s = Spinner{Polls: 2}
	s.Empty()
	s.Busy()
	if s.Empty() {
		t.Fatal("paused after one empty poll since Busy")
	}
	if !s.Empty() {
		t.Fatal("no pause after two empty polls in a row")
	}
}

func TestLockThread(t *testing.T) {
	type result struct {
		err    error
		cpus   int
		has0   bool
		getErr error
	}
	run := func(cpu int) result {
		ch := make(chan result)
		go func() {
			// The goroutine ends locked: the runtime ends its thread.
			var r result
			r.err = LockThread(cpu, true)
			var set unix.CPUSet
			r.getErr = unix.SchedGetaffinity(0, &set)
			r.cpus, r.has0 = set.Count(), set.IsSet(0)
			ch <- r
		}()
		return <-ch
	}
	if r := run(0); r.err != nil || r.getErr != nil || r.cpus != 1 || !r.has0 {
		t.Fatalf("LockThread(0): %+v, want the thread on CPU 0 alone", r)
	}
	if runtime.NumCPU() > 1 {
		if r := run(-1); r.err != nil || r.cpus < 2 {
			t.Fatalf("LockThread(-1): %+v, want the thread's affinity left alone", r)
		}
	}
	// A CPU the host does not have is refused.
	if r := run(1023); !errors.Is(r.err, unix.EINVAL) {
		t.Fatalf("LockThread(1023): %v, want EINVAL", r.err)
	}
}
