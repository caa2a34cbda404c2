package shm

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// helperEnv names the ring directory to TestHelperReader in a subprocess.
const helperEnv = "TICKCAST_SHM_HELPER_DIR"

// TestHelperReader is not a test: run by TestReaderKilled as a subprocess
// of the test binary, it follows the ring in Blocking mode, says "ready"
// once it has a packet, and reads until it is killed.
func TestHelperReader(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("the reader subprocess of TestReaderKilled")
	}
	r, err := NewReceiver(testConfig(dir, Blocking))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	said := false
	for {
		_ = r.Wait(time.Second)
		for r.Peek(0) != nil {
			checkPacket(t, r.Peek(0).Data())
			r.Release(1)
			if !said {
				fmt.Println("ready")
				said = true
			}
		}
	}
}

// TestReaderKilled: a reader process killed while it follows the ring (and
// may be copying, or asleep as a waiter) does not stop or slow the writer,
// and the next reader frees the waiter slot it left and follows the ring.
func TestReaderKilled(t *testing.T) {
	c := testConfig(ringDir(t), Blocking)
	s := newSender(t, c)
	var stop atomic.Bool
	var sent atomic.Uint64
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, c.MaxDatagram)
		b := make([][]byte, 1)
		for i := uint64(0); !stop.Load(); i++ {
			b[0] = packet(buf, "SESSION001", i, len(buf))
			if err := s.Send(b); err != nil {
				done <- err
				return
			}
			sent.Store(i + 1)
			if i%64 == 0 {
				time.Sleep(100 * time.Microsecond) // let readers go to sleep now and then
			}
		}
		done <- nil
	}()
	defer func() {
		stop.Store(true)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReader$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+c.Dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
		for sc.Scan() {
		}
	}()
	select {
	case l := <-line:
		if l != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("reader subprocess: %q", l)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the reader subprocess never got a packet")
	}
	pid := cmd.Process.Pid
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // reaped: the pid is gone
	info, err := Inspect(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	if info.Waiters != 1 {
		t.Fatalf("the killed reader (pid %d) left %d waiter slots, want 1: %+v", pid, info.Waiters, info)
	}
	before := sent.Load()
	// The writer goes on; a new reader frees the dead one's slot and follows.
	r := newReceiver(t, c)
	if info, _ = Inspect(c.Path()); info.Waiters != 1 {
		t.Errorf("after a new reader mapped the ring: %d waiter slots held, want 1 (its own)", info.Waiters)
	}
	// In order; any packet skipped must be one counted lapped (a loaded
	// host may stall the reader a ring's worth).
	var next, gaps uint64
	first := true
	take(t, r, 20*time.Second, func(p []byte) bool {
		_, i := checkPacket(t, p)
		if !first {
			if i < next {
				t.Fatalf("packet %d after %d", i, next-1)
			}
			gaps += i - next
		}
		first, next = false, i+1
		return next < before+5000
	})
	if st := r.Stats(); st.KernelDrops != gaps {
		t.Errorf("stats %+v: %d packets skipped", st, gaps)
	}
}
