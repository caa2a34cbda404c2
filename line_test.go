package tickcast

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// TestLinesAreSeqgaps: Line numbers are the ones seqgap counts lines by, and
// each names itself.
func TestLinesAreSeqgaps(t *testing.T) {
	if LineRecovery != Line(seqgap.LineRecovery) || LineA != 0 || LineB != 1 {
		t.Fatalf("LineA %d, LineB %d, LineRecovery %d; seqgap.LineRecovery %d", LineA, LineB, LineRecovery, seqgap.LineRecovery)
	}
	for l, want := range map[Line]string{LineA: "A", LineB: "B", LineRecovery: "recovery"} {
		if l.String() != want {
			t.Errorf("Line %d is %q, want %q", int(l), l.String(), want)
		}
	}
}

// wantLines returns the identities of the channels' A and B lines, each
// group being channel 0's plus the channel (computed here by hand: no
// carry for the small numbers testGroups picks).
func wantLines(a, b netip.AddrPort, chans ...int) []LineID {
	var out []LineID
	for _, ch := range chans {
		for l, base := range []netip.AddrPort{a, b} {
			x := base.Addr().As4()
			x[3] += byte(ch)
			out = append(out, LineID{Channel: ch, Line: Line(l), Group: netip.AddrPortFrom(netip.AddrFrom4(x), base.Port())})
		}
	}
	return out
}

// TestTransportsAreOpenedForTheirLine: the subscriber and the publisher call
// their transport hooks once per line, with its channel, line and group.
func TestTransportsAreOpenedForTheirLine(t *testing.T) {
	ga, gb := testGroups(t)
	var subIDs []LineID
	open := udp.Receivers(udp.Config{CPU: -1})
	sub, err := NewSubscriber(SubscriberConfig{Channels: 3, Join: []int{2, 0}, GroupA: ga, GroupB: gb,
		NewReceiver: func(id LineID, n *ud.Notifier) (ud.Receiver, error) {
			subIDs = append(subIDs, id)
			return open(id, n)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if want := wantLines(ga, gb, 2, 0); !slices.Equal(subIDs, want) {
		t.Fatalf("subscriber opened %v, want %v", subIDs, want)
	}

	var pubIDs []LineID
	send := udp.Senders(udp.Config{})
	pub, err := NewPublisher(PublisherConfig{Channels: 3, GroupA: ga, GroupB: gb,
		NewSender: func(id LineID) (ud.Sender, error) {
			pubIDs = append(pubIDs, id)
			return send(id)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if want := wantLines(ga, gb, 0, 1, 2); !slices.Equal(pubIDs, want) {
		t.Fatalf("publisher opened %v, want %v", pubIDs, want)
	}
}

// TestOpenErrorNamesTheLine: a hook's error reaches the caller with the
// channel and line it was for.
func TestOpenErrorNamesTheLine(t *testing.T) {
	ga, gb := testGroups(t)
	refused := errors.New("refused")
	_, err := NewSubscriber(SubscriberConfig{Channels: 2, Join: []int{1}, GroupA: ga, GroupB: gb,
		NewReceiver: func(id LineID, n *ud.Notifier) (ud.Receiver, error) {
			if id.Line == LineB {
				return nil, refused
			}
			return udp.Receivers(udp.Config{CPU: -1})(id, n)
		}})
	want := "tickcast: channel 1 line B: join " + wantLines(ga, gb, 1)[1].Group.String() + ": refused"
	if !errors.Is(err, refused) || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
