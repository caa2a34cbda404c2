package fh

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// watcher listens on the feed handler's own groups and counts the packets
// of another session there: another publisher on the groups, such as a
// second feed handler started on them by mistake. Each foreign session is
// logged once per channel at error level; the counts are in the metrics
// (tickcast_publisher_foreign_packets_total) and the summary
// (foreign_packets).
//
// The kernel drops the feed handler's own packets before they reach the
// watcher (udp.Config.DropPrefix, the channel's session): receiving every
// packet it sends once more, and comparing it with the store, cost the
// subscribers on the host several times their latency. So a publisher that
// sends the feed handler's own session is not seen here; subscribers see
// its packets as duplicates or as messages that fail verification.
type watcher struct {
	log      zerolog.Logger
	sessions []mold.Session // by channel: the publisher's
	counts   []atomic.Uint64
	recvs    []ud.Receiver
	chans    []int // by receiver: its channel
	wg       sync.WaitGroup

	mu   sync.Mutex
	seen map[foreignKey]bool // foreign sources already logged
}

type foreignKey struct {
	ch      int
	session mold.Session
}

// watchIdle is how long a watch loop waits for a datagram before it checks
// whether it was closed.
const watchIdle = 100 * time.Millisecond

// watchRcvBuf is the watch sockets' receive buffer: enough for a burst of
// another publisher's packets, which are counted, not kept.
const watchRcvBuf = 1 << 20

// startWatch opens a receiver on every group the publisher sends to and
// starts checking what arrives there.
func startWatch(c *Config, pub *tickcast.Publisher, log zerolog.Logger) (*watcher, error) {
	w := &watcher{log: log, sessions: pub.Sessions(), counts: make([]atomic.Uint64, c.Channels),
		seen: map[foreignKey]bool{}}
	for ch := 0; ch < c.Channels; ch++ {
		for _, base := range []netip.AddrPort{c.GroupA, c.GroupB} {
			if !base.IsValid() {
				continue // no B line
			}
			g, err := tickcast.ChannelGroup(base, ch)
			if err != nil {
				w.close()
				return nil, err
			}
			r, err := udp.NewReceiver(udp.Config{Group: g.Addr(), Port: int(g.Port()), Interface: c.Interface,
				MaxDatagram: max(c.MaxDatagram, udp.DefaultMaxDatagram), Mode: udp.Blocking, RingSlots: 256, Batch: 16, CPU: -1,
				RcvBuf: watchRcvBuf, DropPrefix: w.sessions[ch][:]})
			if err != nil {
				w.close()
				return nil, fmt.Errorf("fh: watch group %v: %w", g, err)
			}
			w.recvs = append(w.recvs, r)
			w.chans = append(w.chans, ch)
		}
	}
	for i, r := range w.recvs {
		w.wg.Add(1)
		go w.loop(w.chans[i], r)
	}
	return w, nil
}

// loop checks every datagram r receives, until r is closed.
func (w *watcher) loop(ch int, r ud.Receiver) {
	defer w.wg.Done()
	for {
		if err := r.Wait(watchIdle); errors.Is(err, ud.ErrClosed) {
			return
		}
		n := 0
		for s := r.Peek(0); s != nil; s = r.Peek(n) {
			w.check(ch, s.Data())
			n++
		}
		if n > 0 {
			r.Release(n)
		}
	}
}

// check counts datagram d, received on channel ch's group, if the feed
// handler did not send it.
func (w *watcher) check(ch int, d []byte) {
	p, err := mold.Parse(d)
	if err != nil {
		w.foreign(ch, foreignKey{ch: ch}, "malformed datagram")
		return
	}
	if p.Session != w.sessions[ch] {
		w.foreign(ch, foreignKey{ch: ch, session: p.Session}, "packets of another session on the feed's group: another publisher")
	}
}

// foreign counts a foreign packet and logs its source the first time.
func (w *watcher) foreign(ch int, key foreignKey, what string) {
	w.counts[ch].Add(1)
	w.mu.Lock()
	first := !w.seen[key]
	w.seen[key] = true
	w.mu.Unlock()
	if first {
		w.log.Error().Int("channel", ch).Str("session", key.session.String()).Str("own_session", w.sessions[ch].String()).
			Msg(what)
	}
}

// Counts returns the foreign packets counted, by channel.
func (w *watcher) Counts() []uint64 {
	out := make([]uint64, len(w.counts))
	for i := range w.counts {
		out[i] = w.counts[i].Load()
	}
	return out
}

// total returns the foreign packets counted on every channel.
func (w *watcher) total() uint64 {
	n := uint64(0)
	for i := range w.counts {
		n += w.counts[i].Load()
	}
	return n
}

// close stops the watch loops and closes the receivers.
func (w *watcher) close() {
	for _, r := range w.recvs {
		r.Close()
	}
	w.wg.Wait()
}
