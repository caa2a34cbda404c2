// Package pcap reads captures of MoldUDP64 multicast traffic, as captures of
// exchange days are distributed, and yields the messages they carry in
// sequence order.
//
// It has three layers, each usable alone:
//
//   - Reader reads the records of a capture file: classic pcap (either byte
//     order, micro- or nanosecond timestamps) or pcapng (section header,
//     interface description, enhanced and simple packet blocks; other
//     blocks are skipped). A record the file frames correctly but that is
//     wrong in itself is reported as a *FormatError wrapping ErrMalformed and
//     skipped; a file cut short ends with a *FormatError wrapping
//     io.ErrUnexpectedEOF after every whole record; a link type other than
//     Ethernet (with 802.1Q and 802.1ad VLAN tags), Linux cooked capture (v1
//     and v2) or raw IPv4 is an error wrapping ErrLinkType that names it.
//
//   - DatagramReader decodes the link layer, IPv4 and UDP, reassembles
//     fragmented datagrams (at most MaxPending at once, each given up after
//     FragmentTimeout of capture time or at the end of the file, and counted
//     as incomplete), and keeps the datagrams sent to one group and port,
//     or all of them.
//
//   - Messages frames each datagram as a MoldUDP64 packet (package mold) and
//     puts the packets in sequence order with a seqgap.Tracker on the
//     capture's clock: the other line's copies are dropped as duplicates,
//     packets out of order wait for the ones before them, and what never
//     came is reported as a gap. A capture whose packets carry sequence
//     number 0 (anonymized) is read unsequenced, in capture order. It
//     implements itch.MessageReader, so itch.NewMessageSource normalizes a
//     capture as itch.NewSource does a file.
//
// Every layer counts what it read and skipped (Counts, MoldCounts), every
// packet by what became of it; nothing allocates per record or per message
// once the buffers have grown.
package pcap
