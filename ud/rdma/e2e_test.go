// End to end over the verbs transport, in the Soft-RoCE VM: a publisher and
// two subscribers built on rdma.Senders and rdma.Receivers.

//go:build linux && cgo && rdma

package rdma_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/verify"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/rdma"
)

// checker is a tickcast.Handler that verifies every message against the
// synthetic feed and that each channel's sequence has no hole.
type checker struct {
	v        *verify.Verifier
	next     map[int]uint64
	messages uint64
	lost     uint64
	err      error
}

func (c *checker) Message(ch int, seq uint64, msg []byte, _ int64) {
	if c.next[ch] == 0 {
		c.next[ch] = 1
	}
	if seq != c.next[ch] && c.err == nil {
		c.err = fmt.Errorf("channel %d: seq %d, want %d", ch, seq, c.next[ch])
	}
	c.next[ch] = seq + 1
	if err := c.v.Check(ch, seq, msg); err != nil && c.err == nil {
		c.err = err
	}
	c.messages++
}

func (c *checker) Event(ev *tickcast.Event) {
	switch ev.Kind {
	case tickcast.EventLost:
		c.lost += ev.Range.To - ev.Range.From + 1
		c.next[ev.Channel] = ev.Range.To + 1
	case tickcast.EventSessionStart:
		c.next[ev.Channel] = 1
	}
}

// TestPublishSubscribe publishes a synthetic feed on A and B lines over
// RDMA and has two subscribers verify every message.
func TestPublishSubscribe(t *testing.T) {
	a := iface(t)
	syn := feed.SyntheticConfig{Seed: 7, Instruments: 40, Channels: 2, Count: 5_000}
	ga := netip.AddrPortFrom(netip.MustParseAddr("239.193.0.1"), 31001)
	gb := netip.AddrPortFrom(netip.MustParseAddr("239.194.0.1"), 31001)
	rc := rdma.Config{Interface: a, RingSlots: 1024, CPU: -1}

	type sub struct {
		s *tickcast.Subscriber
		c *checker
	}
	var subs []sub
	for i := 0; i < 2; i++ {
		s, err := tickcast.NewSubscriber(tickcast.SubscriberConfig{Channels: syn.Channels, GroupA: ga, GroupB: gb,
			NewReceiver: rdma.Receivers(rc)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		v, err := verify.New(syn)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub{s, &checker{v: v, next: map[int]uint64{}}})
	}

	// Count what the senders send, for the harness's counter check.
	var senders []*rdma.Sender
	open := rdma.Senders(rc)
	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{Channels: syn.Channels, GroupA: ga, GroupB: gb,
		NewSender: func(id ud.LineID) (ud.Sender, error) {
			s, err := open(id)
			if err == nil {
				senders = append(senders, s.(*rdma.Sender))
			}
			return s, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(subs))
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.s.Run(ctx, s.c, s.s.AllEnded)
		}()
	}
	src, _ := feed.NewSynthetic(syn)
	start := time.Now()
	if err := pub.Run(ctx, src, tickcast.RunConfig{Rate: 50_000}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	// The senders are closed, their counters final: every datagram they
	// count was posted and completed.
	var dgrams uint64
	for _, s := range senders {
		dgrams += s.Stats().Datagrams
	}
	sent.Add(dgrams)
	wg.Wait()
	t.Logf("published %d messages in %d datagrams over %d RDMA senders in %v: %+v",
		syn.Count, dgrams, len(senders), time.Since(start).Round(time.Millisecond), pub.Stats())
	for i, s := range subs {
		st := s.s.Stats()
		t.Logf("subscriber %d: %d messages, stats %+v", i, s.c.messages, st)
		if errs[i] != nil {
			t.Errorf("subscriber %d: %v", i, errs[i])
		}
		if s.c.err != nil {
			t.Errorf("subscriber %d: %v", i, s.c.err)
		}
		if s.c.messages != syn.Count || s.c.lost != 0 || st.Missing != 0 {
			t.Errorf("subscriber %d: %d messages, %d lost, want %d and none lost", i, s.c.messages, s.c.lost, syn.Count)
		}
	}
}
