package fh

import (
	"context"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/ud/faults"
)

// bookMessagesEnv sets the ITCH messages of TestDepthSyntheticMatchesBooks
// (default defaultBookMessages): CI's book check runs 10,000,000.
const bookMessagesEnv = "TICKCAST_BOOK_MESSAGES"

const defaultBookMessages = 1_000_000

// checkpointSource records a copy of the feed handler's top levels after
// about every every-th message it hands out: after the first message from
// then on that leaves the source settled (itch.Source.Settled: the books
// hold what the messages so far say). With one channel, message n is
// sequence n, so a subscriber that has applied sequence n compares its
// books with the copy taken at n.
type checkpointSource struct {
	*itch.Source
	depth int
	every uint64

	n, next uint64
	mu      sync.Mutex
	tops    map[uint64]topLevels
}

func (c *checkpointSource) Next(m *feed.Msg) error {
	err := c.Source.Next(m)
	if err != nil {
		return err
	}
	if c.n++; c.n >= c.next && c.Settled() {
		top := copyTop(c.Books(), c.depth)
		c.mu.Lock()
		c.tops[c.n] = top
		c.mu.Unlock()
		c.next += c.every
	}
	return nil
}

// at returns the copy taken at sequence seq, if one was.
func (c *checkpointSource) at(seq uint64) (topLevels, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	top, ok := c.tops[seq]
	return top, ok
}

// TestDepthSyntheticMatchesBooks publishes a generated ITCH day (8,000
// stocks, package itchgen) with --depth 10 from an in-process feed handler
// to a subscriber that loses 1% of its datagrams and recovers them over
// NATS. At about every twentieth of the day (checkpointSource), and at its
// end, the subscriber's books equal the feed handler's top 10 levels at the
// same sequence, every instrument and side. TICKCAST_BOOK_MESSAGES sets the
// day's length (1,000,000 ITCH messages by default).
func TestDepthSyntheticMatchesBooks(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: a day of a million messages; TestDepthSubscribersMatchBooks checks the books on the real snippet")
	}
	messages := uint64(defaultBookMessages)
	if v := os.Getenv(bookMessagesEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < 100_000 {
			t.Fatalf("%s=%q: want a number of ITCH messages, at least 100000", bookMessagesEnv, v)
		}
		messages = n
	}
	const depth, stocks = 10, 8000
	// The live population a day of this length holds: a million orders
	// for a day of ten million messages or more, as docs/scale.md measures.
	orders := int(min(messages/10, 1_000_000))
	gen, err := itchgen.New(itchgen.Config{Seed: 11, Stocks: stocks, Orders: orders, Messages: messages})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { _, err := gen.WriteTo(pw); pw.CloseWithError(err) }()
	defer pr.Close()
	src, err := itch.NewSource(pr, itch.Config{Depth: depth, OrderCapacity: 2 * orders})
	if err != nil {
		t.Fatal(err)
	}
	// Twenty checkpoints; a day normalizes to more messages than it has
	// ITCH messages, so they all fall inside it.
	cp := &checkpointSource{Source: src, depth: depth, every: messages / 20, tops: map[uint64]topLevels{}}
	cp.next = cp.every
	group := testGroup(t)
	var logs testenv.SyncBuffer
	h, err := New(Config{
		Source: cp, SourceName: "itchgen", Channels: 1, GroupA: group, Rate: 400_000,
		NATSListen: "127.0.0.1:0", Linger: 3 * time.Second, Log: zerolog.New(&logs).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	var checked []uint64
	var mismatch error
	var sub *depthSubscriber
	sub = startDepthSubscriber(t, h.NATSURL(), group, 1, faults.Config{Seed: 17, Loss: 0.01}, false, 10*time.Minute,
		func(_ int, seq uint64) {
			if mismatch != nil {
				return
			}
			top, ok := cp.at(seq)
			if !ok {
				return
			}
			checked = append(checked, seq)
			if err := sameTop(top, sub.h.books); err != nil {
				mismatch = err
				t.Errorf("at sequence %d: %v", seq, err)
			}
		})
	start := time.Now()
	_, err = h.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	if err := <-sub.done; err != nil {
		t.Fatalf("subscriber: %v", err)
	}
	st := sub.sub.Stats()
	t.Logf("%d ITCH messages (peak %d live orders) normalized to %d messages in %v; subscriber: released %d, recovered %d, missing %d, snapshots %d; books compared at %d sequences and at the end",
		messages, gen.HighWater(), cp.n, time.Since(start).Round(time.Millisecond), st.Messages, st.Recovered, st.Missing, st.Snapshots, len(checked))
	if gen.Generated() != messages || cp.n < messages {
		t.Fatalf("the feed handler published %d messages of a day of %d ITCH messages (%d generated): it ended early\n%s", cp.n, messages, gen.Generated(), logs.String())
	}
	if st.Missing != 0 || len(sub.h.misfits) > 0 || st.Messages != cp.n {
		t.Errorf("subscriber released %d of %d, %d missing; level deltas that did not fit: %v", st.Messages, cp.n, st.Missing, sub.h.misfits)
	}
	if st.Recovered == 0 {
		t.Errorf("the subscriber recovered nothing: no loss was exercised")
	}
	if len(checked) < 20 {
		t.Errorf("books compared at %d sequences, want 20: %v", len(checked), checked)
	}
	if err := sameBooks(src.Books(), sub.h.books, depth); err != nil {
		t.Errorf("at the end: %v", err)
	}
}
