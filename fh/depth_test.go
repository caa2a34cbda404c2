package fh

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/book"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/faults"
	"github.com/tickcast/tickcast/ud/udp"
)

// snippetPath is the real ITCH snippet (testdata/itch/README.md).
const snippetPath = "../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50"

// countingSource counts the messages taken from a source, and closes half
// when half of total have been.
type countingSource struct {
	feed.Source
	n, total int64
	half     chan struct{}
}

func (c *countingSource) Next(m *feed.Msg) error {
	err := c.Source.Next(m)
	if err == nil && atomic.AddInt64(&c.n, 1) == c.total/2 {
		close(c.half)
	}
	return err
}

// bookHandler keeps a subscriber's books, one book.Books per channel, as
// package book tells a handler to.
type bookHandler struct {
	books   []book.Books
	misfits []error // level deltas that did not fit their book
	snaps   int
	// applied, when set, is called after each message is applied.
	applied func(ch int, seq uint64)
}

func (h *bookHandler) Message(ch int, seq uint64, msg []byte, _ int64) {
	if err := h.books[ch].Apply(msg); err != nil && len(h.misfits) < 10 {
		h.misfits = append(h.misfits, err)
	}
	if h.applied != nil {
		h.applied(ch, seq)
	}
}

func (h *bookHandler) Event(ev *tickcast.Event) {
	switch ev.Kind {
	case tickcast.EventSnapshot, tickcast.EventSessionStart:
		h.books[ev.Channel].Reset()
		if ev.Kind == tickcast.EventSnapshot {
			h.snaps++
		}
	}
}

// depthSubscriber is a tickcast.Subscriber with recovery over NATS, its
// lines wrapped in fault injection, feeding a bookHandler.
type depthSubscriber struct {
	sub  *tickcast.Subscriber
	h    *bookHandler
	done chan error
}

