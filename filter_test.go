package tickcast

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/verify"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/faults"
	"github.com/tickcast/tickcast/ud/udp"
)

// filterPick returns k symbols of the synthetic feed g (every n/k-th
// instrument, n the feed's instruments) and their ids.
func filterPick(g *feed.Synthetic, k int) ([]string, map[uint32]bool) {
	n := g.Config().Instruments
	var syms []string
	want := map[uint32]bool{}
	for i := 0; i < k; i++ {
		id := uint32(1 + i*n/k)
		syms = append(syms, g.Symbol(id).String())
		want[id] = true
	}
	return syms, want
}

// filterExpect counts, from the synthetic feed's definition alone, the
// messages of channels chans whose instrument is in want and the others.
func filterExpect(g *feed.Synthetic, chans []int, want map[uint32]bool) (wanted, rest uint64) {
	var m feed.Msg
	for _, c := range chans {
		for seq := uint64(1); seq <= g.ChannelCount(c); seq++ {
			g.Expect(c, seq, &m)
			if want[m.Instrument] {
				wanted++
			} else {
				rest++
			}
		}
	}
	return wanted, rest
}

// filterRecorder is a Handler that verifies every message against the
// synthetic feed, checks its instrument is wanted, and counts messages,
// lost messages and instrument gaps.
type filterRecorder struct {
	v        *verify.Verifier
	want     map[uint32]bool
	messages uint64
	lost     uint64
	instGaps map[uint32]int
	err      error
}

func (r *filterRecorder) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *filterRecorder) Message(ch int, seq uint64, msg []byte, recvNs int64) {
	r.messages++
	if inst := binary.LittleEndian.Uint32(msg[4:]); !r.want[inst] {
		r.fail(fmt.Errorf("channel %d seq %d: instrument %d was not asked for", ch, seq, inst))
	}
	if err := r.v.Check(ch, seq, msg); err != nil {
		r.fail(err)
	}
}

func (r *filterRecorder) Event(ev *Event) {
	switch ev.Kind {
	case EventLost:
		r.lost += ev.Range.Len()
	case EventInstrumentGap:
		r.instGaps[ev.Instrument]++
	}
}

// TestSymbolFilter publishes a synthetic feed over loopback multicast to a
// subscriber that asks for K of its symbols. Without loss, the handler gets
// exactly the messages of those instruments, as the feed's definition
// computes them, and Filtered is exactly the rest of the joined channels.
// With injected loss (no recovery), every message is still accounted for
// (received + filtered + missing = published) and instrument gaps are
// reported for wanted instruments only.
func TestSymbolFilter(t *testing.T) {
	for _, loss := range []float64{0, 0.02} {
		t.Run(fmt.Sprintf("loss=%v", loss), func(t *testing.T) { testSymbolFilter(t, loss) })
	}
}

