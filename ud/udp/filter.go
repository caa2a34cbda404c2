package udp

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// udpHeaderLen is where a UDP socket filter finds the payload: a classic BPF
// program attached to a UDP socket sees the datagram from its UDP header.
const udpHeaderLen = 8

// dropPrefixFilter returns a classic BPF program that drops a datagram
// whose payload starts with prefix and accepts any other: the prefix is
// compared four bytes at a time, then two, then one (BPF loads are big
// endian), and the first difference jumps to the accepting return. A
// datagram shorter than the prefix is dropped too (a load past its end ends
// the program with 0).
func dropPrefixFilter(prefix []byte) []unix.SockFilter {
	var prog []unix.SockFilter
	var jumps []int // compare instructions whose false branch accepts
	for off := 0; off < len(prefix); {
		var size uint16
		var k uint32
		switch rest := len(prefix) - off; {
		case rest >= 4:
			size, k = unix.BPF_W, binary.BigEndian.Uint32(prefix[off:])
			off += 4
		case rest >= 2:
			size, k = unix.BPF_H, uint32(binary.BigEndian.Uint16(prefix[off:]))
			off += 2
		default:
			size, k = unix.BPF_B, uint32(prefix[off])
			off++
		}
		at := udpHeaderLen + off
		switch size {
		case unix.BPF_W:
			at -= 4
		case unix.BPF_H:
			at -= 2
		default:
			at--
		}
		prog = append(prog, unix.SockFilter{Code: unix.BPF_LD | size | unix.BPF_ABS, K: uint32(at)})
		jumps = append(jumps, len(prog))
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k})
	}
	prog = append(prog, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 0}) // the whole prefix matched
	accept := len(prog)
	prog = append(prog, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 0xFFFFFFFF})
	for _, i := range jumps {
		prog[i].Jf = uint8(accept - i - 1) // counted from the next instruction
	}
	return prog
}
