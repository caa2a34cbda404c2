package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud/udp"
)

// compete sends, every 20 ms until ctx is done, a heartbeat and a
// one-message packet of session onto channel ch's group of the A-line base
// ga (loopback, TTL 0), as a script trying the feed would. It returns how
// many packets it sent once ctx is done.
func compete(t *testing.T, ctx context.Context, ga string, ch int, session string) <-chan int {
	t.Helper()
	sess, err := mold.ParseSession(session)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := udp.NewSender(channelConfig(t, ga, ch))
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan int, 1)
	go func() {
		defer snd.Close()
		b, _ := mold.NewBuilder(1400)
		n := 0
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for seq := uint64(1); ; seq++ {
			select {
			case <-ctx.Done():
				sent <- n
				return
			case <-tick.C:
			}
			b.Start(sess, seq)
			b.Add([]byte("not from the feed"))
			if snd.Send([][]byte{mold.Header{Session: sess, Seq: seq}.Append(nil), b.Finish()}) == nil {
				n += 2
			}
		}
	}()
	return sent
}

// feedAndSubscriber starts a verifying subscriber on a fresh group and a
// feed handler publishing count messages at 20,000 msg/s to it, and waits
// until the feed handler publishes.
func feedAndSubscriber(t *testing.T, ctx context.Context, count int, extra ...string) (ga string, sub, fh *proc) {
	t.Helper()
	ga, _, _ = groups(t)
	// A followed session that goes silent past --stale-after may be
	// replaced by a competitor until recovery names it again: a longer
	// limit keeps a loaded host's scheduling pauses from being taken for a
	// silent feed, which is not what these tests are about.
	sub = start(t, ctx, subscriberBin, append([]string{"--verify", "--group", ga, "--idle-timeout", "10s", "--stale-after", "2s"}, extra...)...)
	sub.waitLog(t, `"subscribed"`, 10*time.Second)
	fh = start(t, ctx, feedhandlerBin, append([]string{"--count", strconv.Itoa(count), "--rate", "20000", "--group", ga, "--watch-groups"}, extra...)...)
	fh.waitLog(t, `"publishing"`, 10*time.Second)
	return ga, sub, fh
}

// wantEverything checks that the subscriber (exit code, summary s) received
// and verified all count messages and missed none.
func wantEverything(t *testing.T, sub *proc, code int, s map[string]any, count uint64) {
	t.Helper()
	if code != 0 || s["verify_ok"] != true || num(t, s, "received") != count || num(t, s, "missing") != 0 {
		t.Errorf("subscriber exit %d, verify_ok %v, received %d, missing %d: want 0, true, %d, 0\n%s",
			code, s["verify_ok"], num(t, s, "received"), num(t, s, "missing"), count, tail(sub.stderr.String()))
	}
}

// TestCompetingPublisher: while a feed handler publishes, a script sends
// heartbeats and one-message packets of a session sorting after the live one
// (01ZSA99999 on channel 1: a session of NewSession sorts after every earlier
// one, and this one after any of this century) onto the feed's group. The verifying subscriber
// stays on the feed handler's session (recovery confirms it), receives every
// message, counts the script's packets as competing and logs the competing
// session; the feed handler counts them as foreign.
//
// With authentication off (--auth=false on both) the subscriber's defence
// is the session recovery confirms, as above. With it on (the default) the
// script's packets carry no seal of a session whose keys the subscriber
// holds: each data packet is dropped before any session logic (no_key),
// each heartbeat ignored, and no competing session is ever seen.
func TestCompetingPublisher(t *testing.T) {
	t.Run("auth=false", func(t *testing.T) { testCompetingPublisher(t, false) })
	t.Run("auth=true", func(t *testing.T) { testCompetingPublisher(t, true) })
}

