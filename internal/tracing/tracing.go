// Package tracing writes a Go execution trace (runtime/trace) of a
// program's run to a file: the programs' --trace flag, for finding where a
// stall came from (go tool trace FILE; docs/bench.md, "Where the tail comes
// from").
package tracing

import (
	"fmt"
	"os"
	"runtime/trace"
)

// Start starts tracing to path and returns the function that stops it and
// closes the file. An empty path traces nothing; stop is then a no-op.
func Start(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}
