package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
)

// synthetic returns the synthetic feed the feed handler and the subscriber
// make with their default --seed, --instruments and --channels, emitting
// count messages.
func synthetic(t *testing.T, count uint64) *feed.Synthetic {
	t.Helper()
	g, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 100, Channels: 4, Count: count})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// symbolCounts are what a subscriber filtering to some symbols should get,
// computed from the synthetic feed's definition.
type symbolCounts struct {
	channels       []int            // the channels carrying the symbols
	seqs           map[int][]uint64 // per channel, the sequences of the symbols' messages
	wanted, others uint64           // messages of the symbols, and the rest of those channels
}

// symbolSeqs computes symbolCounts of symbols from g: each message of each
// channel the symbols are on, as feed.Synthetic.Expect gives it.
func symbolSeqs(t *testing.T, g *feed.Synthetic, symbols []string) symbolCounts {
	t.Helper()
	chans, err := tickcast.ChannelsOf(symbols, g.Config().Channels)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range symbols {
		want[s] = true
	}
	c := symbolCounts{channels: chans, seqs: map[int][]uint64{}}
	var m feed.Msg
	for _, ch := range chans {
		for seq := uint64(1); seq <= g.ChannelCount(ch); seq++ {
			g.Expect(ch, seq, &m)
			if want[g.Symbol(m.Instrument).String()] {
				c.wanted++
				c.seqs[ch] = append(c.seqs[ch], seq)
			} else {
				c.others++
			}
		}
	}
	return c
}

// TestSymbolFilterRecovered: a subscriber filtering to two symbols loses 10%
// of its datagrams (injected) and recovers them. It receives exactly the
// messages of its symbols, as the synthetic feed's definition computes
// them, and counts exactly the rest of its channels as filtered, recovered
// messages of other instruments included; nothing is missing.
func TestSymbolFilterRecovered(t *testing.T) {
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const count = 100_000
	g := synthetic(t, count)
	symbols := []string{g.Symbol(1).String(), g.Symbol(51).String()}
	want := symbolSeqs(t, g, symbols)
	sub := start(t, ctx, subscriberBin, "--symbols", strings.Join(symbols, ","), "--group", ga, "--verify",
		"--inject-loss", "0.1", "--inject-seed", "3", "--idle-timeout", "5s")
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	// Linger so that a channel that lost its end of session can probe.
	fh := start(t, ctx, feedhandlerBin, "--count", strconv.Itoa(count), "--rate", "100000", "--group", ga, "--linger", "3s")
	if code := fh.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	code := sub.wait(t, 30*time.Second)
	s := sub.summary(t)
	received, filtered, recovered := num(t, s, "received"), num(t, s, "filtered"), num(t, s, "recovered")
	t.Logf("symbols %v on channels %v: received %d, filtered %d, missing %d, recovered %d in %d requests, injected %d messages dropped",
		symbols, s["channels"], received, filtered, num(t, s, "missing"), recovered, num(t, s, "requests"), num(t, s, "injected_dropped_messages"))
	if code != 0 || s["verify_ok"] != true || num(t, s, "missing") != 0 {
		t.Fatalf("exit %d: %v\n%s", code, s, tail(sub.stderr.String()))
	}
	if received != want.wanted || filtered != want.others {
		t.Fatalf("received %d, filtered %d; the symbols have %d messages on channels %v, the others %d",
			received, filtered, want.wanted, want.channels, want.others)
	}
	// More messages were recovered than the symbols have: some recovered
	// ones were other instruments', and filtered counts them.
	if recovered <= received || num(t, s, "injected_dropped_messages") == 0 {
		t.Fatalf("recovered %d of %d dropped messages, received %d: the loss did not reach the filtered instruments",
			recovered, num(t, s, "injected_dropped_messages"), received)
	}
	if num(t, s, "instrument_gaps") != 0 {
		t.Fatalf("%d instrument gaps with nothing missing", num(t, s, "instrument_gaps"))
	}
}
