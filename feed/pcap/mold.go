package pcap

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// MoldCounts are what a Messages read at the MoldUDP64 level. Gaps and
// Missing leave out the start of the capture: messages before the first one
// captured are not counted as missing (FirstSeq says where it began).
//
// Every packet is counted once more by what became of it: Packets is the
// sum of DataPackets, DuplicatePackets, Heartbeats, EndOfSession,
// Implausible and OtherSession.
type MoldCounts struct {
	Packets    uint64 `json:"mold_packets"` // datagrams that parse as MoldUDP64 packets
	Heartbeats uint64 `json:"heartbeats"`
	// EndOfSession counts the end-of-session packets of the session
	// followed.
	EndOfSession uint64 `json:"end_of_session"`
	// DataPackets counts the packets that brought at least one message not
	// handed on before.
	DataPackets uint64 `json:"data_packets"`
	// Implausible counts packets dropped for a sequence number that cannot
	// be: 0 once the capture's stream is sequenced, or a leap of more than
	// 2^32 messages.
	Implausible uint64 `json:"implausible"`
	// Unsequenced is set when the capture's first packets carry sequence
	// number 0, which MoldUDP64 never sends: an anonymized capture. Such
	// packets are read in capture order (UnsequencedPackets), with no
	// duplicate or gap detection.
	Unsequenced        bool   `json:"unsequenced"`
	UnsequencedPackets uint64 `json:"unsequenced_packets"` // packets read in capture order
	// NotMold counts datagrams that do not parse as MoldUDP64. Without a
	// GROUP:PORT filter they are other traffic, skipped; with one they are
	// also counted in Counts.Malformed.
	NotMold          uint64 `json:"not_mold"`
	Messages         uint64 `json:"mold_messages"`     // messages handed on, in sequence order
	DuplicatePackets uint64 `json:"duplicate_packets"` // packets that brought nothing new (the other line's copy)
	Duplicates       uint64 `json:"duplicates"`        // messages dropped as already handed on
	Reordered        uint64 `json:"reordered"`         // messages that came early and waited for a gap to fill
	Gaps             uint64 `json:"gaps"`              // sequence gaps detected after the first message, filled later or not
	Missing          uint64 `json:"missing"`           // messages never captured, after the first
	OtherSession     uint64 `json:"other_session"`     // packets of another session, dropped
	FirstSeq         uint64 `json:"first_seq"`         // sequence number of the first message captured
	Session          string `json:"session"`           // the session followed
}

// Config configures Messages.
type Config struct {
	// Dst keeps only the datagrams sent to this group and port (zero:
	// every UDP datagram that parses as MoldUDP64).
	Dst netip.AddrPort
	// OnMalformed, when set, is called with each record or datagram skipped
	// as malformed (a *FormatError wrapping ErrMalformed).
	OnMalformed func(error)
	// OnEvent, when set, is called with each sequence event: a gap
	// (seqgap.EventGap), its loss (seqgap.EventLost), a session's start
	// and end. ev is valid only during the call.
	OnEvent func(ev *seqgap.Event)
	// OnUnsequenced, when set, is called once, with the session of the
	// first packet, when the capture turns out to be unsequenced: its
	// packets carry sequence number 0 and are read in capture order.
	OnUnsequenced func(session mold.Session)
}

// SplitPath splits PATH[:GROUP:PORT], as command lines name a capture and
// the datagrams to keep from it, into the path and the filter (zero: keep
// every datagram). A path may hold colons: only a trailing :GROUP:PORT that
// parses as an IPv4 address and port is taken as the filter.
func SplitPath(spec string) (path string, dst netip.AddrPort) {
	if i := strings.LastIndexByte(spec, ':'); i > 0 {
		if j := strings.LastIndexByte(spec[:i], ':'); j >= 0 {
			if dst, err := netip.ParseAddrPort(spec[j+1:]); err == nil && dst.Addr().Is4() {
				return spec[:j], dst
			}
		}
	}
	return spec, netip.AddrPort{}
}

