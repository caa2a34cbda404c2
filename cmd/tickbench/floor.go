package main

// The raw-socket floor: a sender and a receiver process that move datagrams
// over loopback multicast with nothing but golang.org/x/sys/unix system calls,
// batched like tickcast's transport (sendmmsg of the publisher's send batch,
// recvmmsg of 32 with MSG_WAITFORONE into pre-allocated buffers) and with the
// same socket settings. It deliberately shares no code with tickcast (not even
// ud/udp): it is what the kernel allows on this machine right now, so that
// tickcast's figures measured beside it can be read as a fraction of it.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// recvBatch is the receiver's recvmmsg batch, tickcast's receive batch
	// (ud/udp.DefaultBatch).
	recvBatch = 32
	// floorRcvBuf is the receive buffer the floor receiver asks for: the
	// same request tickcast's receiver makes by default
	// (ud/udp.DefaultRcvBuf, or net.core.rmem_max if larger).
	floorRcvBuf = 32 << 20
	// endMagic starts the end-marker datagram the sender sends after the
	// data. Data datagrams start with their big-endian sequence number,
	// which stays far below this value, so one 8-byte compare tells them
	// apart.
	endMagic = 0x7469636B454E4421 // "tickEND!"
	// endLen is the marker's length: magic and the number of datagrams sent.
	endLen = 16
	// minSize is the smallest floor datagram: room for the sequence number
	// and distinct from endLen.
	minSize = 24
	// rcvTimeout is the receiver's SO_RCVTIMEO: how often a blocked
	// recvmmsg returns to check the idle and start deadlines.
	rcvTimeout = 100 * time.Millisecond
)

// markerDelays are the pauses before each copy of the end marker. The marker
// is an ordinary datagram, dropped like any other while the receiver's queue
// is full; spreading copies over about half a second lets the receiver drain
// a full 64 MiB queue first. The receiver stops at the first copy, and falls
// back to its idle timeout only if every copy was lost.
var markerDelays = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}

// sendReport is the raw sender's JSON line.
type sendReport struct {
	Sent     uint64 `json:"sent"`
	Bytes    uint64 `json:"bytes"`
	Syscalls uint64 `json:"syscalls"`
	Retries  uint64 `json:"retries"`  // calls repeated after EAGAIN, ENOBUFS, EINTR or a partial send
	StartNs  int64  `json:"start_ns"` // wall clock before the first sendmmsg
	EndNs    int64  `json:"end_ns"`   // wall clock after the last data datagram was sent
	Markers  int    `json:"markers"`  // end markers sent
}

// recvReport is the raw receiver's JSON line.
type recvReport struct {
	Received  uint64 `json:"received"`
	Bytes     uint64 `json:"bytes"`
	Truncated uint64 `json:"truncated"`
	Syscalls  uint64 `json:"syscalls"` // recvmmsg calls that returned data
	FirstNs   int64  `json:"first_ns"` // wall clock of the first data batch
	LastNs    int64  `json:"last_ns"`  // wall clock of the last data batch
	EndMarker bool   `json:"end_marker"`
	Announced uint64 `json:"announced"` // datagrams the marker says were sent
	Coalesced uint64 `json:"coalesced"` // with --gro: datagrams that arrived as segments of a larger buffer
	RcvBuf    int    `json:"rcvbuf"`    // getsockopt(SO_RCVBUF): twice the granted request
	Reason    string `json:"reason"`    // end-marker, idle-timeout or no-data
}

// allowedGroup reports whether g is a group this command may use: only
// 239.77.0.0/16 to 239.79.0.0/16, always on the loopback interface.
func allowedGroup(g netip.Addr) bool {
	if !g.Is4() {
		return false
	}
	b := g.As4()
	return b[0] == 239 && b[1] >= 77 && b[1] <= 79
}

// loopback is the only interface address used: multicast never leaves the
// host.
var loopback = [4]byte{127, 0, 0, 1}