func testSymbolFilter(t *testing.T, loss float64) {
	ga, _ := testGroups(t)
	syn := feed.SyntheticConfig{Seed: 7, Instruments: 60, Channels: 4, Count: 40_000}
	g, err := feed.NewSynthetic(syn)
	if err != nil {
		t.Fatal(err)
	}
	syms, want := filterPick(g, 5)
	joins, err := ChannelsOf(syms, syn.Channels)
	if err != nil {
		t.Fatal(err)
	}
	wantMsgs, wantFiltered := filterExpect(g, joins, want)
	if len(joins) == syn.Channels || wantMsgs == 0 || wantFiltered == 0 {
		t.Fatalf("symbols %v on channels %v: %d wanted, %d others: pick symbols that leave a channel out and share one", syms, joins, wantMsgs, wantFiltered)
	}

	udpc := udp.Config{RingSlots: 8192, Mode: ud.Blocking, CPU: -1}
	newReceiver := udp.Receivers(udpc)
	if loss > 0 {
		inner := newReceiver
		newReceiver = func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
			r, err := inner(id, n)
			if err != nil {
				return nil, err
			}
			return faults.Wrap(r, faults.Config{Seed: uint64(id.Channel) + 1, Loss: loss})
		}
	}
	sub, err := NewSubscriber(SubscriberConfig{Channels: syn.Channels, Symbols: syms, GroupA: ga, NewReceiver: newReceiver,
		Tracker: seqgap.Config{LostAfter: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !slices.Equal(sub.Channels(), joins) {
		t.Fatalf("joined %v, want the channels of %v: %v", sub.Channels(), syms, joins)
	}
	pub, err := NewPublisher(PublisherConfig{Channels: syn.Channels, GroupA: ga, NewSender: udp.Senders(udpc)})
	if err != nil {
		t.Fatal(err)
	}
	pubDone := make(chan error, 1)
	go func() {
		err := pub.Run(context.Background(), g, RunConfig{Rate: 100_000})
		if err == nil {
			err = pub.Close()
		}
		pubDone <- err
	}()
	rec := &filterRecorder{want: want, instGaps: map[uint32]int{}}
	if rec.v, err = verify.New(syn); err != nil {
		t.Fatal(err)
	}
	total := wantMsgs + wantFiltered
	done := func() bool {
		st := sub.Stats()
		return sub.AllEnded() || st.Messages+st.Filtered+st.Missing >= total
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sub.Run(ctx, rec, done); err != nil {
		t.Fatalf("subscriber: %v (stats %+v)", err, sub.Stats())
	}
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	st := sub.Stats()
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	if st.Messages != rec.messages || st.Missing != rec.lost {
		t.Fatalf("stats say %d released and %d missing, the handler saw %d and %d", st.Messages, st.Missing, rec.messages, rec.lost)
	}
	if loss == 0 {
		if st.Missing != 0 || rec.messages != wantMsgs || st.Filtered != wantFiltered {
			t.Fatalf("received %d, filtered %d, missing %d; want %d, %d, 0 (stats %+v)",
				rec.messages, st.Filtered, st.Missing, wantMsgs, wantFiltered, st)
		}
		defined := 0
		for _, c := range joins {
			defined += len(g.ChannelInstruments(c))
		}
		if cov := sub.SymbolCoverage(); len(cov.Unseen) != 0 || cov.Defined != defined || len(cov.Examples) == 0 {
			t.Fatalf("symbol coverage %+v: want every symbol seen and %d instruments defined on channels %v", cov, defined, joins)
		}
		return
	}
	if got := rec.messages + st.Filtered + st.Missing; got != total {
		t.Fatalf("received %d + filtered %d + missing %d = %d, published %d on channels %v",
			rec.messages, st.Filtered, st.Missing, got, total, joins)
	}
	if st.Missing == 0 || len(rec.instGaps) == 0 {
		t.Fatalf("%d missing, instrument gaps %v: the injected loss did not touch a wanted instrument", st.Missing, rec.instGaps)
	}
	gaps := 0
	for inst, n := range rec.instGaps {
		if !want[inst] {
			t.Errorf("instrument gap event of instrument %d, which was filtered out", inst)
		}
		gaps += n
	}
	if uint64(gaps) != st.InstrumentGaps {
		t.Fatalf("%d instrument gap events, stats say %d", gaps, st.InstrumentGaps)
	}
}

// TestSymbolFilterPollAllocs checks that a filtering subscriber's Poll
// allocates nothing per message: the filter's table is allocated when the
// channel is joined.
func TestSymbolFilterPollAllocs(t *testing.T) {
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: benchInstruments, Channels: benchChannels})
	if err != nil {
		t.Fatal(err)
	}
	// One symbol of each channel, so that every channel filters.
	var syms []string
	for _, c := range src.ActiveChannels() {
		syms = append(syms, src.Symbol(src.ChannelInstruments(c)[0]).String())
	}
	f := newFilterBenchFeed(t, syms)
	checkPublishPollAllocs(t, f)
	st := f.sub.Stats()
	if st.Filtered == 0 || st.Messages == 0 || st.Messages >= st.Filtered {
		t.Fatalf("%d released, %d filtered: want a few of %d instruments released and the rest filtered", st.Messages, st.Filtered, benchInstruments)
	}
}

// TestSymbolCoverage: the symbols no definition named are reported, in the
// order configured, with the number of instruments defined; a definition
// seen again (recovery, snapshot) is counted once.
func TestSymbolCoverage(t *testing.T) {
	cfg := SubscriberConfig{Symbols: []string{"AAPL", "AAAC", "QQQ"}}
	want := newSymbolSet(cfg.Symbols)
	s := &Subscriber{cfg: cfg, chans: []*subChannel{{filter: newChannelFilter(want)}, {filter: newChannelFilter(want)}}}
	def := func(sc *subChannel, id uint32, sym string) {
		t.Helper()
		var m feed.Msg
		m.Type, m.Instrument, m.InstSeq = feed.TypeDefinition, id, 1
		var err error
		if m.Def.Symbol, err = feed.MakeSymbol(sym); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, feed.DefinitionLen)
		if _, err := m.Encode(b); err != nil {
			t.Fatal(err)
		}
		sc.filter.stream(b)
	}
	if cov := s.SymbolCoverage(); !slices.Equal(cov.Unseen, cfg.Symbols) || cov.Defined != 0 {
		t.Fatalf("before any definition: %+v, want every symbol unseen and none defined", cov)
	}
	def(s.chans[0], 1, "AAAB")
	def(s.chans[1], 2, "AAAC")
	def(s.chans[0], 3, "AAAD")
	def(s.chans[0], 1, "AAAB")
	cov := s.SymbolCoverage()
	if !slices.Equal(cov.Unseen, []string{"AAPL", "QQQ"}) || cov.Defined != 3 || !slices.Equal(cov.Examples, []string{"AAAB", "AAAD", "AAAC"}) {
		t.Fatalf("coverage %+v: want AAPL and QQQ unseen, 3 defined, examples AAAB AAAD AAAC", cov)
	}
	if cov := (&Subscriber{}).SymbolCoverage(); cov.Unseen != nil || cov.Defined != 0 {
		t.Fatalf("without a filter: %+v, want zero", cov)
	}
}
