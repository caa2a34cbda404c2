// Package testenv decides what a test does when something it needs (a tool,
// root, a kernel feature) is missing: on a developer's machine it skips and
// says why; where TICKCAST_REQUIRE names the need (CI exports it), it fails,
// so a missing install step cannot pass as a skip.
package testenv

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Required reports whether TICKCAST_REQUIRE (a comma-separated list such as
// "root,tshark") names need.
func Required(need string) bool {
	for _, n := range strings.Split(os.Getenv("TICKCAST_REQUIRE"), ",") {
		if strings.TrimSpace(n) == need {
			return true
		}
	}
	return false
}

// Need skips the test with the reason when ok is false, or fails it if need
// is required.
func Need(t testing.TB, need string, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if Required(need) {
		t.Fatalf("TICKCAST_REQUIRE includes %q but %s", need, reason)
	}
	t.Skipf("skipped: %s (set TICKCAST_REQUIRE=%s to make this a failure)", reason, need)
}

// NeedTool looks up an executable on PATH and returns its path, skipping or
// failing the test as Need does when it is missing.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	Need(t, name, err == nil, name+" is not installed")
	return p
}

// NeedRoot skips or fails the test unless it runs as root.
func NeedRoot(t testing.TB) {
	t.Helper()
	Need(t, "root", os.Geteuid() == 0, "the test needs root")
}

// MulticastGroups returns one channel-0 group base per prefix, 239.P.x.y with
// the same random x and y in each, all on one free port: different on each
// call, so that tests do not hear each other. A test keeps to its own
// prefixes (the root package's tests use 77 and 78 for lines A and B, its
// benchmarks 79). Multicast stays on loopback: the port is taken from a
// 127.0.0.1 socket.
func MulticastGroups(t testing.TB, prefixes ...byte) []netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(c.LocalAddr().(*net.UDPAddr).Port)
	c.Close()
	x, y := byte(rand.IntN(200)), byte(1+rand.IntN(200))
	out := make([]netip.AddrPort, len(prefixes))
	for i, p := range prefixes {
		out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, p, x, y}), port)
	}
	return out
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that nothing listens
// on right now (each was bound, and all are released together). Another
// process may take one before the caller binds it; tests accept that small
// chance.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// FreeAddr returns "127.0.0.1:PORT" for a TCP port nothing listens on right
// now (see FreePorts).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(FreePorts(t, 1)[0])
}
