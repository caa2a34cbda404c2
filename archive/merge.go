package archive

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud"
)

// MergeReceiver replays a channel's archive and then joins its live
// stream, with no gap and no duplicate at the switch. It implements
// ud.Receiver, so a subscriber takes it as one line.
//
// Until the switch, the consumer is lent the replay's packets, and the
// live receiver's ring holds the newest live packets: when it is more
// than three quarters full, its oldest packets are let go, since the
// archive records them too and the replay will deliver them. Each time
// the replay's ring is empty, the oldest live packet held is compared with
// what the replay has delivered (the session and the next sequence):
//
//   - live packets the replay has wholly delivered are let go;
//   - a live packet of the replay's session that starts at or before the
//     replay's next sequence is the switch point: from there on the
//     consumer is lent the live ring, and the replay is closed;
//   - if the replay has delivered every record stored (the archive's
//     tail) and the live ring is still full of packets ahead of it, the
//     switch is made there: the messages between, those not yet stored,
//     are an ordinary gap that the subscriber recovers from the feed
//     handler's store. With the live ring larger than the archive's lag
//     (RecordDelay and an acknowledgement), this does not happen.
//
// A live stream faster than the replay for a while is therefore only a
// later switch: the replay follows the archive as it grows.
type MergeReceiver struct {
	replay *ReplayReceiver
	live   ud.Receiver
	rr     ud.RingReporter // live's, for how full its ring is

	// Owned by the consumer.
	merged  bool
	have    bool // a replayed packet has been released
	session mold.Session
	next    uint64 // the sequence after the last one replayed

	switched   atomic.Bool
	switchSeq  atomic.Uint64 // the first live sequence taken
	gapAtTail  atomic.Uint64 // messages between the archive's tail and the live stream at the switch
	liveLetGo  atomic.Uint64 // live packets let go before the switch
	closeState atomic.Bool
}

var (
	_ ud.Receiver     = (*MergeReceiver)(nil)
	_ ud.Filler       = (*MergeReceiver)(nil)
	_ ud.DropSyncer   = (*MergeReceiver)(nil)
	_ ud.RingReporter = (*MergeReceiver)(nil)
)

var (
	errNoRing       = errors.New("archive: merge: the live receiver does not report its ring (ud.RingReporter)")
	errNotFollowing = errors.New("archive: merge: the replay must follow the archive (ReplayConfig.Follow)")
)

// NewMergeReceiver merges replay, which must follow the archive
// (ReplayConfig.Follow), into live, a receiver of the channel's live
// stream that reports how full its ring is (ud.RingReporter: every ring
// receiver of package ud does). It owns both.
func NewMergeReceiver(replay *ReplayReceiver, live ud.Receiver) (*MergeReceiver, error) {
	rr, ok := live.(ud.RingReporter)
	if !ok || rr.RingCap() == 0 {
		return nil, errNoRing
	}
	if !replay.cfg.Follow {
		return nil, errNotFollowing
	}
	return &MergeReceiver{replay: replay, live: live, rr: rr}, nil
}

// MaxDatagram returns the live receiver's slot size; the replay's slots
// are no larger (the subscriber sizes both).
func (m *MergeReceiver) MaxDatagram() int { return m.live.MaxDatagram() }

// Peek returns the i-th unreleased packet: the replay's before the switch,
// the live stream's after.
func (m *MergeReceiver) Peek(i int) *ud.Slot {
	if m.merged {
		return m.live.Peek(i)
	}
	s := m.replay.Peek(i)
	if s == nil && i == 0 {
		// Nothing lent: the place to look at the live stream.
		if m.poll() {
			return m.live.Peek(0)
		}
	}
	return s
}

// Release hands back the n oldest lent packets, noting how far the replay
// has delivered.
func (m *MergeReceiver) Release(n int) {
	if m.merged {
		m.live.Release(n)
		return
	}
	for i := range n {
		s := m.replay.Peek(i)
		if s == nil {
			break
		}
		if h, err := mold.DecodeHeader(s.Data()); err == nil {
			// A heartbeat's or an end of session's sequence is the next
			// one, as a data packet's end is.
			m.have, m.session, m.next = true, h.Session, h.Seq+uint64(h.Messages())
		}
	}
	m.replay.Release(n)
}

