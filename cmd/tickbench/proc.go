package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stderrTail is how many of a child's last stderr lines are kept for error
// messages.
const stderrTail = 20

// stampedLine is a line a child wrote to stdout and when it was read. The
// stamp is what lets two processes' summaries be placed on one time line.
type stampedLine struct {
	text string
	at   time.Time
}

// proc is a started child process. Its stdout lines are collected with the
// time each was read; its stderr is watched for a readiness line and its
// tail kept for error messages.
type proc struct {
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	ready  chan struct{} // closed when stderr shows the readiness line
	done   chan struct{} // closed when the output is read and the process waited for

	mu        sync.Mutex
	readyLine string // the stderr line that held the readiness mark
	stdout    []stampedLine
	stderr    []string
	waitErr   error // set before done is closed
}

// startProc starts exe (program and leading arguments) with args. The child
// is killed when timeout passes or ctx is done. If readyMark is not empty,
// the first stderr line containing it closes p.ready.
func startProc(ctx context.Context, name string, timeout time.Duration, exe, args []string, readyMark string) (*proc, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cmd := exec.CommandContext(cctx, exe[0], append(exe[1:len(exe):len(exe)], args...)...)
	// Bound the wait for the output pipes after a kill, should the child
	// have passed them on.
	cmd.WaitDelay = 2 * time.Second
	// The binaries read TICKCAST_* variables (and a config file named by
	// one) beneath their flags: drop them so that the caller's environment
	// cannot change what is measured.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TICKCAST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := stampedLine{text: sc.Text(), at: time.Now()}
			p.mu.Lock()
			p.stdout = append(p.stdout, l)
			p.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if !seen && readyMark != "" && strings.Contains(line, readyMark) {
				seen = true
				p.readyLine = line
				close(p.ready)
			}
			if p.stderr = append(p.stderr, line); len(p.stderr) > stderrTail {
				p.stderr = p.stderr[1:]
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		// Wait only after both pipes are read to the end, as os/exec
		// requires.
		wg.Wait()
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// waitReady waits for the readiness line.
func (p *proc) waitReady(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		select {
		case <-p.ready: // ready, then exited at once: not this call's concern
			return nil
		default:
		}
		return p.failure("exited before it was ready")
	case <-t.C:
		return p.failure(fmt.Sprintf("not ready after %v", timeout))
	}
}

// summary waits for the process to exit and decodes its last stdout line
// that holds a JSON object into v, returning when that line was read. A
// non-zero exit status is not an error when the summary is there: the
// subscriber, for one, exits 1 after a loss, which is a result to report.
func (p *proc) summary(v any) (time.Time, error) {
	<-p.done
	p.mu.Lock()
	lines := p.stdout
	p.mu.Unlock()
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i].text, "{") {
			if err := json.Unmarshal([]byte(lines[i].text), v); err != nil {
				return time.Time{}, p.failure(fmt.Sprintf("summary %q: %v", lines[i].text, err))
			}
			return lines[i].at, nil
		}
	}
	return time.Time{}, p.failure("no JSON summary on stdout")
}

// failure describes how the process went wrong, with its exit status and
// the tail of its stderr.
func (p *proc) failure(what string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := p.name + ": " + what
	if p.waitErr != nil {
		msg += " (" + p.waitErr.Error() + ")"
		if errors.Is(p.waitErr, context.DeadlineExceeded) || p.cmd.ProcessState != nil && !p.cmd.ProcessState.Exited() {
			msg += ", killed at its time limit or on interrupt"
		}
	}
	if len(p.stderr) > 0 {
		msg += "; stderr:\n  " + strings.Join(p.stderr, "\n  ")
	}
	return errors.New(msg)
}

// cpuSeconds returns the user and system CPU time the exited process used.
// On loopback the sender's system time includes delivering each datagram to
// the receiving sockets, which the kernel does in the sending call.
func (p *proc) cpuSeconds() float64 {
	<-p.done
	if p.cmd.ProcessState == nil {
		return 0
	}
	return (p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()).Seconds()
}

// readyText returns what follows the readiness mark on its line (the
// address a server role listens on, for one).
func (p *proc) readyText(mark string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, after, _ := strings.Cut(p.readyLine, mark)
	return strings.TrimSpace(after)
}

// terminate asks the process to end (SIGTERM), as the server roles expect
// when the run is over; kill remains the backstop.
func (p *proc) terminate() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// kill ends the process if it still runs and releases its timer. It is
// safe to call after the process exited.
func (p *proc) kill() {
	p.cancel()
	<-p.done
}

// freshGroup returns a multicast group in 239.<second>.0.0/16 with room for
// span consecutive addresses (channels) inside that /16, and a UDP port no
// socket on 127.0.0.1 uses right now. Every run gets its own, so a run never
// hears a previous one's late datagrams (nor other people's tests).
func freshGroup(second byte, span int) (netip.Addr, int, error) {
	if second < 77 || second > 79 || span < 1 || span > 50 {
		return netip.Addr{}, 0, fmt.Errorf("group 239.%d/16 with %d addresses: outside what tickbench may use", second, span)
	}
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return netip.Addr{}, 0, err
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	x, y := byte(rand.IntN(250)), byte(1+rand.IntN(254-span))
	return netip.AddrFrom4([4]byte{239, second, x, y}), port, nil
}

// startReady starts a process that says on stderr when it is ready (a
// receiver, an echo, a server) and waits up to wait for that. On success
// the caller ends the process; on an error it is killed already.
func startReady(ctx context.Context, name string, timeout time.Duration, exe, args []string, readyMark string, wait time.Duration) (*proc, error) {
	p, err := startProc(ctx, name, timeout, exe, args, readyMark)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(wait); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// runToEnd runs a process that sends and then exits (a sender, a pinger,
// the feed handler) and decodes its summary line into v. It returns the
// exited process, for its CPU time and failure, and when the summary line
// was read.
func runToEnd(ctx context.Context, name string, timeout time.Duration, exe, args []string, v any) (*proc, time.Time, error) {
	p, err := startProc(ctx, name, timeout, exe, args, "")
	if err != nil {
		return nil, time.Time{}, err
	}
	defer p.kill()
	at, err := p.summary(v)
	return p, at, err
}
