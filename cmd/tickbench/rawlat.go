package main

// The raw floor of the latency mode: a paced sender and a receiver process
// that use nothing but system calls (and the pacer the feed handler uses).
// The sender sends one datagram per tick, round robin over the channels'
// groups, each stamped with the wall clock just before the send; the
// receiver reads every group's socket, and records now - stamp per datagram
// in an HDR histogram. The receiver comes in tickcast's two receive classes:
// blocking (one goroutine waiting in epoll_wait on all sockets, then
// recvmmsg) and busy-poll (one locked thread polling the non-blocking
// sockets in turn).

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/internal/hgrm"
	"github.com/tickcast/tickcast/pace"
)

// latMarkerDelays are the pauses before each copy of a latency run's end
// markers: shorter than the throughput floor's, as a paced run never fills
// the receive queue.
var latMarkerDelays = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// latSendReport is the paced sender's JSON line (raw and NATS alike).
type latSendReport struct {
	Sent    uint64 `json:"sent"`
	Retries uint64 `json:"retries"`  // sends repeated after EAGAIN, ENOBUFS or EINTR
	StartNs int64  `json:"start_ns"` // wall clock at the first send
	EndNs   int64  `json:"end_ns"`   // wall clock after the last data send
	// LateP99Us and LateMaxUs are how late the sends were against the
	// pacer's schedule: a sender that cannot keep the rate shows here.
	LateP99Us float64 `json:"late_p99_us"`
	LateMaxUs float64 `json:"late_max_us"`
}

// latRecvReport is a latency receiver's JSON line (raw and NATS alike).
type latRecvReport struct {
	Received  uint64 `json:"received"`
	Truncated uint64 `json:"truncated"`
	Announced uint64 `json:"announced"` // data messages the end markers say were sent
	Ended     int    `json:"ended"`     // channels whose end marker arrived
	FirstNs   int64  `json:"first_ns"`
	LastNs    int64  `json:"last_ns"`
	Reason    string `json:"reason"` // expect, end-marker, idle-timeout, no-data
	latStats
	// First and Steady split the latencies by receipt time: within
	// hgrm.FirstPhase of the first receipt, and after.
	First  latStats `json:"first_second"`
	Steady latStats `json:"steady"`
}

// pacedSend runs the pacing loop shared by the paced senders: send(i) for
// i in 0..count-1, each when the pacer says it is due (at once when rate is
// 0), on a locked thread. It fills the timing fields of rep.
func pacedSend(rate float64, count uint64, rep *latSendReport, send func(i uint64) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	late := newLatHist()
	p := pace.New(rate, monoNs, 0)
	rep.StartNs = time.Now().UnixNano()
	for i := uint64(0); i < count; i++ {
		now := p.Wait(i)
		if p.Paced() {
			recordLat(late, now-p.Due(i))
		}
		if err := send(i); err != nil {
			return err
		}
		rep.Sent++
	}
	rep.EndNs = time.Now().UnixNano()
	st := statsOf(late)
	rep.LateP99Us, rep.LateMaxUs = st.P99Us, st.MaxUs
	return nil
}