// roleFlags parses the flags shared by both raw roles.
type roleFlags struct {
	fs    *flag.FlagSet
	group string
	port  int
	size  int
}

func newRoleFlags(role string) *roleFlags {
	r := &roleFlags{fs: flag.NewFlagSet(role, flag.ContinueOnError)}
	r.fs.SetOutput(io.Discard)
	r.fs.String("role", role, "")
	r.fs.StringVar(&r.group, "group", "", "multicast group (239.77.0.0/16-239.79.0.0/16)")
	r.fs.IntVar(&r.port, "port", 0, "UDP port")
	r.fs.IntVar(&r.size, "size", 0, "datagram size in bytes")
	return r
}

func (r *roleFlags) parse(args []string) (netip.Addr, error) {
	if err := r.fs.Parse(args); err != nil {
		return netip.Addr{}, err
	}
	g, err := netip.ParseAddr(r.group)
	if err != nil || !allowedGroup(g) {
		return netip.Addr{}, fmt.Errorf("--group %q: want an address in 239.77.0.0/16-239.79.0.0/16", r.group)
	}
	if r.port < 1 || r.port > 65535 {
		return netip.Addr{}, fmt.Errorf("--port %d: want 1..65535", r.port)
	}
	if r.size < minSize || r.size > 65507 {
		return netip.Addr{}, fmt.Errorf("--size %d: want %d..65507", r.size, minSize)
	}
	return g, nil
}

// mmsgs returns n message headers, each with one iovec over its own
// pre-allocated buffer of size bytes. Built once: the loops never allocate.
func mmsgs(n, size int) ([]unix.Mmsghdr, [][]byte) {
	hdrs := make([]unix.Mmsghdr, n)
	iovs := make([]unix.Iovec, n)
	bufs := make([][]byte, n)
	for i := range hdrs {
		bufs[i] = make([]byte, size)
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(size)
		hdrs[i].Hdr.Iov = &iovs[i]
		hdrs[i].Hdr.Iovlen = 1
	}
	return hdrs, bufs
}

// x/sys/unix (v0.50) has the Mmsghdr type but no sendmmsg or recvmmsg
// wrapper. Syscall6 (not RawSyscall6) tells the scheduler the thread may
// block, as both calls can.

func sendmmsg(fd int, hdrs []unix.Mmsghdr) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
	return int(r), e
}

func recvmmsg(fd int, hdrs []unix.Mmsghdr, flags int) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), uintptr(flags), 0, 0)
	return int(r), e
}

// rawSend is the raw-send role: it sends --count datagrams of --size bytes to
// the group as fast as sendmmsg takes them, --batch per call, then the end
// marker, and prints a sendReport.
func rawSend(args []string, stdout io.Writer) error {
	rf := newRoleFlags("raw-send")
	count := rf.fs.Uint64("count", 0, "datagrams to send")
	batch := rf.fs.Int("batch", 16, "datagrams per sendmmsg")
	gso := rf.fs.Int("gso", 0, "with N > 1: send N datagrams of --size per send call as one UDP GSO buffer (UDP_SEGMENT) instead of sendmmsg")
	group, err := rf.parse(args)
	if err != nil {
		return err
	}
	if *batch < 1 || *batch > 1024 {
		return fmt.Errorf("--batch %d: want 1..1024", *batch)
	}
	if *gso < 0 || *gso > maxGSOSegments || *gso*rf.size > maxGSOBytes {
		return fmt.Errorf("--gso %d: want 0..%d segments of %d bytes, at most %d bytes in all", *gso, maxGSOSegments, rf.size, maxGSOBytes)
	}
	// The same sender settings as tickcast's (see senderSocket). The send
	// buffer keeps its default, as tickcast's does.
	fd, err := senderSocket(group.As4(), rf.port)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var rep sendReport
	if *gso > 1 {
		err = sendGSO(fd, *gso, rf.size, *count, &rep)
	} else {
		err = sendBatches(fd, *batch, rf.size, *count, &rep)
	}
	if err != nil {
		return err
	}
	var marker [endLen]byte
	binary.BigEndian.PutUint64(marker[0:], endMagic)
	binary.BigEndian.PutUint64(marker[8:], rep.Sent)
	for _, d := range markerDelays {
		time.Sleep(d)
		if _, err := unix.Write(fd, marker[:]); err == nil {
			rep.Markers++
		}
	}
	return json.NewEncoder(stdout).Encode(&rep)
}

