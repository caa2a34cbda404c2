package subapp

import (
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/tickcast/tickcast"
)

// snakeCase turns a Go field name into its JSON summary key: KernelDrops is
// kernel_drops, PacketsA packets_a.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// jsonFields returns the Go field name of each JSON key of t, embedded
// structs' fields included.
func jsonFields(t reflect.Type, out map[string]string) map[string]string {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			jsonFields(f.Type, out)
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key != "" && key != "-" {
			out[key] = f.Name
		}
	}
	return out
}

// TestSummaryNamesFollowStats checks that every counter of
// tickcast.SubscriberStats is in the JSON summary under its Go name in
// snake_case, and that the summary's field has the same Go name, unless it
// is listed here with the reason it is not in the summary.
func TestSummaryNamesFollowStats(t *testing.T) {
	notInSummary := map[string]string{
		"Messages":  "the summary's received is the handler's own count of the messages released to it",
		"Truncated": "exported to Prometheus only (tickcast_subscriber_truncated_datagrams_total)",
	}
	keys := jsonFields(reflect.TypeOf(Summary{}), map[string]string{})
	st := reflect.TypeOf(tickcast.SubscriberStats{})
	for i := range st.NumField() {
		name := st.Field(i).Name
		key := snakeCase(name)
		goName, ok := keys[key]
		if reason, skip := notInSummary[name]; skip {
			if ok {
				t.Errorf("SubscriberStats.%s is listed as not in the summary (%s), but the summary has %q", name, reason, key)
			}
			delete(notInSummary, name)
			continue
		}
		switch {
		case !ok:
			t.Errorf("SubscriberStats.%s: the summary has no key %q", name, key)
		case goName != name:
			t.Errorf("SubscriberStats.%s is Summary.%s (key %q): one counter, two Go names", name, goName, key)
		}
	}
	for name := range notInSummary {
		t.Errorf("notInSummary lists %s, which SubscriberStats does not have", name)
	}
}
