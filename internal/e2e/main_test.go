// Package e2e runs the built feedhandler and subscriber binaries against each
// other on loopback multicast, the way an operator would.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud"
)

// Paths of the binaries TestMain builds.
var feedhandlerBin, subscriberBin, moldreplayBin, tickarchiveBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tickcast-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	feedhandlerBin = filepath.Join(dir, "feedhandler")
	subscriberBin = filepath.Join(dir, "subscriber")
	moldreplayBin = filepath.Join(dir, "moldreplay")
	tickarchiveBin = filepath.Join(dir, "tickarchive")
	for bin, pkg := range map[string]string{feedhandlerBin: "../../cmd/feedhandler", subscriberBin: "../../cmd/subscriber",
		moldreplayBin: "../../cmd/moldreplay", tickarchiveBin: "../../cmd/tickarchive"} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// groups returns an A-line and a B-line group base on a free UDP port, in
// 239.77/16 and 239.78/16, different on each call.
func groups(t *testing.T) (a, b string, port int) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port = c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	x, y := rand.IntN(200), 1+rand.IntN(100)
	return fmt.Sprintf("239.77.%d.%d:%d", x, y, port), fmt.Sprintf("239.78.%d.%d:%d", x, y, port), port
}

// syncBuffer is a buffer that a process's output copier writes while the
// test reads it.
type syncBuffer = testenv.SyncBuffer

// proc is a started binary whose output is captured.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan error
}

// waitLog waits until the process has logged a line containing text.
func (p *proc) waitLog(t *testing.T, text string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stderr.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v\nstderr:\n%s", filepath.Base(p.cmd.Path), text, d, tail(p.stderr.String()))
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited before logging %q: %v\nstderr:\n%s", filepath.Base(p.cmd.Path), text, err, tail(p.stderr.String()))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// natsAddrs holds each test's NATS address: the feed handler's embedded
// server listens there and the test's subscribers connect to it, so tests
// never meet another run's server.
var natsAddrs sync.Map

func natsAddr(t *testing.T) string {
	if a, ok := natsAddrs.Load(t.Name()); ok {
		return a.(string)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	natsAddrs.Store(t.Name(), addr)
	return addr
}

// start runs bin with args. The test's NATS address and a short linger come
// first, so that args can override them.
func start(t *testing.T, ctx context.Context, bin string, args ...string) *proc {
	t.Helper()
	var pre []string
	switch bin {
	case feedhandlerBin:
		pre = []string{"--nats-listen", natsAddr(t), "--linger", "300ms", "--metrics-addr", "127.0.0.1:0"}
	case subscriberBin:
		pre = []string{"--nats-url", "nats://" + natsAddr(t), "--metrics-addr", "127.0.0.1:0"}
	}
	return launch(t, ctx, bin, append(pre, args...)...)
}

// launch runs bin with exactly args (no NATS address or metrics address
// put first, so that the program's defaults apply).
func launch(t *testing.T, ctx context.Context, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.CommandContext(ctx, bin, args...), done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Env = append(os.Environ(), "TICKCAST_LOG_FORMAT=json")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// wait returns the exit code, failing the test if the process does not end
// within d.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not exit within %v\nstderr:\n%s", filepath.Base(p.cmd.Path), d, tail(p.stderr.String()))
	}
	return p.cmd.ProcessState.ExitCode()
}

// summary decodes the last line of stdout as JSON.
func (p *proc) summary(t *testing.T) map[string]any {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(p.stdout.Bytes()), []byte("\n"))
	var m map[string]any
	if err := json.Unmarshal(lines[len(lines)-1], &m); err != nil {
		t.Fatalf("summary line %q: %v\nstderr:\n%s", lines[len(lines)-1], err, tail(p.stderr.String()))
	}
	return m
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

// eachMode runs f once per subscriber receive mode (--mode), as subtests:
// the end-to-end, recovery and fault tests hold for every way datagrams can
// reach the handler. With -short (the race detector's run) only the
// default mode and blocking run.
func eachMode(t *testing.T, f func(t *testing.T, mode string)) {
	for _, m := range ud.Modes {
		if testing.Short() && m != ud.Blocking && m != ud.Direct {
			continue
		}
		t.Run(m.String(), func(t *testing.T) { f(t, m.String()) })
	}
}