func testCompetingPublisher(t *testing.T, auth bool) {
	const count = 60_000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ga, sub, fh := feedAndSubscriber(t, ctx, count, "--auth="+strconv.FormatBool(auth))
	time.Sleep(300 * time.Millisecond)
	scriptCtx, stopScript := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer stopScript()
	sent := <-compete(t, scriptCtx, ga, 1, "01ZSA99999")

	if code := fh.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("feedhandler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	code := sub.wait(t, 20*time.Second)
	s, fs := sub.summary(t), fh.summary(t)
	competing, foreign := num(t, s, "competing"), num(t, fs, "foreign_packets")
	t.Logf("script sent %d packets; subscriber: received %d, missing %d, competing %d, sessions %d (abrupt %d), exit %d; feed handler: foreign_packets %d",
		sent, num(t, s, "received"), num(t, s, "missing"), competing, num(t, s, "sessions"), num(t, s, "sessions_abrupt"), code, foreign)
	if sent == 0 {
		t.Fatal("the script sent nothing")
	}
	wantEverything(t, sub, code, s, count)
	if num(t, s, "sessions_abrupt") != 0 || num(t, s, "sessions") != 4 {
		t.Errorf("sessions %d, abrupt %d: want the feed handler's 4 and no switch", num(t, s, "sessions"), num(t, s, "sessions_abrupt"))
	}
	if foreign == 0 || foreign > uint64(sent) {
		t.Errorf("feed handler counted %d foreign packets of %d sent", foreign, sent)
	}
	if auth {
		// Half the script's packets are data packets, half heartbeats.
		if noKey := num(t, s, "no_key"); competing != 0 || noKey == 0 || noKey > uint64(sent/2) {
			t.Errorf("subscriber: competing %d, no_key %d of the script's %d data packets: want 0 and all dropped as no_key", competing, noKey, sent/2)
		}
		if len(withMessage(sub.logs(), "session replaced without end of session")) != 0 {
			t.Errorf("the subscriber switched sessions:\n%s", tail(sub.stderr.String()))
		}
		return
	}
	if competing == 0 || competing > uint64(sent) {
		t.Errorf("subscriber counted %d competing packets of %d sent", competing, sent)
	}
	alarms := withMessage(sub.logs(), "competing session on the channel's groups: another publisher; its packets are dropped")
	if len(alarms) != 1 || alarms[0].Session != "01ZSA99999" || alarms[0].Channel != 1 || alarms[0].Level != "error" {
		t.Errorf("subscriber's competing-session log lines: %+v, want one error for 01ZSA99999 on channel 1", alarms)
	}
	if len(withMessage(sub.logs(), "session replaced without end of session")) != 0 {
		t.Errorf("the subscriber switched sessions:\n%s", tail(sub.stderr.String()))
	}
}

// TestSecondFeedHandler: a second feed handler started by mistake on the
// groups of a running one (its own NATS server, later sessions) is detected
// by the first, which counts its packets as foreign, while the verifying
// subscriber stays on the sessions its recovery confirms and misses nothing.
//
// With authentication on (the default), the second feed handler's keys are
// on its own NATS server: the subscriber cannot fetch them, and drops its
// data packets before any session logic (no_key).
func TestSecondFeedHandler(t *testing.T) {
	t.Run("auth=false", func(t *testing.T) { testSecondFeedHandler(t, false) })
	t.Run("auth=true", func(t *testing.T) { testSecondFeedHandler(t, true) })
}

func testSecondFeedHandler(t *testing.T, auth bool) {
	const count = 80_000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := "--auth=" + strconv.FormatBool(auth)
	ga, sub, fh1 := feedAndSubscriber(t, ctx, count, a)
	time.Sleep(time.Second)
	fh2 := launch(t, ctx, feedhandlerBin, "--nats-listen", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--linger", "300ms",
		"--count", "10000", "--rate", "10000", "--group", ga, a)
	if code := fh2.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("second feedhandler exit %d\n%s", code, tail(fh2.stderr.String()))
	}
	if code := fh1.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("first feedhandler exit %d\n%s", code, tail(fh1.stderr.String()))
	}
	code := sub.wait(t, 20*time.Second)
	s, f1, f2 := sub.summary(t), fh1.summary(t), fh2.summary(t)
	t.Logf("subscriber: received %d, missing %d, competing %d, sessions %d (abrupt %d), exit %d; foreign_packets: first feed handler %d, second %d",
		num(t, s, "received"), num(t, s, "missing"), num(t, s, "competing"), num(t, s, "sessions"), num(t, s, "sessions_abrupt"), code,
		num(t, f1, "foreign_packets"), num(t, f2, "foreign_packets"))
	wantEverything(t, sub, code, s, count)
	if auth {
		if num(t, s, "competing") != 0 || num(t, s, "no_key") == 0 || num(t, s, "sessions_abrupt") != 0 {
			t.Errorf("subscriber: competing %d, no_key %d, abrupt sessions %d: want the second feed handler's packets dropped as no_key and no switch",
				num(t, s, "competing"), num(t, s, "no_key"), num(t, s, "sessions_abrupt"))
		}
	} else if num(t, s, "competing") == 0 || num(t, s, "sessions_abrupt") != 0 {
		t.Errorf("subscriber: competing %d, abrupt sessions %d: want the second feed handler's packets counted and no switch",
			num(t, s, "competing"), num(t, s, "sessions_abrupt"))
	}
	if num(t, f1, "foreign_packets") == 0 {
		t.Errorf("the first feed handler did not detect the second\n%s", tail(fh1.stderr.String()))
	}
	if len(withMessage(fh1.logs(), "packets of another session on the feed's group: another publisher")) == 0 {
		t.Errorf("the first feed handler logged no other publisher\n%s", tail(fh1.stderr.String()))
	}
}
