package testenv

import (
	"fmt"
	"runtime"
	"testing"
)

// Allocs runs round once to warm up, then rounds more times with GOMAXPROCS
// set to 1 (as testing.AllocsPerRun does), and returns the heap allocations
// the measured rounds made in all, in every goroutine of the process.
// Unlike testing.AllocsPerRun it neither averages nor rounds down, so a
// single allocation in any round counts.
//
// A garbage collection comes first, so that one set off by what the test
// allocated before does not fall into the measured rounds.
func Allocs(rounds int, round func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.GC()
	round()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		round()
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// allocAttempts is how many times NoAllocs measures before it fails.
const allocAttempts = 3

// NoAllocs fails t unless rounds runs of round allocate nothing at all (see
// Allocs). Each run of round handles perRound items (messages, datagrams,
// calls), called what in the failure message: a hot path that allocates
// once every few items shows as many allocations per round, rather than
// being rounded down to zero as one item per round would be.
//
// The runtime grows its own structures once in a while, whatever code runs:
// when a goroutine stays in a system call, it starts another thread, and
// each new thread is a few allocations that stay with the process. Such
// growth happens once, while an allocation of the code measured happens in
// every measurement; so NoAllocs measures up to three times and passes on
// the first measurement that counts none.
func NoAllocs(t testing.TB, what string, rounds, perRound int, round func()) {
	t.Helper()
	var counts []string
	for range allocAttempts {
		n := Allocs(rounds, round)
		if n == 0 {
			if len(counts) > 0 {
				t.Logf("%s: no allocations after earlier measurements of %v", what, counts)
			}
			return
		}
		counts = append(counts, fmt.Sprintf("%d (%.2f per round, %.4f per item)",
			n, float64(n)/float64(rounds), float64(n)/float64(rounds*perRound)))
	}
	t.Errorf("%s: allocations in each of %d measurements of %d rounds of %d: %v, want 0",
		what, allocAttempts, rounds, perRound, counts)
}
