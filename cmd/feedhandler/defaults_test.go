package main

import (
	"reflect"
	"testing"

	"github.com/tickcast/tickcast/fh"
	"github.com/tickcast/tickcast/internal/cliconf"
)

// TestFlagDefaults holds every flag default equal to the default of the
// fh.Config field it sets, except the overrides flagOverrides lists with
// their reasons, which must differ.
func TestFlagDefaults(t *testing.T) {
	var s Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	got, err := s.config()
	if err != nil {
		t.Fatal(err)
	}
	lib := fh.Defaults()
	gv, lv := reflect.ValueOf(got), reflect.ValueOf(lib)
	for field, flag := range flagOf {
		g, l := gv.FieldByName(field), lv.FieldByName(field)
		if !g.IsValid() {
			t.Errorf("flagOf names %s (--%s), which fh.Config does not have", field, flag)
			continue
		}
		same := reflect.DeepEqual(g.Interface(), l.Interface())
		reason, override := flagOverrides[field]
		switch {
		case override && same:
			t.Errorf("--%s is listed as overriding fh.Config.%s (%s), but both default to %v", flag, field, reason, g)
		case !override && !same:
			t.Errorf("--%s defaults to %v, fh.Config.%s to %v: make them equal or list the override with its reason", flag, g, field, l)
		}
	}
	for field := range flagOverrides {
		if _, ok := flagOf[field]; !ok {
			t.Errorf("flagOverrides names %s, which no flag sets", field)
		}
	}
}
