package udp

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// golang.org/x/sys/unix (v0.50) has the Mmsghdr type but no sendmmsg or
// recvmmsg wrappers, so the two system calls are made here directly. Both take
// a pointer into a pre-allocated []unix.Mmsghdr whose iovecs and control
// buffers point into long-lived buffers; nothing is built per call.

// sendmmsg sends hdrs[0:n] and returns how many were sent. It uses the
// blocking Syscall6, which tells the scheduler the thread may block.
func sendmmsg(fd int, hdrs *unix.Mmsghdr, n int) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(hdrs)), uintptr(n), 0, 0, 0)
	return int(r), e
}

// recvmmsg receives into hdrs[0:n] and returns how many datagrams arrived.
func recvmmsg(fd int, hdrs *unix.Mmsghdr, n int, flags int) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(hdrs)), uintptr(n), uintptr(flags), 0, 0)
	return int(r), e
}

// recvmmsgRaw is recvmmsg on a non-blocking socket for the busy-poll loop.
// RawSyscall6 skips the scheduler's entersyscall/exitsyscall bookkeeping,
// which would otherwise be paid on every empty poll; that is safe only because
// the call cannot block.
func recvmmsgRaw(fd int, hdrs *unix.Mmsghdr, n int) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(hdrs)), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

// newSocket returns a UDP/IPv4 socket, non-blocking if asked.
func newSocket(c *Config, nonblock bool) (int, error) {
	typ := unix.SOCK_DGRAM | unix.SOCK_CLOEXEC
	if nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	fd, err := unix.Socket(unix.AF_INET, typ, unix.IPPROTO_UDP)
	if err != nil {
		return -1, c.opError("socket", err)
	}
	return fd, nil
}

// sockaddr returns addr:port as a socket address.
func sockaddr(addr [4]byte, port int) *unix.SockaddrInet4 {
	return &unix.SockaddrInet4{Addr: addr, Port: port}
}

// setInt sets an integer socket option, naming it in the error.
func setInt(c *Config, fd, level, opt int, name string, v int) error {
	if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
		return c.opError("setsockopt "+name+"="+strconv.Itoa(v), err)
	}
	return nil
}

// setRcvBuf sizes the socket receive buffer as Config.RcvBuf describes and
// returns what getsockopt(SO_RCVBUF) reports afterwards (twice the granted
// request on Linux).
func setRcvBuf(c *Config, fd int) (int, error) {
	rmemMax, _ := readProcInt("/proc/sys/net/core/rmem_max") // 0 if unreadable
	want := c.RcvBuf
	if want == 0 {
		want = max(DefaultRcvBuf, rmemMax)
	}
	if rmemMax == 0 || want > rmemMax {
		// Above the unprivileged limit: SO_RCVBUFFORCE ignores rmem_max
		// but needs CAP_NET_ADMIN. Without it, SO_RCVBUF below gets what
		// the limit allows.
		err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, want)
		if err == nil {
			return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		}
		if !errors.Is(err, unix.EPERM) {
			return 0, c.opError("setsockopt SO_RCVBUFFORCE="+strconv.Itoa(want), err)
		}
		if rmemMax > 0 {
			want = rmemMax
		}
	}
	if err := setInt(c, fd, unix.SOL_SOCKET, unix.SO_RCVBUF, "SO_RCVBUF", want); err != nil {
		return 0, err
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return 0, c.opError("getsockopt SO_RCVBUF", err)
	}
	return got, nil
}

// readProcInt reads a single integer from a /proc file.
func readProcInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(bytes.TrimSpace(b)))
}
