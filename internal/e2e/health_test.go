package e2e

import (
	"context"
	"github.com/tickcast/tickcast/internal/testenv"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// healthCheck runs bin --health url and returns its exit code and output.
func healthCheck(t *testing.T, bin, url string) (int, string) {
	t.Helper()
	out, err := exec.Command(bin, "--health", url).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("%s --health %s: %v", bin, url, err)
	}
	return 0, string(out)
}

// TestHealthChecks runs each program's --health against a running
// instance: both healthy while the feed flows; the subscriber unhealthy
// (its channels stale) while the feed handler is stopped, and healthy again
// after; the feed handler unhealthy once its NATS server is gone; and an
// address nobody serves is unhealthy, not an error of the check itself.
func TestHealthChecks(t *testing.T) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fhAddr, subAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	fh := start(t, ctx, feedhandlerBin, "--group", ga, "--rate", "2000", "--count", "0", "--metrics-addr", fhAddr)
	fh.waitLog(t, `"publishing"`, 10*time.Second)
	sub := start(t, ctx, subscriberBin, "--group", ga, "--metrics-addr", subAddr, "--idle-timeout", "30s")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fhURL, subURL := "http://"+fhAddr+"/healthz", "http://"+subAddr+"/healthz"

	until := func(what, bin, url string, wantCode int, wantText string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, out := healthCheck(t, bin, url)
			if code == wantCode && strings.Contains(out, wantText) {
				t.Logf("%s: exit %d: %s", what, code, strings.TrimSpace(out))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: exit %d, %q; want exit %d saying %q", what, code, out, wantCode, wantText)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	until("feed handler publishing", feedhandlerBin, fhURL, 0, "healthy")
	until("subscriber receiving", subscriberBin, subURL, 0, "healthy")

	// The feed handler stopped: the subscriber's channels go stale.
	fh.cmd.Process.Signal(syscall.SIGSTOP)
	until("subscriber of a stopped feed", subscriberBin, subURL, 1, "stale")
	fh.cmd.Process.Signal(syscall.SIGCONT)
	until("subscriber after the feed is back", subscriberBin, subURL, 0, "healthy")

	code, out := healthCheck(t, feedhandlerBin, "http://"+testenv.FreeAddr(t)+"/healthz")
	if code != 1 || !strings.Contains(out, "not answering") {
		t.Fatalf("--health of an address nobody serves: exit %d, %q; want 1, not answering", code, out)
	}
	if code, out := healthCheck(t, feedhandlerBin, "127.0.0.1:9464"); code != 1 || !strings.Contains(out, "want the URL") {
		t.Fatalf("--health without a URL: exit %d, %q; want 1 saying what it wants", code, out)
	}

	// The subscriber ends (interrupted); the feed handler ends its session:
	// a stopped program answers nothing, which is unhealthy.
	sub.cmd.Process.Signal(syscall.SIGINT)
	sub.wait(t, 10*time.Second)
	until("stopped subscriber", subscriberBin, subURL, 1, "not answering")
	fh.cmd.Process.Signal(syscall.SIGTERM)
	fh.wait(t, 15*time.Second)
	until("stopped feed handler", feedhandlerBin, fhURL, 1, "not answering")
}
