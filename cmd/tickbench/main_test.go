package main

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary play the floor's roles: runFloor starts
// os.Executable() with "--role ...", which here is this test binary, so the
// test exercises the same two-process path as the command.
func TestMain(m *testing.M) {
	if role, ok := roleOf(os.Args[1:]); ok {
		os.Exit(runRole(role, os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestFloor runs the raw floor with a small count and checks that the
// receiver counted the datagrams and the result is filled in. It asserts no
// speed: on a shared machine any rate is possible.
func TestFloor(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const count, size = 20_000, 1400
	r, err := runFloor(ctx, floorConfig{Exe: []string{exe}, Count: count, Size: size, Batch: 16, Timeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Sent != count {
		t.Errorf("sent %d datagrams, want %d", r.Sent, count)
	}
	// 20,000 datagrams of 1400 bytes fit the receive buffer the floor asks
	// for, so loopback loses none unless the kernel refused the buffer;
	// either way most must arrive.
	if r.Received < count/2 || r.Received > count {
		t.Errorf("received %d of %d datagrams", r.Received, count)
	}
	if r.Lost != r.Sent-r.Received {
		t.Errorf("lost %d, want sent-received = %d", r.Lost, r.Sent-r.Received)
	}
	if r.Size != size || r.Bytes != r.Received*size || r.Truncated != 0 {
		t.Errorf("size %d, bytes %d, truncated %d: want %d-byte datagrams, none truncated", r.Size, r.Bytes, r.Truncated, size)
	}
	if !r.EndMarker {
		t.Error("the receiver stopped on its idle timeout, not on the end marker")
	}
	g, err := netip.ParseAddrPort(r.Group)
	if err != nil || !allowedGroup(g.Addr()) {
		t.Errorf("group %q outside 239.77.0.0/16-239.79.0.0/16", r.Group)
	}
	if r.WindowS <= 0 || r.SendS <= 0 || r.DgramsPerS <= 0 || r.BytesPerS <= 0 {
		t.Errorf("window %v s, send %v s, %v datagrams/s, %v bytes/s: want all positive", r.WindowS, r.SendS, r.DgramsPerS, r.BytesPerS)
	}
	if r.SendCalls < count/16 || r.RecvCalls == 0 || r.RcvBuf == 0 {
		t.Errorf("send calls %d (want at least %d), receive calls %d, rcvbuf %d", r.SendCalls, count/16, r.RecvCalls, r.RcvBuf)
	}
	if r.SendCPUS <= 0 || r.CPUPerDgramUs <= 0 {
		t.Errorf("sender CPU %v s, %v µs/datagram: want positive", r.SendCPUS, r.CPUPerDgramUs)
	}
}

// TestRoleRejectsOtherGroups checks that the floor roles refuse any group
// outside the ranges this command may use.
func TestRoleRejectsOtherGroups(t *testing.T) {
	for _, g := range []string{"239.1.2.3", "224.0.0.1", "127.0.0.1", "239.80.0.1", "10.1.2.3"} {
		for _, role := range []string{"raw-send", "raw-recv"} {
			args := []string{"--role", role, "--group", g, "--port", "40000", "--size", "100", "--count", "1"}
			if role == "raw-recv" {
				args = args[:len(args)-2]
			}
			if code := runRole(role, args, os.Stdout, devNull(t)); code == 0 {
				t.Errorf("%s accepted group %s", role, g)
			}
		}
	}
}

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestSummarize(t *testing.T) {
	st := summarize([]float64{3, 1, 2, 10})
	if st.Median != 2.5 || st.Min != 1 || st.Max != 10 || st.N != 4 || st.SpreadPct != 360 {
		t.Errorf("summarize(3 1 2 10) = %+v", st)
	}
	if st := summarize([]float64{4, 2, 3}); st.Median != 3 || st.SpreadPct != 100*2.0/3 {
		t.Errorf("summarize(4 2 3) = %+v", st)
	}
	if got := thousands(1234567.4); got != "1,234,567" {
		t.Errorf("thousands = %q", got)
	}
}

func TestRoleOf(t *testing.T) {
	for _, c := range []struct {
		args []string
		role string
		ok   bool
	}{
		{[]string{"--role", "raw-send", "--count", "1"}, "raw-send", true},
		{[]string{"-role=raw-recv"}, "raw-recv", true},
		{[]string{"--count", "5"}, "", false},
		{nil, "", false},
	} {
		if role, ok := roleOf(c.args); role != c.role || ok != c.ok {
			t.Errorf("roleOf(%q) = %q, %v", c.args, role, ok)
		}
	}
}