// sendBatches sends count numbered datagrams of size bytes on fd, batch per
// sendmmsg call, counting them, the calls and the retries in rep.
func sendBatches(fd, batch, size int, count uint64, rep *sendReport) error {
	hdrs, bufs := mmsgs(batch, size)
	var stall sendStall
	rep.StartNs = time.Now().UnixNano()
	for rep.Sent < count {
		n := int(min(uint64(batch), count-rep.Sent))
		// Number the datagrams, as a real sender writes a header into
		// each; the receiver does not check the order.
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint64(bufs[i], rep.Sent+uint64(i))
		}
		for off := 0; off < n; {
			m, errno := sendmmsg(fd, hdrs[off:n])
			rep.Syscalls++
			if errno != 0 {
				if err := stall.failed("sendmmsg", errno); err != nil {
					return err
				}
				rep.Retries++
				runtime.Gosched()
				continue
			}
			stall.reset()
			if off += m; off < n {
				rep.Retries++
			}
		}
		rep.Sent += uint64(n)
		rep.Bytes += uint64(n * size)
	}
	rep.EndNs = time.Now().UnixNano()
	return nil
}

// UDP GSO limits: the kernel cuts one send into at most 64 segments (older
// kernels; newer ones take 128), and a UDP datagram, the whole buffer
// included, is at most 65,507 bytes.
const (
	maxGSOSegments = 64
	maxGSOBytes    = 65507
)

// sendGSO sends count numbered datagrams of size bytes on fd, segs per
// write of one buffer that the kernel cuts into datagrams of size bytes
// (UDP_SEGMENT, set on the socket). A kernel without UDP GSO refuses the
// option: the error says so.
func sendGSO(fd, segs, size int, count uint64, rep *sendReport) error {
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, size); err != nil {
		return fmt.Errorf("setsockopt UDP_SEGMENT %d: %w (this kernel has no UDP GSO)", size, err)
	}
	buf := make([]byte, segs*size)
	var stall sendStall
	rep.StartNs = time.Now().UnixNano()
	for rep.Sent < count {
		n := int(min(uint64(segs), count-rep.Sent))
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint64(buf[i*size:], rep.Sent+uint64(i))
		}
		_, err := unix.Write(fd, buf[:n*size])
		rep.Syscalls++
		if err != nil {
			if err := stall.failed("write (GSO)", err); err != nil {
				return err
			}
			rep.Retries++
			runtime.Gosched()
			continue
		}
		stall.reset()
		rep.Sent += uint64(n)
		rep.Bytes += uint64(n * size)
	}
	rep.EndNs = time.Now().UnixNano()
	return nil
}

// sendStall applies tickcast's sender's policy to a failed send:
// EAGAIN, ENOBUFS and EINTR are transient and the send is retried, until
// sends have failed for over a second in a row.
type sendStall struct {
	since time.Time // start of a run of calls that sent nothing
}

// failed returns nil when the send that failed with err may be retried,
// and otherwise the error (named for op) that ends the sending.
func (s *sendStall) failed(op string, err error) error {
	if err != unix.EAGAIN && err != unix.ENOBUFS && err != unix.EINTR {
		return fmt.Errorf("%s: %w", op, err)
	}
	if s.since.IsZero() {
		s.since = time.Now()
	} else if time.Since(s.since) > time.Second {
		return fmt.Errorf("%s: %w for over a second", op, err)
	}
	return nil
}

