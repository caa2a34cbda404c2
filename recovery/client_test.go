package recovery

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// TestClientNoFeedHandler: with nobody serving the subject, the request
// fails at once with an error that says so, not after the timeout.
func TestClientNoFeedHandler(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{})
	nc, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL()})
	c, err := NewClient(nc, ClientConfig{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, _ := mold.ParseSession("S")
	start := time.Now()
	_, err = c.Retransmit(0, mold.Request{Session: sess, Seq: 1, Count: 1})
	if err == nil || !strings.Contains(err.Error(), "no feed handler answers") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v: waited for the timeout", time.Since(start))
	}
}

// TestClientCloseFailsWaiters: a caller waiting for a reply that will never
// come is released by Close, and requests after Close fail at once.
func TestClientCloseFailsWaiters(t *testing.T) {
	ns := startNATS(t, natsconn.ServerConfig{})
	nc, _ := connectNATS(t, natsconn.ConnConfig{URL: ns.ClientURL()})
	// A responder that never answers keeps the request in flight.
	sub, err := nc.Subscribe(RetransmitSubject(DefaultFeed, 0), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c, err := NewClient(nc, ClientConfig{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sess, _ := mold.ParseSession("S")
	done := make(chan error, 1)
	go func() {
		_, err := c.Retransmit(0, mold.Request{Session: sess, Seq: 1, Count: 1})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		var re *ReplyError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, "closed") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(natsWait):
		t.Fatal("Close did not release the waiting Retransmit")
	}
	if _, err := c.Retransmit(0, mold.Request{Session: sess, Seq: 1, Count: 1}); err == nil {
		t.Fatal("Retransmit after Close succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsWait)
	defer cancel()
	if _, err := c.Snapshot(ctx, 0); err == nil || ctx.Err() != nil {
		t.Fatalf("Snapshot after Close: %v (context %v)", err, ctx.Err())
	}
}

func TestRequesterIdentity(t *testing.T) {
	for reply, want := range map[string]string{
		"_INBOX_alice.nuid1.7":  "_INBOX_alice.",
		"_INBOX_alice.nuid2.99": "_INBOX_alice.",
		"_INBOX.abc123.7":       "_INBOX.abc123.",
		"_INBOX.abc123.x.9":     "_INBOX.abc123.x.",
		"reply":                 "reply",
	} {
		if got := requester(reply); got != want {
			t.Errorf("requester(%q) = %q, want %q", reply, got, want)
		}
	}
}

// TestSnapshotRateLimited: a snapshot is charged as a full-size retransmit,
// so a requester asking for them in a loop is refused once its budget is
// spent and the publisher's lock is not held for it.
func TestSnapshotRateLimited(t *testing.T) {
	c, _, _ := filledChannel(t, StoreConfig{}, "RL00000001", 500)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}, MaxRetransmit: 1000, RateLimit: 2000}, ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), natsWait)
	defer cancel()
	for i := 0; i < 2; i++ {
		if _, err := e.cli.Snapshot(ctx, 0); err != nil {
			t.Fatalf("snapshot %d within the budget: %v", i+1, err)
		}
	}
	_, err := e.cli.Snapshot(ctx, 0)
	var re *ReplyError
	if !errors.As(err, &re) || re.Code != CodeRateLimited {
		t.Fatalf("third snapshot at once: %v, want rate-limited", err)
	}
}

// TestOutcomeOf: a failed request's error is sorted into the outcome the
// tracker takes: failed in transit (no code) is retried, and so is a range
// the answering feed handler has not published yet (another one of the feed
// has); a session that ended gives its end, any other error reply refuses
// the range.
func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want seqgap.Outcome
		next uint64
	}{
		{&ReplyError{Reason: "timed out", Err: ErrTimeout}, seqgap.AnswerRetry, 0},
		{&ReplyError{Reason: "no feed handler answers"}, seqgap.AnswerRetry, 0},
		{&ReplyError{Code: CodeNotYet, Next: 9, Ended: true}, seqgap.AnswerEnded, 9},
		{&ReplyError{Code: CodeNotYet, Next: 9}, seqgap.AnswerRetry, 0},
		{&ReplyError{Code: CodeTooOld, Oldest: 5}, seqgap.AnswerRefused, 0},
		{&ReplyError{Code: CodeUnknownSession}, seqgap.AnswerRefused, 0},
		{&ReplyError{Code: CodeRateLimited}, seqgap.AnswerRefused, 0},
	} {
		got, next := outcomeOf(c.err)
		if got != c.want || next != c.next {
			t.Errorf("%v: outcome %v next %d, want %v %d", c.err, got, next, c.want, c.next)
		}
	}
	if err := error(&ReplyError{Reason: "x", Err: ErrTimeout}); !errors.Is(err, ErrTimeout) {
		t.Errorf("%v does not wrap ErrTimeout", err)
	}
}

// TestClientConfigDefaults: a zero ClientConfig takes every documented
// default, a set field keeps its value, and a negative SnapshotAbove or
// RepairBackoff (never) stays negative.
func TestClientConfigDefaults(t *testing.T) {
	want := ClientConfig{Feed: DefaultFeed, Timeout: DefaultTimeout, MaxInflight: DefaultMaxInflight,
		QueueLen: DefaultQueueLen, MaxPerRequest: DefaultMaxPerRequest, SnapshotAbove: DefaultSnapshotAbove,
		RepairBackoff: DefaultRepairBackoff}
	if got := (ClientConfig{}).withDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("ClientConfig{}.withDefaults() = %+v, want %+v", got, want)
	}
	set := ClientConfig{Feed: "f", Timeout: time.Hour, MaxInflight: 1, QueueLen: 2, MaxPerRequest: 3, SnapshotAbove: -1, RepairBackoff: -1, Channels: []int{2}}
	if got := set.withDefaults(); !reflect.DeepEqual(got, set) {
		t.Errorf("%+v.withDefaults() = %+v", set, got)
	}
}
