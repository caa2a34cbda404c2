package seqgap

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/tickcast/tickcast/config"
)

// TestConfigDefaults: a zero Config takes every documented default, and a
// set field keeps its value.
func TestConfigDefaults(t *testing.T) {
	want := Config{Window: DefaultWindow, SlotSize: DefaultSlotSize, GapDelay: DefaultGapDelay,
		LostAfter: DefaultLostAfter, MaxGaps: DefaultMaxGaps, StaleAfter: DefaultStaleAfter}
	if got := (Config{}).withDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("Config{}.withDefaults() = %+v, want %+v", got, want)
	}
	set := Config{Window: 64, SlotSize: 100, GapDelay: time.Millisecond, LostAfter: time.Minute, MaxGaps: 3, StaleAfter: time.Hour}
	if got := set.withDefaults(); !reflect.DeepEqual(got, set) {
		t.Errorf("%+v.withDefaults() = %+v", set, got)
	}
}

// TestConfigErrors: New refuses each bad field with a *config.Error naming
// it, and takes the limits it can afford to allocate here.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Window: 1}, "Window"},
		{Config{Window: 3}, "Window"},
		{Config{Window: -2}, "Window"},
		{Config{Window: MaxWindow * 2}, "Window"},
		{Config{SlotSize: -1}, "SlotSize"},
		{Config{SlotSize: MaxSlotSize + 1}, "SlotSize"},
		{Config{GapDelay: -1}, "GapDelay"},
		{Config{LostAfter: -1}, "LostAfter"},
		{Config{MaxGaps: -1}, "MaxGaps"},
		{Config{StaleAfter: -1}, "StaleAfter"},
	} {
		_, err := New(tc.cfg)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Pkg != "seqgap" || ce.Struct != "Config" || ce.Field != tc.field {
			t.Errorf("New(%+v): error %v, want a *config.Error for Config.%s", tc.cfg, err, tc.field)
		}
	}
	for _, cfg := range []Config{{Window: 2}, {SlotSize: MaxSlotSize, Window: 2}, {MaxGaps: 1}} {
		if _, err := New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}