// reset ends a run of failed sends: a send went through.
func (s *sendStall) reset() { s.since = time.Time{} }

// rawRecv is the raw-recv role: it joins the group, says "ready" on stderr,
// and receives with recvmmsg in batches of 32 until the end marker arrives,
// --idle passes without a datagram once data has flowed, or --start passes
// with no datagram at all; then it prints a recvReport.
func rawRecv(args []string, stdout, stderr io.Writer) error {
	rf := newRoleFlags("raw-recv")
	idle := rf.fs.Duration("idle", time.Second, "stop after this long without a datagram")
	startWait := rf.fs.Duration("start", 10*time.Second, "stop if no datagram arrives within this long")
	gro := rf.fs.Bool("gro", false, "ask for UDP GRO (UDP_GRO): a GSO sender's run arrives as one buffer of up to 64 KiB, counted as its segments")
	group, err := rf.parse(args)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	rep := recvReport{}
	if rep.RcvBuf, err = joinGroup(fd, group, rf.port); err != nil {
		return err
	}
	bufSize := rf.size
	if *gro {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1); err != nil {
			return fmt.Errorf("setsockopt UDP_GRO: %w (this kernel has no UDP GRO)", err)
		}
		bufSize = maxGSOBytes
	}
	fmt.Fprintln(stderr, "tickbench raw-recv: ready")

	hdrs, bufs := mmsgs(recvBatch, bufSize)
	ctrl := make([]byte, recvBatch*groCtrlSpace)
	begin := time.Now()
	var last time.Time
recv:
	for !rep.EndMarker {
		for i := range hdrs {
			hdrs[i].Hdr.Flags = 0 // the kernel sets MSG_TRUNC here
			if *gro {
				hdrs[i].Hdr.Control = &ctrl[i*groCtrlSpace]
				hdrs[i].Hdr.SetControllen(groCtrlSpace)
			}
		}
		// MSG_WAITFORONE: block for the first datagram only, then take
		// what else is queued, as tickcast's blocking receive loop does.
		n, errno := recvmmsg(fd, hdrs, unix.MSG_WAITFORONE)
		if errno == unix.EAGAIN || errno == unix.EINTR || (errno == 0 && n == 0) {
			// SO_RCVTIMEO expired: check the deadlines.
			switch {
			case rep.Received == 0 && time.Since(begin) > *startWait:
				rep.Reason = "no-data"
				break recv
			case rep.Received > 0 && time.Since(last) > *idle:
				rep.Reason = "idle-timeout"
				break recv
			}
			continue
		}
		if errno != 0 {
			return fmt.Errorf("recvmmsg: %w", errno)
		}
		now := time.Now()
		data := uint64(0)
		for i := 0; i < n; i++ {
			l := int(hdrs[i].Len)
			if l == endLen && binary.BigEndian.Uint64(bufs[i]) == endMagic {
				rep.EndMarker, rep.Reason = true, "end-marker"
				rep.Announced = binary.BigEndian.Uint64(bufs[i][8:])
				continue
			}
			if hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
				rep.Truncated++
				continue
			}
			segs := uint64(1)
			if *gro {
				if g := groSegment(ctrl[i*groCtrlSpace : i*groCtrlSpace+int(hdrs[i].Hdr.Controllen)]); g > 0 {
					segs = uint64((l + g - 1) / g)
					rep.Coalesced += segs
				}
			}
			data += segs
			rep.Bytes += uint64(l)
		}
		if data > 0 {
			if rep.Received == 0 {
				rep.FirstNs = now.UnixNano()
			}
			rep.Received += data
			rep.LastNs = now.UnixNano()
			rep.Syscalls++
			last = now
		}
	}
	return json.NewEncoder(stdout).Encode(&rep)
}

// groCtrlSpace is the control buffer per received buffer with UDP GRO: one
// UDP_GRO message (a cmsghdr and an int).
var groCtrlSpace = unix.CmsgSpace(4)

