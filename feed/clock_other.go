//go:build !amd64

package feed

// rdtsc is never called where the counter is not used (tscUsable).
func rdtsc() uint64 { return 0 }

// tscUsable: only amd64's counter is read.
func tscUsable() bool { return false }
