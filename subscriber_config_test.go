package tickcast

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud"
)

// TestSubscriberConfigErrors: NewSubscriber refuses each bad field with a
// *config.Error naming it, before it opens any line; a bad Tracker field
// comes back as seqgap's.
func TestSubscriberConfigErrors(t *testing.T) {
	ga := netip.MustParseAddrPort("239.77.0.1:31001")
	opened := 0
	nr := func(LineID, *ud.Notifier) (ud.Receiver, error) {
		opened++
		return nil, errors.New("not reached")
	}
	for _, tc := range []struct {
		cfg          SubscriberConfig
		pkg, st, fld string
	}{
		{SubscriberConfig{Channels: 0, GroupA: ga, NewReceiver: nr}, "tickcast", "SubscriberConfig", "Channels"},
		{SubscriberConfig{Channels: config.MaxChannels + 1, GroupA: ga, NewReceiver: nr}, "tickcast", "SubscriberConfig", "Channels"},
		{SubscriberConfig{Channels: 2, GroupA: ga}, "tickcast", "SubscriberConfig", "NewReceiver"},
		{SubscriberConfig{Channels: 2, Join: []int{1, 2}, GroupA: ga, NewReceiver: nr}, "tickcast", "SubscriberConfig", "Join"},
		{SubscriberConfig{Channels: 2, Join: []int{-1}, GroupA: ga, NewReceiver: nr}, "tickcast", "SubscriberConfig", "Join"},
		{SubscriberConfig{Channels: 2, GroupA: netip.MustParseAddrPort("10.0.0.1:1"), NewReceiver: nr}, "tickcast", "SubscriberConfig", "GroupA"},
		{SubscriberConfig{Channels: 2, GroupA: ga, GroupB: netip.MustParseAddrPort("10.0.0.1:1"), NewReceiver: nr}, "tickcast", "SubscriberConfig", "GroupB"},
		{SubscriberConfig{Channels: 2, GroupA: ga, NewReceiver: nr, Tracker: seqgap.Config{Window: 3}}, "seqgap", "Config", "Window"},
		{SubscriberConfig{Channels: 2, Symbols: []string{"AAPL", "TOOLONGSYM"}, GroupA: ga, NewReceiver: nr}, "tickcast", "SubscriberConfig", "Symbols"},
		{SubscriberConfig{Channels: 2, GroupA: ga, NewReceiver: nr, SpinWait: -time.Microsecond}, "tickcast", "SubscriberConfig", "SpinWait"},
		{SubscriberConfig{Channels: 2, GroupA: ga, NewReceiver: nr, SpinWait: 2 * time.Second}, "tickcast", "SubscriberConfig", "SpinWait"},
	} {
		_, err := NewSubscriber(tc.cfg)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Pkg != tc.pkg || ce.Struct != tc.st || ce.Field != tc.fld {
			t.Errorf("NewSubscriber(%+v): error %v, want a *config.Error for %s.%s", tc.cfg, err, tc.st, tc.fld)
		}
	}
	if opened != 0 {
		t.Errorf("%d lines opened for configurations that were refused", opened)
	}
}

// TestSubscriberConfigJoinsAll: an empty Join means every channel, or with
// Symbols the channels that carry them; a set one is kept as it is.
func TestSubscriberConfigJoinsAll(t *testing.T) {
	if got := (SubscriberConfig{Channels: 3}).withDefaults().Join; !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("Join of 3 channels defaults to %v, want [0 1 2]", got)
	}
	if got := (SubscriberConfig{Channels: 3, Join: []int{2}}).withDefaults().Join; !slices.Equal(got, []int{2}) {
		t.Errorf("Join [2] became %v", got)
	}
	// With 16 channels AAPL is on channel 11 and MSFT on 3
	// (docs/operations.md, "Symbol filters and channels").
	if got := (SubscriberConfig{Channels: 16, Symbols: []string{"AAPL", "MSFT"}}).withDefaults().Join; !slices.Equal(got, []int{3, 11}) {
		t.Errorf("Join of the symbols AAPL and MSFT on 16 channels defaults to %v, want [3 11]", got)
	}
}
