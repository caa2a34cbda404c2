package tickcast

import (
	"testing"
	"time"

	"github.com/tickcast/tickcast/seqgap"
)

// shortStatsInterval makes the polling goroutines publish their counters on
// every poll for the rest of the test.
func shortStatsInterval(t *testing.T) {
	old := statsInterval
	statsInterval = 0
	t.Cleanup(func() { statsInterval = old })
}

// countObserver is an Observer and a PublisherObserver that counts its
// calls.
type countObserver struct {
	released, recovered, flushes, flushed, packets uint64
}

func (o *countObserver) Released(ch int, sendNs, recvNs, nowNs int64) { o.released++ }
func (o *countObserver) Recovered(ch int, latency time.Duration)      { o.recovered++ }
func (o *countObserver) Flush()                                       { o.flushes++ }
func (o *countObserver) Flushed(ch int, waitNs int64)                 { o.flushed++ }
func (o *countObserver) Packet(ch int, messages int)                  { o.packets++ }

// TestPublishPollAllocsWithObservers is TestPublishPollAllocs with
// observers set on the publisher and the subscriber and the counters
// published on every poll: calling the observers adds no allocation per
// message (package tickprom checks that its observers allocate nothing).
func TestPublishPollAllocsWithObservers(t *testing.T) {
	shortStatsInterval(t)
	var pubObs, subObs countObserver
	f := newObservedBenchFeed(t, true, &pubObs, &subObs)
	checkPublishPollAllocs(t, f)
	if subObs.released != f.sub.Stats().Messages || subObs.flushes == 0 {
		t.Errorf("subscriber observer: %d releases of %d messages, %d flushes", subObs.released, f.sub.Stats().Messages, subObs.flushes)
	}
	if pubObs.packets != f.pub.Stats().Packets || pubObs.flushed == 0 {
		t.Errorf("publisher observer: %d packets of %d, %d flushes", pubObs.packets, f.pub.Stats().Packets, pubObs.flushed)
	}
}

func TestChannelCountsEvents(t *testing.T) {
	var c channelCounts
	c.event(&seqgap.Event{Kind: seqgap.EventLost, Reason: seqgap.LossTimeout, Range: seqgap.Range{From: 5, To: 9}})
	c.event(&seqgap.Event{Kind: seqgap.EventLost, Reason: seqgap.LossWindowFull, Range: seqgap.Range{From: 20, To: 20}})
	c.event(&seqgap.Event{Kind: seqgap.EventStale})
	if c.missing[seqgap.LossTimeout] != 5 || c.missing[seqgap.LossWindowFull] != 1 || !c.stale {
		t.Fatalf("%+v", c)
	}
	c.event(&seqgap.Event{Kind: seqgap.EventFresh})
	if c.stale {
		t.Fatal("still stale after fresh")
	}
}
