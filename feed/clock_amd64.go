package feed

import (
	"bytes"
	"os"
	"sync"
)

// rdtsc reads the CPU's time-stamp counter (clock_amd64.s).
func rdtsc() uint64

// tscUsable says whether the kernel keeps time with the time-stamp
// counter: Linux does only with a counter at a constant rate that agrees
// across CPUs. Read once per process.
var tscUsable = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("tsc"))
})