// poll lets go of live packets the replay has delivered or will deliver,
// and switches to the live stream when it may; it reports whether it
// has switched. Consumer only, with no replay packet lent.
func (m *MergeReceiver) poll() bool {
	capacity := m.rr.RingCap()
	for {
		s := m.live.Peek(0)
		if s == nil {
			return false
		}
		h, err := mold.DecodeHeader(s.Data())
		if err == nil && m.have && h.Session == m.session {
			n := uint64(h.Messages())
			switch {
			case n > 0 && h.Seq+n <= m.next, n == 0 && h.Seq < m.next:
				// Delivered by the replay already.
				m.live.Release(1)
				m.liveLetGo.Add(1)
				continue
			case h.Seq <= m.next:
				m.switchNow(h.Seq, 0)
				return true
			}
		}
		if m.rr.RingLen() <= capacity*3/4 {
			return false
		}
		if m.replay.AtTail() && m.replay.RingLen() == 0 && err == nil && m.have {
			// The replay has nothing more to give yet and the live
			// stream cannot wait: join it here.
			gap := uint64(0)
			if h.Session == m.session && h.Seq > m.next {
				gap = h.Seq - m.next
			}
			m.switchNow(h.Seq, gap)
			return true
		}
		// Ahead of the replay, which will deliver it from the archive.
		m.live.Release(1)
		m.liveLetGo.Add(1)
	}
}

// switchNow makes the live ring the consumer's and stops the replay.
func (m *MergeReceiver) switchNow(seq, gap uint64) {
	m.merged = true
	m.switchSeq.Store(seq)
	m.gapAtTail.Store(gap)
	m.switched.Store(true)
	go m.replay.Close() // it may be waiting for a record
}

// Wait waits for a packet: the replay's, looking at the live stream at
// least every millisecond, before the switch; the live stream's after.
func (m *MergeReceiver) Wait(timeout time.Duration) error {
	if m.merged {
		return m.live.Wait(timeout)
	}
	if m.Peek(0) != nil {
		return nil
	}
	if m.merged {
		return m.live.Wait(timeout)
	}
	if err := m.replay.Wait(min(timeout, time.Millisecond)); err != nil {
		// The replay ended before the switch (an error it reported, or
		// Close): the live stream is what is left.
		if m.closeState.Load() {
			return err
		}
		m.switchNow(0, 0)
		return m.live.Wait(timeout)
	}
	return nil
}

// Fill receives on the live receiver if it has no receive loop of its
// own (ud.Filler, Mode Direct), before the switch as after: the live
// packets are held from the start. It returns how many it received.
func (m *MergeReceiver) Fill() int {
	if f, ok := m.live.(ud.Filler); ok {
		return f.Fill()
	}
	return 0
}

// SyncDrops passes the call to the live receiver if it counts the
// kernel's drops (ud.DropSyncer).
func (m *MergeReceiver) SyncDrops() error {
	if d, ok := m.live.(ud.DropSyncer); ok {
		return d.SyncDrops()
	}
	return nil
}

// MergeStats are a merge's counters.
type MergeStats struct {
	Switched  bool   // the live stream has been joined
	SwitchSeq uint64 // the sequence of the first live packet taken
	GapAtTail uint64 // messages neither stored nor live at the switch, recovered as a gap
	LiveLetGo uint64 // live packets let go before the switch (replayed from the archive instead)
}

// MergeStats returns the merge's counters.
func (m *MergeReceiver) MergeStats() MergeStats {
	return MergeStats{Switched: m.switched.Load(), SwitchSeq: m.switchSeq.Load(), GapAtTail: m.gapAtTail.Load(), LiveLetGo: m.liveLetGo.Load()}
}

// Replay returns the replay receiver, for its counters.
func (m *MergeReceiver) Replay() *ReplayReceiver { return m.replay }

// Stats returns the replay's and the live receiver's counters, summed.
func (m *MergeReceiver) Stats() ud.RecvStats {
	a, b := m.replay.Stats(), m.live.Stats()
	a.Datagrams += b.Datagrams
	a.Bytes += b.Bytes
	a.Syscalls += b.Syscalls
	a.KernelDrops += b.KernelDrops
	a.RingFull += b.RingFull
	a.Truncated += b.Truncated
	a.Errors += b.Errors
	a.Coalesced += b.Coalesced
	a.RcvBuf = b.RcvBuf
	return a
}

// RingLen returns how many packets wait to be taken: the replay's before
// the switch, the live stream's after.
func (m *MergeReceiver) RingLen() int {
	if m.switched.Load() {
		return m.rr.RingLen()
	}
	return m.replay.RingLen()
}

// RingCap returns the live ring's size.
func (m *MergeReceiver) RingCap() int { return m.rr.RingCap() }

// Close closes the replay and the live receiver.
func (m *MergeReceiver) Close() error {
	m.closeState.Store(true)
	m.replay.Close()
	return m.live.Close()
}
