package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping of /proc/self/smaps that holds
// addr.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps (%v): cannot see the advice", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 && strings.Contains(line[:strings.IndexByte(line, ' ')], "-") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping of /proc/self/smaps holds %#x", addr)
	return nil
}

// TestAdvise: the whole huge pages inside a large slice are marked for
// huge pages (VmFlags "hg").
func TestAdvise(t *testing.T) {
	big := make([]uint64, 3*Size/8)
	Advise(big)
	start := uintptr(unsafe.Pointer(&big[0]))
	aligned := (start + Size - 1) &^ (Size - 1)
	if flags := vmFlags(t, aligned); !contains(flags, "hg") {
		t.Errorf("the huge page at %#x inside the advised slice has VmFlags %v, want hg among them", aligned, flags)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
