// Package testenv decides what a test does when something it needs (a tool,
// root, a kernel feature) is missing: on a developer's machine it skips and
// says why; where TICKCAST_REQUIRE names the need (CI exports it), it fails,
// so a missing install step cannot pass as a skip.
package testenv

import (
	"os"
	"os/exec"
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