// groSegment returns the segment size a UDP_GRO control message in b
// gives, or 0 when there is none (a datagram that arrived on its own).
func groSegment(b []byte) int {
	msgs, err := unix.ParseSocketControlMessage(b)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_UDP && m.Header.Type == unix.UDP_GRO && len(m.Data) >= 4 {
			return int(binary.NativeEndian.Uint32(m.Data))
		}
	}
	return 0
}

// joinGroup binds fd to group:port and joins the group on the loopback
// interface with tickcast's receiver settings, and returns the receive
// buffer size the kernel reports.
func joinGroup(fd int, group netip.Addr, port int) (int, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return 0, fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
	}
	// Bound to the group, not INADDR_ANY, and IP_MULTICAST_ALL off: the
	// socket hears this group only, whatever else other processes joined.
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: group.As4(), Port: port}); err != nil {
		return 0, fmt.Errorf("bind %s:%d: %w", group, port, err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0); err != nil {
		return 0, fmt.Errorf("setsockopt IP_MULTICAST_ALL: %w", err)
	}
	mreq := &unix.IPMreq{Multiaddr: group.As4(), Interface: loopback}
	if err := unix.SetsockoptIPMreq(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
		return 0, fmt.Errorf("setsockopt IP_ADD_MEMBERSHIP: %w", err)
	}
	// The receive buffer tickcast asks for: floorRcvBuf or rmem_max if
	// larger, forced past rmem_max when privileged, else capped by it.
	want := floorRcvBuf
	rmemMax := 0
	if b, err := os.ReadFile("/proc/sys/net/core/rmem_max"); err == nil {
		rmemMax, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	want = max(want, rmemMax)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, want); err != nil {
		if !errors.Is(err, unix.EPERM) {
			return 0, fmt.Errorf("setsockopt SO_RCVBUFFORCE: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, want); err != nil {
			return 0, fmt.Errorf("setsockopt SO_RCVBUF: %w", err)
		}
	}
	tv := unix.NsecToTimeval(rcvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("setsockopt SO_RCVTIMEO: %w", err)
	}
	return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
}

// floorConfig is one floor measurement.
type floorConfig struct {
	Exe     []string      // command that runs this program's roles (the binary itself, or the test binary)
	Count   uint64        // datagrams to send
	Size    int           // bytes per datagram
	Batch   int           // datagrams per sendmmsg
	GSO     int           // > 1: datagrams per UDP GSO send instead of sendmmsg
	GRO     bool          // the receiver asks for UDP GRO
	Timeout time.Duration // limit for each child process
}

// floorResult is one floor measurement.
type floorResult struct {
	Group      string  `json:"group"`
	Sent       uint64  `json:"sent"`
	Received   uint64  `json:"received"`
	Lost       uint64  `json:"lost"`
	LossPct    float64 `json:"loss_pct"`
	Size       int     `json:"size"`
	Bytes      uint64  `json:"bytes"`
	Truncated  uint64  `json:"truncated"`
	Coalesced  uint64  `json:"coalesced,omitempty"` // received as segments of a GRO buffer
	WindowS    float64 `json:"window_s"`            // sender's first sendmmsg to receiver's last datagram
	SendS      float64 `json:"send_s"`              // the sender's own duration
	DgramsPerS float64 `json:"dgrams_per_s"`
	BytesPerS  float64 `json:"bytes_per_s"`
	SendCalls  uint64  `json:"send_syscalls"`
	RecvCalls  uint64  `json:"recv_syscalls"` // recvmmsg calls that returned data
	EndMarker  bool    `json:"end_marker"`
	RcvBuf     int     `json:"rcvbuf"`
	SendCPUS   float64 `json:"send_cpu_s"` // CPU time of the sender process, user + system
	RecvCPUS   float64 `json:"recv_cpu_s"` // CPU time of the receiver process
	// CPUPerDgramUs is both processes' CPU time per datagram received, in
	// µs: less sensitive to other load than the rates, which count the
	// time the processes waited for a CPU.
	CPUPerDgramUs     float64 `json:"cpu_us_per_dgram"`
	SendCPUPerDgramUs float64 `json:"send_cpu_us_per_dgram"`
	RecvCPUPerDgramUs float64 `json:"recv_cpu_us_per_dgram"`
}

// runFloor runs the raw receiver and sender as two processes on a fresh
// group and port and combines their reports.
func runFloor(ctx context.Context, c floorConfig) (floorResult, error) {
	group, port, err := freshGroup(79, 1)
	if err != nil {
		return floorResult{}, err
	}
	common := []string{"--group", group.String(), "--port", strconv.Itoa(port), "--size", strconv.Itoa(c.Size)}
	recvArgs := append([]string{"--role", "raw-recv"}, common...)
	if c.GRO {
		recvArgs = append(recvArgs, "--gro")
	}
	recv, err := startProc(ctx, "raw-recv", c.Timeout, c.Exe, recvArgs, "raw-recv: ready")
	if err != nil {
		return floorResult{}, err
	}
	defer recv.kill()
	if err := recv.waitReady(5 * time.Second); err != nil {
		return floorResult{}, err
	}
	sendArgs := append([]string{"--role", "raw-send", "--count", strconv.FormatUint(c.Count, 10), "--batch", strconv.Itoa(c.Batch)}, common...)
	if c.GSO > 1 {
		sendArgs = append(sendArgs, "--gso", strconv.Itoa(c.GSO))
	}
	send, err := startProc(ctx, "raw-send", c.Timeout, c.Exe, sendArgs, "")
	if err != nil {
		return floorResult{}, err
	}
	defer send.kill()
	var sr sendReport
	if _, err := send.summary(&sr); err != nil {
		return floorResult{}, err
	}
	var rr recvReport
	if _, err := recv.summary(&rr); err != nil {
		return floorResult{}, err
	}
	if rr.Received == 0 {
		return floorResult{}, fmt.Errorf("raw-recv received nothing of %d datagrams (%s)", sr.Sent, rr.Reason)
	}
	r := floorResult{
		Group: fmt.Sprintf("%s:%d", group, port), Sent: sr.Sent, Received: rr.Received, Size: c.Size,
		Bytes: rr.Bytes, Truncated: rr.Truncated, Coalesced: rr.Coalesced, SendCalls: sr.Syscalls, RecvCalls: rr.Syscalls,
		EndMarker: rr.EndMarker, RcvBuf: rr.RcvBuf, SendCPUS: send.cpuSeconds(), RecvCPUS: recv.cpuSeconds(),
		SendS: time.Duration(sr.EndNs - sr.StartNs).Seconds(),
		// Both ends read the same wall clock (one host), so the window
		// runs from the first send to the last datagram received: the
		// same span tickcast's figures cover.
		WindowS: time.Duration(rr.LastNs - sr.StartNs).Seconds(),
	}
	if r.Received <= r.Sent {
		r.Lost = r.Sent - r.Received
	}
	r.LossPct = 100 * float64(r.Lost) / float64(max(1, r.Sent))
	if r.WindowS <= 0 {
		return r, fmt.Errorf("raw floor: empty time window (send start %d, last receive %d)", sr.StartNs, rr.LastNs)
	}
	r.DgramsPerS = float64(r.Received) / r.WindowS
	r.SendCPUPerDgramUs = 1e6 * r.SendCPUS / float64(r.Received)
	r.RecvCPUPerDgramUs = 1e6 * r.RecvCPUS / float64(r.Received)
	r.CPUPerDgramUs = r.SendCPUPerDgramUs + r.RecvCPUPerDgramUs
	r.BytesPerS = float64(r.Bytes) / r.WindowS
	return r, nil
}
