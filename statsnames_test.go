package tickcast

import (
	"reflect"
	"testing"

	"github.com/tickcast/tickcast/seqgap"
)

// TestTrackerStatsNames checks that every counter of seqgap.Stats that
// SubscriberStats sums keeps its name there, so that a counter has one name
// from the tracker to the JSON summary; the others are listed with the
// reason.
func TestTrackerStatsNames(t *testing.T) {
	notSummed := map[string]string{
		"Packets":           "SubscriberStats.Packets counts the datagrams taken from the rings, foreign and malformed ones included",
		"PacketsOnLine":     "summed per line into PacketsA and PacketsB",
		"WinsPerLine":       "summed per line into WinsA and WinsB",
		"Heartbeats":        "per channel only (ChannelStats.Tracker)",
		"OversizeReordered": "per channel only (ChannelStats.Tracker)",
		"IgnoredRecov":      "per channel only (ChannelStats.Tracker)",
		"Probes":            "per channel only (ChannelStats.Tracker)",
		"Implausible":       "per channel only (ChannelStats.Tracker)",
		"Queries":           "per channel only (ChannelStats.Tracker)",
		"VettedSessions":    "per channel only (ChannelStats.Tracker)",
		"UnsealedIgnored":   "per channel only (ChannelStats.Tracker)",
	}
	sub := reflect.TypeOf(SubscriberStats{})
	tr := reflect.TypeOf(seqgap.Stats{})
	for i := range tr.NumField() {
		name := tr.Field(i).Name
		_, summed := sub.FieldByName(name)
		if reason, ok := notSummed[name]; ok {
			if summed && name != "Packets" {
				t.Errorf("seqgap.Stats.%s is listed as not summed (%s), but SubscriberStats has it", name, reason)
			}
			delete(notSummed, name)
			continue
		}
		if !summed {
			t.Errorf("seqgap.Stats.%s has no SubscriberStats field of the same name", name)
		}
	}
	for name := range notSummed {
		t.Errorf("notSummed lists %s, which seqgap.Stats does not have", name)
	}
}
