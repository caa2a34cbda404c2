// The device-removal reproducer. It runs in a fresh process (the VM's init
// starts the test binary with TICKCAST_RDMA_REMOVAL set, after everything
// else that uses rxe0): librdmacm keeps a device context open per device and
// process, and a test process that used rxe0 before would hold it.

//go:build linux && cgo && rdma

package rdma_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/tickcast/tickcast/ud/rdma"
)

// envRemoval names the device and netdev to remove and add again
// ("rxe0,veth0") and makes TestMain run removalRepro instead of the tests.
const envRemoval = "TICKCAST_RDMA_REMOVAL"

// removalRepro opens a receiver and a sender on the device, streams, runs
// rdma link delete while they hold it, and reports on stdout which events
// arrived and how long the removal took; then it adds the device again and
// checks the stream resumes by itself. It returns the exit code.
func removalRepro(spec string) int {
	dev, netdev, ok := strings.Cut(spec, ",")
	if !ok || dev == "" || netdev == "" {
		fmt.Printf("removal: FAIL: %s=%q, want DEVICE,NETDEV\n", envRemoval, spec)
		return 1
	}
	a, err := netip.ParseAddr(os.Getenv(envIface))
	if err != nil {
		fmt.Printf("removal: FAIL: %s: %v\n", envIface, err)
		return 1
	}
	say := func(f string, args ...any) { fmt.Printf("removal: "+f+"\n", args...) }
	g := netip.MustParseAddr("239.192.8.1")
	r, err := rdma.NewReceiver(rdma.Config{Group: g, Interface: a, RingSlots: 256})
	if err != nil {
		say("FAIL: NewReceiver: %v", err)
		return 1
	}
	defer r.Close()
	s, err := rdma.NewSender(rdma.Config{Group: g, Interface: a})
	if err != nil {
		say("FAIL: NewSender: %v", err)
		return 1
	}
	defer s.Close()
	var next, got, lost uint64
	last := int64(-1)
	stream := func(n int) {
		for i := 0; i < n; i++ {
			s.Send([][]byte{payload(next, 32)})
			next++
			time.Sleep(time.Millisecond)
			k := 0
			for sl := r.Peek(k); sl != nil; sl = r.Peek(k) {
				seq := int64(be64(sl.Data()))
				if seq > last {
					lost += uint64(seq - last - 1)
					last = seq
					got++
				}
				if !bytes.Equal(sl.Data(), payload(uint64(seq), 32)) {
					say("FAIL: datagram %d corrupt", seq)
				}
				k++
			}
			r.Release(k)
		}
	}
	stream(100)
	say("before: %d sent, %d received", next, got)

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
			say("receiver at %v: events %v, down %v, rebuilds %d", time.Since(t0).Round(time.Millisecond), named(h.Events), h.Down, h.Rebuilds)
		}
		if h := s.Health(); h != sh {
			sh = h
			say("sender at %v: events %v, down %v, rebuilds %d", time.Since(t0).Round(time.Millisecond), named(h.Events), h.Down, h.Rebuilds)
		}
	}
	var removal time.Duration
	fdsShown := false
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-done:
			removal = time.Since(t0)
			say("rdma link delete %s returned after %v (%v) %s", dev, removal.Round(time.Millisecond), err, bytes.TrimSpace(out.Bytes()))
			break wait
		case <-tick.C:
			report()
			s.Send([][]byte{payload(next, 32)}) // the sender notices at its next Send too
			next++
			if !fdsShown && rh.Down && sh.Down {
				// Both ends released their objects: what still
				// holds the device?
				fdsShown = true
				say("after both ends tore down, this process holds: %s", verbsFDs())
			}
			if time.Since(t0) > 20*time.Second {
				say("FAIL: rdma link delete %s still blocked after 20s: something holds the device", dev)
				return 1
			}
		}
	}
	report()
	add := exec.Command("rdma", "link", "add", dev, "type", "rxe", "netdev", netdev)
	if o, err := add.CombinedOutput(); err != nil {
		say("FAIL: rdma link add: %v %s", err, o)
		return 1
	}
	tAdd := time.Now()
	for time.Since(tAdd) < 30*time.Second {
		stream(10)
		report()
		if rh.Rebuilds >= 1 && !rh.Down && sh.Rebuilds >= 1 && !sh.Down && last >= 0 && uint64(last) > next-20 {
			break
		}
	}
	first := time.Since(tAdd)
	stream(100)
	report()
	say("after re-add: rebuilt and receiving after %v from rdma link add; sent %d = received %d + lost %d + %d in flight",
		first.Round(time.Millisecond), next, got, lost, next-uint64(last)-1)
	if rh.Rebuilds < 1 || sh.Rebuilds < 1 || uint64(last) < next-20 {
		say("FAIL: the stream did not resume")
		return 1
	}
	if removal > 5*time.Second {
		say("FAIL: removal took %v, more than 5s", removal.Round(time.Millisecond))
		return 1
	}
	say("PASS: removal %v, recovery %v", removal.Round(time.Millisecond), first.Round(time.Millisecond))
	return 0
}

func be64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
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

// verbsFDs lists the process's open fds that lead to an RDMA device (the
// uverbs character device, its async event files).
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
