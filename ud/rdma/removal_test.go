// The device-removal reproducer. It runs in a fresh process (the VM's init
// starts the test binary with TICKCAST_RDMA_REMOVAL set, after everything
// else that uses rxe0): librdmacm keeps a device context open per device and
// process, and a process that used rxe0 before would hold it.

//go:build linux && cgo && rdma

package rdma_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/tickcast/tickcast/ud/rdma"
)

// envRemoval names the device to remove ("rxe0") and makes TestMain run
// removalRepro instead of the tests.
const envRemoval = "TICKCAST_RDMA_REMOVAL"

// removalRepro opens a receiver and a sender on the device, checks a
// stream flows, runs rdma link delete while they hold the device, and
// reports on stdout which events arrived, when, which fds of the process
// lead to the device, and whether the removal completed within 10 s. It
// fails (exit 1) unless both ends observed RDMA_CM_EVENT_DEVICE_REMOVAL.
// The removal, if it is still blocked, completes when the process exits;
// the VM's init then adds the device again.
func removalRepro(dev string) int {
	say := func(f string, args ...any) { fmt.Printf("removal: "+f+"\n", args...) }
	a, err := netip.ParseAddr(os.Getenv(envIface))
	if err != nil {
		say("FAIL: %s: %v", envIface, err)
		return 1
	}
	g := netip.MustParseAddr("239.192.8.1")
	r, err := rdma.NewReceiver(rdma.Config{Group: g, Interface: a, RingSlots: 256})
	if err != nil {
		say("FAIL: NewReceiver: %v", err)
		return 1
	}
	s, err := rdma.NewSender(rdma.Config{Group: g, Interface: a})
	if err != nil {
		say("FAIL: NewSender: %v", err)
		return 1
	}
	got := 0
	for seq := uint64(0); seq < 100; seq++ {
		s.Send([][]byte{payload(seq, 32)})
		time.Sleep(time.Millisecond)
		for sl := r.Peek(0); sl != nil; sl = r.Peek(0) {
			if binary.BigEndian.Uint64(sl.Data()) == uint64(got) {
				got++
			}
			r.Release(1)
		}
	}
	say("before: 100 sent, %d received in order", got)
	say("fds on the device before: %s", verbsFDs())

	cmd := exec.Command("rdma", "link", "delete", dev)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		say("FAIL: rdma link delete: %v", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var rh, sh rdma.Health
	report := func() {
		if h := r.Health(); h != rh {
			rh = h
			say("receiver at %v: events %v", time.Since(t0).Round(time.Millisecond), named(h.Events))
		}
		if h := s.Health(); h != sh {
			sh = h
			say("sender at %v: events %v", time.Since(t0).Round(time.Millisecond), named(h.Events))
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	completed := false
wait:
	for {
		select {
		case err := <-done:
			completed = true
			say("rdma link delete %s returned after %v (%v) %s", dev, time.Since(t0).Round(time.Millisecond), err,
				bytes.TrimSpace(out.Bytes()))
			break wait
		case <-tick.C:
			report()
			if time.Since(t0) > 10*time.Second {
				say("rdma link delete %s still blocked after 10s; the process holds: %s", dev, verbsFDs())
				break wait
			}
		}
	}
	report()
	ok := rh.Events[rdma.EventDeviceRemoval] == 1 && sh.Events[rdma.EventDeviceRemoval] == 1
	say("removal completed while the process lives: %v; DEVICE_REMOVAL observed by receiver %d, sender %d",
		completed, rh.Events[rdma.EventDeviceRemoval], sh.Events[rdma.EventDeviceRemoval])
	if !ok {
		say("FAIL: want one RDMA_CM_EVENT_DEVICE_REMOVAL at each end")
		return 1
	}
	say("PASS: the removal event reached both ends")
	return 0
}

// verbsFDs lists the process's open fds that lead to an RDMA device (the
// uverbs character device, its async event files, the rdma_cm device).
func verbsFDs() string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (strings.Contains(l, "infiniband") || strings.Contains(l, "uverbs") || strings.Contains(l, "rdma")) {
			out = append(out, "fd "+e.Name()+" -> "+l)
		}
	}
	if len(out) == 0 {
		return "no fd on an RDMA device"
	}
	return strings.Join(out, ", ")
}

func named(e rdma.EventCounts) map[string]uint64 {
	m := map[string]uint64{}
	for i, n := range e {
		if n > 0 {
			m[rdma.Event(i).String()] = n
		}
	}
	return m
}