// latSend is the lat-send role: one datagram of --size bytes per tick at
// --rate, round robin over --channels groups, then end markers on each.
func latSend(args []string, stdout io.Writer) error {
	rf := newRoleFlags("lat-send")
	count := rf.fs.Uint64("count", 0, "datagrams to send")
	rate := rf.fs.Float64("rate", 0, "datagrams per second (0: as fast as possible)")
	channels := rf.fs.Int("channels", 1, "groups, the channel's address plus 0..channels-1")
	group, err := rf.parse(args)
	if err != nil {
		return err
	}
	if *channels < 1 || *channels > 32 || *rate < 0 {
		return fmt.Errorf("--channels %d, --rate %v: want 1..32 and not negative", *channels, *rate)
	}
	fds := make([]int, *channels)
	for ch := range fds {
		if fds[ch], err = senderSocket(channelGroup(group, ch).As4(), rf.port); err != nil {
			return err
		}
		defer unix.Close(fds[ch])
	}
	buf := make([]byte, rf.size)
	var rep latSendReport
	var stall sendStall
	send := func(i uint64) error {
		fd := fds[i%uint64(len(fds))]
		for {
			putStamp(buf, i, time.Now().UnixNano())
			_, err := unix.Write(fd, buf)
			if err == nil {
				stall.reset()
				return nil
			}
			if err := stall.failed("send", err); err != nil {
				return err
			}
			rep.Retries++
		}
	}
	if err := pacedSend(*rate, *count, &rep, send); err != nil {
		return err
	}
	var marker [stampLen]byte
	for _, d := range latMarkerDelays {
		time.Sleep(d)
		for ch, fd := range fds {
			// Channel ch carried the sends i with i%channels == ch.
			n := rep.Sent / uint64(len(fds))
			if uint64(ch) < rep.Sent%uint64(len(fds)) {
				n++
			}
			putEnd(marker[:], n)
			_, _ = unix.Write(fd, marker[:])
		}
	}
	return json.NewEncoder(stdout).Encode(&rep)
}

// senderSocket opens a UDP socket with tickcast's sender settings
// (loopback interface, TTL 0, loop on) connected to group:port.
func senderSocket(group [4]byte, port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 0); err != nil {
		return fail("setsockopt IP_MULTICAST_TTL", err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1); err != nil {
		return fail("setsockopt IP_MULTICAST_LOOP", err)
	}
	if err := unix.SetsockoptInet4Addr(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, loopback); err != nil {
		return fail("setsockopt IP_MULTICAST_IF", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: loopback}); err != nil {
		return fail("bind", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: group, Port: port}); err != nil {
		return fail("connect", err)
	}
	return fd, nil
}

// latRecv is the lat-recv role: it joins --channels groups, says "ready" on
// stderr, and receives in --mode blocking or busy-poll until --expect
// datagrams arrived, every group's end marker came, --idle passed without a
// datagram once data flowed, or --start passed with none; then it writes
// the histogram to --hgrm and prints a latRecvReport.
func latRecv(args []string, stdout, stderr io.Writer) error {
	rf := newRoleFlags("lat-recv")
	channels := rf.fs.Int("channels", 1, "groups, the channel's address plus 0..channels-1")
	mode := rf.fs.String("mode", "blocking", "blocking (epoll_wait, then recvmmsg) or busy-poll (non-blocking recvmmsg in turn on a locked thread)")
	expect := rf.fs.Uint64("expect", 0, "stop once this many datagrams arrived (0: at the end markers)")
	idle := rf.fs.Duration("idle", time.Second, "stop after this long without a datagram")
	startWait := rf.fs.Duration("start", 10*time.Second, "stop if no datagram arrives within this long")
	hgrm := rf.fs.String("hgrm", "", "write the latency histogram here (.hgrm, µs)")
	group, err := rf.parse(args)
	if err != nil {
		return err
	}
	if *channels < 1 || *channels > 32 {
		return fmt.Errorf("--channels %d: want 1..32", *channels)
	}
	if *mode != "blocking" && *mode != "busy-poll" {
		return fmt.Errorf("--mode %q: want blocking or busy-poll", *mode)
	}
	fds := make([]int, *channels)
	for ch := range fds {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		defer unix.Close(fd)
		if _, err := joinGroup(fd, channelGroup(group, ch), rf.port); err != nil {
			return err
		}
		fds[ch] = fd
	}
	r := &latReceiver{fds: fds, split: newLatSplit(), expect: *expect, idle: *idle, startWait: *startWait}
	r.hdrs, r.bufs = mmsgs(recvBatch, rf.size)
	fmt.Fprintln(stderr, "tickbench lat-recv: ready")
	if *mode == "blocking" {
		err = r.runBlocking()
	} else {
		err = r.runBusy()
	}
	if err != nil {
		return err
	}
	r.rep.First, r.rep.Steady = statsOf(r.split.First), statsOf(r.split.Steady)
	return printLatReport(stdout, &r.rep, &r.rep.latStats, r.split.Whole(), *hgrm)
}

