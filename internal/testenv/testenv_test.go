package testenv

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestRequired(t *testing.T) {
	t.Setenv("TICKCAST_REQUIRE", "root, tshark,qemu")
	for need, want := range map[string]bool{"root": true, "tshark": true, "qemu": true, "prometheus": false, "": false} {
		if got := Required(need); got != want {
			t.Errorf("Required(%q) = %v, want %v", need, got, want)
		}
	}
	t.Setenv("TICKCAST_REQUIRE", "")
	if Required("root") {
		t.Error("empty TICKCAST_REQUIRE requires root")
	}
}

var sink []byte

// TestAllocs: an allocation every fifth item is counted exactly, not
// averaged away, and a round that allocates nothing counts zero.
func TestAllocs(t *testing.T) {
	i := 0
	every5th := func() {
		for range 100 {
			if i++; i%5 == 0 {
				sink = make([]byte, 8)
			}
		}
	}
	if n := Allocs(10, every5th); n != 10*20 {
		t.Errorf("Allocs = %d for 10 rounds of 20 allocations, want 200", n)
	}
	// One item per round, allocating every fifth: AllocsPerRun would
	// report 0 (200 allocations / 1000 rounds, rounded down).
	one := func() {
		if i++; i%5 == 0 {
			sink = make([]byte, 8)
		}
	}
	if n := Allocs(1000, one); n != 200 {
		t.Errorf("Allocs = %d for 1000 rounds of one item, allocating every fifth, want 200", n)
	}
	sum := 0
	if n := Allocs(10, func() {
		for k := range 100 {
			sum += k
		}
	}); n != 0 {
		t.Errorf("Allocs = %d for a loop that allocates nothing", n)
	}
}

// recordTB records what NoAllocs reports instead of failing the test.
type recordTB struct {
	testing.TB
	errors []string
}

func (r *recordTB) Helper()                      {}
func (r *recordTB) Logf(format string, a ...any) {}
func (r *recordTB) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}

// TestNoAllocs: an allocation in every measurement fails; a one-off
// allocation in the first measurement only does not.
func TestNoAllocs(t *testing.T) {
	i := 0
	rec := &recordTB{TB: t}
	NoAllocs(rec, "item", 10, 100, func() {
		for range 100 {
			if i++; i%5 == 0 {
				sink = make([]byte, 8)
			}
		}
	})
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "200 (20.00 per round, 0.2000 per item)") {
		t.Errorf("an allocation every fifth item reported as %q", rec.errors)
	}
	// The fifth call is a measured round of the first measurement (the
	// first call warms up).
	calls := 0
	rec = &recordTB{TB: t}
	NoAllocs(rec, "item", 10, 100, func() {
		if calls++; calls == 5 {
			sink = make([]byte, 8)
		}
	})
	if calls != 2*11 || len(rec.errors) != 0 {
		t.Errorf("one allocation, once, in %d calls, reported as %q", calls, rec.errors)
	}
}

func TestMulticastGroups(t *testing.T) {
	g := MulticastGroups(t, 77, 78)
	if len(g) != 2 {
		t.Fatalf("%d groups, want 2", len(g))
	}
	for i, p := range []byte{77, 78} {
		a := g[i].Addr().As4()
		if !g[i].Addr().IsMulticast() || a[0] != 239 || a[1] != p || a[3] == 0 || g[i].Port() == 0 {
			t.Errorf("group %d: %v, want 239.%d.x.y (y > 0) on a port", i, g[i], p)
		}
	}
	a, b := g[0].Addr().As4(), g[1].Addr().As4()
	if a[2] != b[2] || a[3] != b[3] || g[0].Port() != g[1].Port() {
		t.Errorf("%v and %v differ beyond the prefix", g[0], g[1])
	}
}

func TestFreePorts(t *testing.T) {
	ports := FreePorts(t, 5)
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: want 5 distinct positive ports", ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
	if a := FreeAddr(t); !strings.HasPrefix(a, "127.0.0.1:") {
		t.Errorf("FreeAddr %q", a)
	}
}