// reorderWindow is how far ahead of a gap messages wait for it to fill: the
// A and B copies of a packet lie close together in a capture.
const reorderWindow = 1 << 12

// reorderSlot holds every ITCH 5.0 message (the longest is 50 bytes).
const reorderSlot = 64

// Messages yields the ITCH messages of a capture's MoldUDP64 packets, one
// at a time, in sequence order: it implements itch.MessageReader. The
// packets are put in order by a seqgap.Tracker without recovery, on the
// capture's clock: duplicates (A and B lines in one capture) are dropped,
// packets out of order wait in its window, and gaps are reported and
// counted. Packets of sequence number 0 before any sequenced one (an
// anonymized capture) are handed on in capture order instead
// (MoldCounts.Unsequenced). It does not allocate per message.
type Messages struct {
	dr     *DatagramReader
	cfg    Config
	tr     *seqgap.Tracker
	counts MoldCounts
	lastNs int64

	// Messages the tracker released for the current packet, copied (they
	// are valid only during the release), and taken one by one by Next.
	buf  []byte
	ends []int
	pos  int
	off  int64 // file offset of the record of the current packet
	ns   int64 // capture time of the record of the current packet
	err  error // sticky end: io.EOF or what ended the file

	// Packets read unsequenced, counted here rather than by the tracker.
	useq     mold.Session // their session
	useqHB   uint64       // heartbeats
	useqOth  uint64       // packets of another session
	useqData uint64       // packets with messages
}

// NewMessages reads the capture r, pcap or pcapng. It fails if the file
// header is wrong or names an unsupported link type.
func NewMessages(r io.Reader, cfg Config) (*Messages, error) {
	rd, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	// LostAfter is capture time: a gap still open that long after it was
	// seen will not be filled by the other line.
	tr, err := seqgap.New(seqgap.Config{Window: reorderWindow, SlotSize: reorderSlot, LostAfter: time.Second})
	if err != nil {
		return nil, err
	}
	dr := NewDatagramReader(rd, cfg.Dst)
	dr.OnMalformed = cfg.OnMalformed
	return &Messages{dr: dr, cfg: cfg, tr: tr, buf: make([]byte, 0, 4096), ends: make([]int, 0, 256)}, nil
}

// Counts returns the capture-level counters so far.
func (m *Messages) Counts() *Counts { return m.dr.Counts() }

// MoldCounts returns the MoldUDP64-level counters so far.
func (m *Messages) MoldCounts() *MoldCounts {
	st := m.tr.Stats()
	m.counts.Heartbeats = st.Heartbeats + m.useqHB
	m.counts.DuplicatePackets = st.DuplicatePackets
	m.counts.Duplicates = st.Duplicates
	m.counts.Reordered = st.Reordered
	m.counts.OtherSession = st.Competing + m.useqOth
	m.counts.Implausible = st.Implausible
	m.counts.DataPackets = st.WinsPerLine[0] + m.useqData
	if s, ok := m.tr.Session(); ok {
		m.counts.Session = s.String()
	} else if m.counts.Unsequenced {
		m.counts.Session = m.useq.String()
	}
	return &m.counts
}

// Offset returns the bytes of the file consumed so far.
func (m *Messages) Offset() int64 { return m.dr.Offset() }

// Time returns the capture time, in nanoseconds since the Unix epoch, of
// the record whose packet released the message Next returned last: the
// packet that carried it, or, for a message that waited behind a gap, the
// one that filled the gap.
func (m *Messages) Time() int64 { return m.ns }

