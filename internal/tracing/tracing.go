// Package tracing writes what the programs' --trace and --cpuprofile flags
// ask for: a Go execution trace (runtime/trace) of the run, for finding
// where a stall came from (go tool trace FILE; docs/bench.md, "Where the
// tail comes from"), and a CPU profile (runtime/pprof), for finding where
// the time per packet goes (go tool pprof FILE; docs/bench.md, "Where the
// time per packet goes").
package tracing

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// Start starts tracing to path and returns the function that stops it and
// closes the file. An empty path traces nothing; stop is then a no-op.
func Start(path string) (stop func() error, err error) {
	return toFile("trace", path, trace.Start, trace.Stop)
}

// StartCPU starts CPU profiling to path and returns the function that
// stops it and closes the file. An empty path profiles nothing; stop is
// then a no-op.
func StartCPU(path string) (stop func() error, err error) {
	return toFile("cpuprofile", path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// toFile creates path, starts writing to it with begin, and returns the
// function that ends it and closes the file; errors start with what (the
// flag). An empty path does nothing.
func toFile(what, path string, begin func(io.Writer) error, end func()) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := begin(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return func() error {
		end()
		return f.Close()
	}, nil
}

// StartBoth starts what Start and StartCPU start, and returns the function
// that stops both. An error names the flag (trace or cpuprofile) whose file
// could not be written, and nothing is left running.
func StartBoth(tracePath, cpuPath string) (stop func() error, err error) {
	stopTrace, err := Start(tracePath)
	if err != nil {
		return nil, err
	}
	stopCPU, err := StartCPU(cpuPath)
	if err != nil {
		stopTrace()
		if tracePath != "" {
			os.Remove(tracePath)
		}
		return nil, err
	}
	return func() error { return errors.Join(stopCPU(), stopTrace()) }, nil
}
