package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud/udp"
)

// plainMessages counts the messages of data packet p that read as
// normalized messages in the clear (a known type at the current version),
// out of all of them.
func plainMessages(t *testing.T, p []byte) (plain, all int) {
	t.Helper()
	pk, err := mold.Parse(p)
	if err != nil {
		t.Fatalf("a data packet that does not parse as MoldUDP64: %v", err)
	}
	it := pk.Iter()
	for m, _, ok := it.Next(); ok; m, _, ok = it.Next() {
		all++
		if len(m) >= 2 && m[1] == feed.Version && feed.Size(feed.Type(m[0])) != 0 {
			plain++
		}
	}
	return plain, all
}

// TestEncryptedChannels: with --encrypt 0, channel 0's packets on the
// group keep their MoldUDP64 framing but no message in the clear, while
// channel 1's are in the clear; a verifying subscriber (authentication on,
// no setting of its own) receives every message of both, recovering 5%
// dropped on purpose through sealed retransmissions; a subscriber with
// --auth=false refuses to start, naming the encrypted channel.
func TestEncryptedChannels(t *testing.T) {
	const count = 200_000
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := strconv.Itoa(count)
	sub := start(t, ctx, subscriberBin, "--group", ga, "--inject-loss", "0.05", "--inject-seed", "5", "--verify", "--expect", n)
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	var rxs [2]*udp.Receiver
	for ch := range rxs {
		rx, err := udp.NewReceiver(channelConfig(t, ga, ch))
		if err != nil {
			t.Fatal(err)
		}
		defer rx.Close()
		rxs[ch] = rx
	}
	fh := start(t, ctx, feedhandlerBin, "--encrypt", "0", "--count", n, "--rate", "50000", "--group", ga, "--linger", "2s")
	fh.waitLog(t, `"encrypted_channels":[0]`, 10*time.Second)

	for ch, rx := range rxs {
		readCtx, stop := context.WithTimeout(ctx, 10*time.Second)
		var plain, all int
		for all < 50 && readCtx.Err() == nil {
			p := readDataPacket(readCtx, rx)
			if p == nil {
				break
			}
			pl, a := plainMessages(t, p)
			plain, all = plain+pl, all+a
		}
		stop()
		t.Logf("channel %d: %d of %d messages read in the clear", ch, plain, all)
		switch {
		case all < 50:
			t.Errorf("channel %d: %d messages read from the group in 10s", ch, all)
		case ch == 0 && plain > all/20:
			t.Errorf("encrypted channel 0: %d of %d messages in the clear", plain, all)
		case ch == 1 && plain != all:
			t.Errorf("channel 1, not encrypted: %d of %d messages in the clear", plain, all)
		}
	}

	noauth := start(t, ctx, subscriberBin, "--group", ga, "--auth=false")
	if code := noauth.wait(t, 10*time.Second); code == 0 {
		t.Error("a subscriber with --auth=false started on an encrypted channel")
	}
	if e := noauth.stderr.String(); !strings.Contains(e, "channels [0] are encrypted") {
		t.Errorf("its error does not name the encrypted channel:\n%s", tail(e))
	}

	if code := fh.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	code := sub.wait(t, 30*time.Second)
	s := sub.summary(t)
	t.Logf("subscriber: exit %d, received %d, missing %d, recovered %d (injected drops %d), unauthenticated %d, recovery_unverified %d, verify_ok %v",
		code, num(t, s, "received"), num(t, s, "missing"), num(t, s, "recovered"), num(t, s, "injected_dropped_messages"),
		num(t, s, "unauthenticated"), num(t, s, "recovery_unverified"), s["verify_ok"])
	if code != 0 || num(t, s, "received") != count || num(t, s, "missing") != 0 || s["verify_ok"] != true {
		t.Errorf("exit %d: %v\n%s", code, s, tail(sub.stderr.String()))
	}
	if inj, rec := num(t, s, "injected_dropped_messages"), num(t, s, "recovered"); inj == 0 || rec < inj {
		t.Errorf("recovered %d of %d messages dropped on purpose", rec, inj)
	}
	if num(t, s, "unauthenticated") != 0 || num(t, s, "recovery_unverified") != 0 {
		t.Errorf("packets or parts that did not open: %v", s)
	}
}