// latReceiver is the floor's receive loop state. One goroutine uses it.
type latReceiver struct {
	fds       []int
	hdrs      []unix.Mmsghdr
	bufs      [][]byte
	split     *hgrm.Split // the latencies: first second and steady state (Whole: the run)
	expect    uint64
	idle      time.Duration
	startWait time.Duration
	begin     time.Time
	last      time.Time
	rep       latRecvReport
}

// drain reads fd until it is empty, recording each datagram's latency
// against one clock read per recvmmsg call (when the batch was in hand).
func (r *latReceiver) drain(fd int) error {
	for {
		for i := range r.hdrs {
			r.hdrs[i].Hdr.Flags = 0
		}
		n, errno := recvmmsg(fd, r.hdrs, unix.MSG_DONTWAIT)
		if errno == unix.EAGAIN || errno == unix.EINTR || (errno == 0 && n == 0) {
			return nil
		}
		if errno != 0 {
			return fmt.Errorf("recvmmsg: %w", errno)
		}
		now := time.Now()
		nowNs := now.UnixNano()
		data := uint64(0)
		for i := 0; i < n; i++ {
			if r.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
				r.rep.Truncated++
				continue
			}
			ns, end, announced := readStamp(r.bufs[i][:r.hdrs[i].Len])
			if end {
				r.rep.Ended++
				r.rep.Announced += announced
				continue
			}
			r.split.Record(nowNs, nowNs-ns)
			data++
		}
		if data > 0 {
			if r.rep.Received == 0 {
				r.rep.FirstNs = nowNs
			}
			r.rep.Received += data
			r.rep.LastNs = nowNs
			r.last = now
		}
		if n < len(r.hdrs) {
			return nil
		}
	}
}

// done reports whether the receive loop may stop, and sets the reason.
// checkTime also checks the idle and start deadlines.
func (r *latReceiver) done(checkTime bool) bool {
	switch {
	case r.expect > 0 && r.rep.Received >= r.expect:
		r.rep.Reason = "expect"
	case r.rep.Ended >= len(r.fds):
		r.rep.Reason = "end-marker"
	case !checkTime:
		return false
	case r.rep.Received == 0 && time.Since(r.begin) > r.startWait:
		r.rep.Reason = "no-data"
	case r.rep.Received > 0 && time.Since(r.last) > r.idle:
		r.rep.Reason = "idle-timeout"
	default:
		return false
	}
	return true
}

// runBlocking waits in epoll_wait for any socket to be readable, then
// drains the ready ones: one goroutine, every socket, no hand-off.
func (r *latReceiver) runBlocking() error {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	defer unix.Close(ep)
	for _, fd := range r.fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	events := make([]unix.EpollEvent, len(r.fds))
	r.begin = time.Now()
	for {
		n, err := unix.EpollWait(ep, events, int(rcvTimeout/time.Millisecond))
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for i := 0; i < n; i++ {
			if err := r.drain(int(events[i].Fd)); err != nil {
				return err
			}
		}
		if r.done(n <= 0) {
			return nil
		}
	}
}

// runBusy polls the non-blocking sockets in turn on a locked thread,
// never sleeping: the lowest wakeup latency, one core spent.
func (r *latReceiver) runBusy() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r.begin = time.Now()
	for spins := uint(0); ; spins++ {
		before := r.rep.Received + uint64(r.rep.Ended)
		for _, fd := range r.fds {
			if err := r.drain(fd); err != nil {
				return err
			}
		}
		got := r.rep.Received+uint64(r.rep.Ended) != before
		if r.done(!got && spins&4095 == 0) {
			return nil
		}
	}
}