// Next returns the next ITCH message, valid until the next call, and the
// file offset of the record that carried it. It returns io.EOF at the end
// of the capture, or the error that ended it (a truncated file, a read
// error) after every message before it.
func (m *Messages) Next() ([]byte, int64, error) {
	for m.pos == len(m.ends) {
		if m.err != nil {
			return nil, m.dr.Offset(), m.err
		}
		m.buf, m.ends, m.pos = m.buf[:0], m.ends[:0], 0
		m.fill()
		m.ns = m.lastNs
	}
	start := 0
	if m.pos > 0 {
		start = m.ends[m.pos-1]
	}
	end := m.ends[m.pos]
	m.pos++
	return m.buf[start:end:end], m.off, nil
}

// fill reads datagrams until the tracker releases messages or the file ends.
func (m *Messages) fill() {
	for len(m.ends) == 0 {
		dg, err := m.dr.Next()
		if err != nil {
			// Whatever still waits behind a gap is released now; the gap
			// is lost.
			m.tr.Tick(m.lastNs+int64(time.Hour), m)
			m.err = err
			return
		}
		p, err := mold.Parse(dg.Payload)
		if err != nil {
			m.counts.NotMold++
			if m.cfg.Dst.IsValid() {
				m.dr.malformed(&FormatError{Record: dg.Record, Offset: dg.Offset, Field: "MoldUDP64 packet",
					Reason: fmt.Sprintf("datagram to %v: %v", dg.Dst, err), Err: ErrMalformed})
			}
			continue
		}
		m.counts.Packets++
		m.off, m.lastNs = dg.Offset, dg.TsNs
		if _, started := m.tr.Session(); p.Seq == 0 && !started {
			m.unsequenced(p)
			continue
		}
		m.sequenced(p, dg.TsNs)
	}
}

// sequenced hands p to the tracker and counts what it does not.
func (m *Messages) sequenced(p mold.Packet, ns int64) {
	var before seqgap.Stats
	if p.IsEndOfSession() {
		before = m.tr.Stats()
	}
	m.tr.Packet(0, p, ns, ns, m)
	if p.IsEndOfSession() {
		// Unless the tracker dropped it, it ended the session.
		if st := m.tr.Stats(); st.Implausible == before.Implausible && st.Competing == before.Competing {
			m.counts.EndOfSession++
		}
	}
	m.tr.Tick(ns, m)
}

// unsequenced hands on the messages of p, a packet of sequence number 0
// before any sequenced one, in capture order. The first such packet makes
// the capture unsequenced and names the session followed.
func (m *Messages) unsequenced(p mold.Packet) {
	if !m.counts.Unsequenced {
		m.counts.Unsequenced, m.useq = true, p.Session
		if m.cfg.OnUnsequenced != nil {
			m.cfg.OnUnsequenced(p.Session)
		}
	}
	if p.Session != m.useq {
		m.useqOth++
		return
	}
	m.counts.UnsequencedPackets++
	switch {
	case p.IsHeartbeat():
		m.useqHB++
	case p.IsEndOfSession():
		m.counts.EndOfSession++
	default:
		m.useqData++
		it := p.Iter()
		for msg, _, ok := it.Next(); ok; msg, _, ok = it.Next() {
			m.Release(0, msg, 0, 0)
		}
	}
}

// Release implements seqgap.Output: it queues a copy of message seq.
func (m *Messages) Release(seq uint64, msg []byte, _ int, _ int64) {
	if m.counts.FirstSeq == 0 {
		m.counts.FirstSeq = seq
	}
	m.counts.Messages++
	m.buf = append(m.buf, msg...)
	m.ends = append(m.ends, len(m.buf))
}

// Event implements seqgap.Output: it counts gaps and losses, leaving out
// the range before the first message captured.
func (m *Messages) Event(ev *seqgap.Event) {
	switch ev.Kind {
	case seqgap.EventGap, seqgap.EventLost:
		if ev.Range.From == 1 {
			return // the capture started after the session did
		}
		if ev.Kind == seqgap.EventGap {
			m.counts.Gaps++
		} else {
			m.counts.Missing += ev.Range.Len()
		}
	case seqgap.EventStale, seqgap.EventFresh:
		return // capture time stands still between packets; not news
	}
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(ev)
	}
}