// startDepthSubscriber starts a depthSubscriber that runs until every
// channel's session has ended, or for at most limit. applied, if not nil,
// is its handler's (bookHandler.applied).
func startDepthSubscriber(t *testing.T, natsURL string, group netip.AddrPort, channels int, inject faults.Config, conflate bool,
	limit time.Duration, applied func(ch int, seq uint64)) *depthSubscriber {
	t.Helper()
	nc, err := natsconn.Connect(natsconn.ConnConfig{URL: natsURL, Name: "depth-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	rec, err := recovery.NewClient(nc, recovery.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	newReceiver := udp.Receivers(udp.Config{})
	inject.CountMessages = mold.MessageCount
	seed := uint64(0)
	sub, err := tickcast.NewSubscriber(tickcast.SubscriberConfig{
		Channels: channels, GroupA: group, Recovery: rec,
		// As the reference subscriber with recovery: a gap waits this
		// long for recovery before it is reported lost.
		Tracker:  seqgap.Config{LostAfter: 5 * time.Second},
		Conflate: tickcast.ConflateConfig{On: conflate, Threshold: 1},
		NewReceiver: func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
			r, err := newReceiver(id, n)
			if err != nil || !inject.Enabled() {
				return r, err
			}
			seed++
			cfg := inject
			cfg.Seed = faults.DeriveSeed(inject.Seed, seed)
			return faults.Wrap(r, cfg)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	s := &depthSubscriber{sub: sub, h: &bookHandler{books: make([]book.Books, channels), applied: applied}, done: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	go func() { s.done <- sub.Run(ctx, s.h, sub.AllEnded) }()
	return s
}

// topLevels is a copy of the top levels of a feed handler's books: per
// instrument (stock locate) and side, best first.
type topLevels map[uint32][]itch.Level

func topKey(locate uint16, side feed.Side) uint32 { return uint32(locate)<<8 | uint32(side) }

// copyTop copies the top depth levels of every book in b.
func copyTop(b *itch.Books, depth int) topLevels {
	top := topLevels{}
	for l := range 1 << 16 {
		for _, side := range []feed.Side{feed.SideBuy, feed.SideSell} {
			if lv := b.Levels(uint16(l), byte(side), nil); len(lv) > 0 {
				top[topKey(uint16(l), side)] = lv[:min(len(lv), depth)]
			}
		}
	}
	return top
}

// sameBooks compares the subscriber's books with the top depth levels of
// the feed handler's books, every instrument and side.
func sameBooks(fhBooks *itch.Books, subBooks []book.Books, depth int) error {
	return sameTop(copyTop(fhBooks, depth), subBooks)
}

// sameTop compares the subscriber's books with a copy of the feed
// handler's top levels, every instrument and side.
func sameTop(top topLevels, subBooks []book.Books) error {
	compared := 0
	for l := range 1 << 16 {
		locate := uint16(l)
		var held *book.Book
		for i := range subBooks {
			if b := subBooks[i].Book(uint32(locate)); b != nil && b.Len(feed.SideBuy)+b.Len(feed.SideSell) > 0 {
				if held != nil {
					return fmt.Errorf("instrument %d has levels on two channels", locate)
				}
				held = b
			}
		}
		for _, side := range []feed.Side{feed.SideBuy, feed.SideSell} {
			want := top[topKey(locate, side)]
			var got []book.Level
			if held != nil {
				got = held.Depth(side, held.Len(side))
			}
			if len(got) != len(want) {
				return fmt.Errorf("instrument %d side %c: %d levels, the feed handler's top levels are %d", locate, side, len(got), len(want))
			}
			for i, w := range want {
				if g := got[i]; g.Px != int64(w.Price) || g.Size != w.Shares || g.Orders != w.Orders {
					return fmt.Errorf("instrument %d side %c level %d: %+v, the feed handler has %+v", locate, side, i, g, w)
				}
			}
			compared += len(want)
		}
	}
	if compared == 0 {
		return fmt.Errorf("no levels to compare")
	}
	return nil
}

// TestDepthSubscribersMatchBooks publishes the real ITCH snippet with
// --depth 10 from an in-process feed handler to three subscribers: one
// losing 5% of its datagrams and recovering them over NATS, one joining
// halfway (it loads the snapshot), and one conflating. When the session
// has ended, every subscriber's books equal the feed handler's aggregated
// books, top 10 levels of each side, of every instrument.
func TestDepthSubscribersMatchBooks(t *testing.T) {
	f, err := os.Open(snippetPath)
	if err != nil {
		t.Skipf("the real ITCH snippet is not here: %v", err)
	}
	defer f.Close()
	const channels, depth = 4, 10
	src, err := itch.NewSource(f, itch.Config{Depth: depth, OrderCapacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	// The snippet normalizes to 1,110 messages at depth 10 (cmd/feedhandler
	// TestDryRunDepth counts them); half is when the late joiner joins.
	counted := &countingSource{Source: src, total: 1110, half: make(chan struct{})}
	group := testGroup(t)
	var logs testenv.SyncBuffer
	h, err := New(Config{
		Source: counted, SourceName: "itch:snippet", Channels: channels, GroupA: group, Rate: 1500,
		NATSListen: "127.0.0.1:0", Linger: 3 * time.Second, Log: zerolog.New(&logs),
		// A store of 100 messages per channel: the late joiner's first
		// messages are too old to replay, so it loads the snapshot.
		StoreMessages: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lossy := startDepthSubscriber(t, h.NATSURL(), group, channels, faults.Config{Seed: 13, Loss: 0.05}, false, time.Minute, nil)
	conflating := startDepthSubscriber(t, h.NATSURL(), group, channels, faults.Config{}, true, time.Minute, nil)
	var late *depthSubscriber
	runDone := make(chan error, 1)
	go func() {
		_, err := h.Run(context.Background())
		runDone <- err
	}()
	select {
	case <-counted.half:
		late = startDepthSubscriber(t, h.NATSURL(), group, channels, faults.Config{}, false, time.Minute, nil)
	case err := <-runDone:
		t.Fatalf("Run ended before half the feed: %v\n%s", err, logs.String())
	}
	subs := []struct {
		name string
		s    *depthSubscriber
	}{{"lossy", lossy}, {"late", late}, {"conflating", conflating}}
	for _, s := range subs {
		if err := <-s.s.done; err != nil {
			t.Fatalf("%s subscriber: %v", s.name, err)
		}
	}
	// Run ends after its linger; the source was done before the end of
	// session went out, and its books are read after Run.
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	for _, s := range subs {
		st := s.s.sub.Stats()
		t.Logf("%s: released %d, recovered %d, missing %d, snapshots %d, conflated %d", s.name, st.Messages, st.Recovered, st.Missing, st.Snapshots, st.Conflated)
		if st.Missing != 0 || len(s.s.h.misfits) > 0 {
			t.Errorf("%s subscriber: %d missing, level deltas that did not fit: %v", s.name, st.Missing, s.s.h.misfits)
		}
		switch {
		case s.name == "lossy" && st.Recovered == 0:
			t.Errorf("lossy subscriber recovered nothing: no loss was exercised")
		case s.name == "late" && (s.s.h.snaps == 0 || st.Snapshots == 0):
			t.Errorf("late subscriber loaded no snapshot")
		}
		if err := sameBooks(src.Books(), s.s.h.books, depth); err != nil {
			t.Errorf("%s subscriber: %v", s.name, err)
		}
	}
}
