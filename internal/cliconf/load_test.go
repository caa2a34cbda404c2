package cliconf

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testSettings has one field of every supported kind.
type testSettings struct {
	Source   string        `flag:"source" default:"synthetic" help:"upstream feed: synthetic"`
	Verify   bool          `flag:"verify" help:"check every message"`
	Workers  int           `flag:"workers" default:"4" help:"decoder goroutines"`
	Offset   int64         `flag:"offset" default:"-1" help:"first sequence number (-1 = live)"`
	Count    uint64        `flag:"count" default:"1000000" help:"messages to publish (0 = no limit)"`
	Rate     float64       `flag:"rate" default:"100000" help:"messages per second (0 = as fast as possible)"`
	MaxDelay time.Duration `flag:"max-delay" default:"50us" help:"longest a message waits in a batch"`
	Peers    []string      `flag:"peers" default:"a:1,b:2" help:"comma-separated host:port list"`

	Origins Origins
	Note    string // untagged: Load leaves it alone
}

func defaults() testSettings {
	return testSettings{
		Source:   "synthetic",
		Workers:  4,
		Offset:   -1,
		Count:    1000000,
		Rate:     100000,
		MaxDelay: 50 * time.Microsecond,
		Peers:    []string{"a:1", "b:2"},
		Origins:  Origins{},
	}
}

// env returns a getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeConfig writes a config file and returns its path.
func writeConfig(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tickcast.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// field returns the value of the setting named name (its flag name).
func field(s *testSettings, name string) any {
	t := reflect.TypeFor[testSettings]()
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("flag") == name {
			return reflect.ValueOf(s).Elem().Field(i).Interface()
		}
	}
	panic("no setting " + name)
}

func TestDefaults(t *testing.T) {
	got := testSettings{Note: "kept"}
	if err := Load("feedhandler", nil, env(nil), &got); err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.Note = "kept"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestDefaultsOnly: Defaults gives the defaults even where the environment
// sets a value.
func TestDefaultsOnly(t *testing.T) {
	t.Setenv("TICKCAST_RATE", "7")
	var got testSettings
	if err := Defaults(&got); err != nil {
		t.Fatal(err)
	}
	if want := defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if err := Defaults(got); err == nil {
		t.Error("Defaults took a struct that is not a pointer")
	}
}

// TestKinds sets each kind of setting from each origin.
func TestKinds(t *testing.T) {
	kinds := []struct {
		name, text string
		want       any
	}{
		{"source", "feed-x", "feed-x"},
		{"source", "", ""}, // only a flag or the config file can set an empty string
		{"verify", "true", true},
		{"verify", "0", false},
		{"workers", "12", 12},
		{"workers", "-3", -3},
		{"offset", "-9000000000", int64(-9000000000)},
		{"count", "18446744073709551615", uint64(math.MaxUint64)},
		{"count", "0", uint64(0)},
		{"rate", "2.5e3", 2500.0},
		{"rate", "-0.5", -0.5},
		{"max-delay", "1.5ms", 1500 * time.Microsecond},
		{"max-delay", "1h2m", time.Hour + 2*time.Minute},
		{"peers", "x:1, y:2", []string{"x:1", "y:2"}},
		{"peers", "solo", []string{"solo"}},
		{"peers", ",", []string(nil)},
	}
	for _, k := range kinds {
		envName := "TICKCAST_" + strings.ToUpper(strings.ReplaceAll(k.name, "-", "_"))
		for _, origin := range []string{"flag", "env", "config"} {
			if origin == "env" && k.text == "" {
				continue // an empty variable is unset
			}
			t.Run(origin+"/"+k.name+"="+k.text, func(t *testing.T) {
				var (
					args       []string
					vars       = map[string]string{}
					wantOrigin string
				)
				switch origin {
				case "flag":
					args = []string{"--" + k.name + "=" + k.text}
					wantOrigin = "flag"
				case "env":
					vars[envName] = k.text
					wantOrigin = "env " + envName
				case "config":
					// Two lines, so the origin's line number is not 1 by luck.
					p := writeConfig(t, "# settings\n"+k.name+": \""+k.text+"\"\n")
					args = []string{"--config", p}
					wantOrigin = "config " + p + ":2"
				}
				var s testSettings
				if err := Load("feedhandler", args, env(vars), &s); err != nil {
					t.Fatal(err)
				}
				if got := field(&s, k.name); !reflect.DeepEqual(got, k.want) {
					t.Errorf("%s = %#v, want %#v", k.name, got, k.want)
				}
				if got := s.Origins[k.name]; got != wantOrigin {
					t.Errorf("origin of %s = %q, want %q (origins %v)", k.name, got, wantOrigin, s.Origins)
				}
			})
		}
	}
}

func TestBoolFlagWithoutValue(t *testing.T) {
	var s testSettings
	if err := Load("subscriber", []string{"-verify"}, env(nil), &s); err != nil {
		t.Fatal(err)
	}
	if !s.Verify {
		t.Error("-verify did not set Verify")
	}
	if err := Load("subscriber", []string{"--verify=false"}, env(map[string]string{"TICKCAST_VERIFY": "true"}), &s); err != nil {
		t.Fatal(err)
	}
	if s.Verify {
		t.Error("--verify=false did not override TICKCAST_VERIFY=true")
	}
}

// TestConfigYAMLForms checks the config file's native YAML forms: unquoted
// scalars, sequences for lists, anchors, and null.
func TestConfigYAMLForms(t *testing.T) {
	p := writeConfig(t, `
rate: &r 250.5
verify: true
max-delay: 20us
count: 7
peers: [a:1, "b,c", " d "]
source: ~
workers: 0x10
`)
	var s testSettings
	err := Load("feedhandler", []string{"--config", p}, env(nil), &s)
	var e *Error
	if !errors.As(err, &e) || e.Field != "workers" || e.Value != "0x10" {
		t.Fatalf("workers: 0x10: got %v, want an *Error for workers (integers are decimal)", err)
	}

	p = writeConfig(t, `
rate: &r 250.5
verify: true
max-delay: 20us
count: 7
peers: [a:1, "b,c", " d "]
source: ~
offset: 12
`)
	if err := Load("feedhandler", []string{"--config", p}, env(nil), &s); err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.Rate = 250.5
	want.Verify = true
	want.MaxDelay = 20 * time.Microsecond
	want.Count = 7
	want.Peers = []string{"a:1", "b,c", " d "} // sequence items are taken as they are
	want.Source = ""
	want.Offset = 12
	want.Origins = s.Origins
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
	if got, want := len(s.Origins), 8; got != want { // 7 settings and config
		t.Errorf("origins %v: %d entries, want %d", s.Origins, got, want)
	}

	p = writeConfig(t, "peers: []\nrate: *x\n")
	err = Load("feedhandler", []string{"--config", p}, env(nil), &s)
	if !errors.As(err, &e) {
		t.Fatalf("unknown anchor: got %v, want an *Error", err)
	}

	p = writeConfig(t, "peers: []\nbase: &b 5\n")
	if err := Load("feedhandler", []string{"--config", p}, env(nil), &s); !errors.Is(err, ErrUnknownSetting) {
		t.Fatalf("unknown key base: got %v, want ErrUnknownSetting", err)
	}

	p = writeConfig(t, "workers: &w 3\noffset: *w\npeers: []\n")
	if err := Load("feedhandler", []string{"--config", p}, env(nil), &s); err != nil {
		t.Fatal(err)
	}
	if s.Workers != 3 || s.Offset != 3 || s.Peers != nil {
		t.Errorf("workers %d, offset %d, peers %#v; want 3, 3 (through an alias), nil", s.Workers, s.Offset, s.Peers)
	}
}

// TestEmptyConfig: a config file with no settings leaves the defaults.
func TestEmptyConfig(t *testing.T) {
	for _, text := range []string{"", "# nothing yet\n", "~\n", "---\n", "---\n...\n", "{}\n"} {
		p := writeConfig(t, text)
		var s testSettings
		if err := Load("feedhandler", []string{"--config=" + p}, env(nil), &s); err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		want := defaults()
		want.Origins = Origins{"config": "flag"}
		if !reflect.DeepEqual(s, want) {
			t.Errorf("%q: got %+v, want the defaults", text, s)
		}
	}
}

func TestPrecedence(t *testing.T) {
	path := writeConfig(t, "count: 1\nrate: 1\n")
	tests := []struct {
		name       string
		file       bool // rate: 1 (and count: 1) in the config file
		env        bool // TICKCAST_RATE=2
		flag       bool // --rate 3
		want       float64
		wantOrigin string
	}{
		{"nothing", false, false, false, 100000, ""},
		{"only file", true, false, false, 1, "config " + path + ":2"},
		{"only env", false, true, false, 2, "env TICKCAST_RATE"},
		{"only flag", false, false, true, 3, "flag"},
		{"file and env", true, true, false, 2, "env TICKCAST_RATE"},
		{"file and flag", true, false, true, 3, "flag"},
		{"env and flag", false, true, true, 3, "flag"},
		{"all three", true, true, true, 3, "flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{}
			var args []string
			if tt.file {
				vars["TICKCAST_CONFIG"] = path
			}
			if tt.env {
				vars["TICKCAST_RATE"] = "2"
			}
			if tt.flag {
				args = []string{"--rate", "3"}
			}
			var s testSettings
			if err := Load("feedhandler", args, env(vars), &s); err != nil {
				t.Fatal(err)
			}
			if s.Rate != tt.want {
				t.Errorf("rate = %v, want %v", s.Rate, tt.want)
			}
			if got := s.Origins["rate"]; got != tt.wantOrigin {
				t.Errorf("origin of rate = %q, want %q", got, tt.wantOrigin)
			}
			if tt.file && (s.Count != 1 || s.Origins["count"] != "config "+path+":1") {
				t.Errorf("count = %d from %q, want 1 from the config file", s.Count, s.Origins["count"])
			}
		})
	}
}

// TestConfigPath: --config beats TICKCAST_CONFIG, and --config "" means no
// file at all.
func TestConfigPath(t *testing.T) {
	fromEnv := writeConfig(t, "rate: 1\n")
	fromFlag := writeConfig(t, "rate: 2\n")
	vars := map[string]string{"TICKCAST_CONFIG": fromEnv}
	tests := []struct {
		args       []string
		want       float64
		wantConfig string
	}{
		{nil, 1, "env TICKCAST_CONFIG"},
		{[]string{"--config", fromFlag}, 2, "flag"},
		{[]string{"--config="}, 100000, ""},
	}
	for _, tt := range tests {
		var s testSettings
		if err := Load("feedhandler", tt.args, env(vars), &s); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if s.Rate != tt.want || s.Origins["config"] != tt.wantConfig {
			t.Errorf("%q: rate %v, config from %q; want %v, %q", tt.args, s.Rate, s.Origins["config"], tt.want, tt.wantConfig)
		}
	}
}

// TestBadValues: a bad value fails the same way from every origin, naming the
// setting, the origin (with the config file's line) and the problem.
func TestBadValues(t *testing.T) {
	bad := []struct {
		name, text, problem string
	}{
		{"verify", "maybe", "not a boolean (want true or false)"},
		{"workers", "1.5", "not an integer"},
		{"workers", "99999999999999999999", "out of range"},
		{"offset", "ten", "not an integer"},
		{"count", "-1", "not a non-negative integer"},
		{"count", "1e6", "not a non-negative integer"},
		{"rate", "abc", "not a number"},
		{"rate", "NaN", "not a finite number"},
		{"rate", "1e999", "out of range"},
		{"max-delay", "50", "not a duration (such as 50us, 1.5s or 2m)"},
		{"max-delay", "fast", "not a duration (such as 50us, 1.5s or 2m)"},
	}
	for _, b := range bad {
		envName := "TICKCAST_" + strings.ToUpper(strings.ReplaceAll(b.name, "-", "_"))
		for _, origin := range []string{"flag", "env", "config"} {
			t.Run(origin+"/"+b.name+"="+b.text, func(t *testing.T) {
				var (
					args       []string
					vars       = map[string]string{}
					wantOrigin string
				)
				switch origin {
				case "flag":
					args = []string{"--" + b.name + "=" + b.text}
					wantOrigin = "flag"
				case "env":
					vars[envName] = b.text
					wantOrigin = "env " + envName
				case "config":
					p := writeConfig(t, "source: x\n\n"+b.name+": \""+b.text+"\"\n")
					args = []string{"--config", p}
					wantOrigin = "config " + p + ":3"
				}
				s := testSettings{Note: "before"}
				err := Load("feedhandler", args, env(vars), &s)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v (%T), want an *Error", err, err)
				}
				if e.Field != b.name || e.Origin != wantOrigin || e.Value != b.text {
					t.Errorf("got field %q, origin %q, value %q; want %q, %q, %q", e.Field, e.Origin, e.Value, b.name, wantOrigin, b.text)
				}
				from := wantOrigin
				if origin == "flag" {
					from = "--" + b.name
				}
				want := b.name + ": invalid value \"" + b.text + "\" from " + from + ": " + b.problem
				if err.Error() != want {
					t.Errorf("message\n got %s\nwant %s", err, want)
				}
				if s.Note != "before" || s.Source != "" {
					t.Errorf("failed Load changed dst: %+v", s)
				}
			})
		}
	}
}

// TestOverriddenBadValue: a bad value is reported even where a source of
// higher precedence overrides it.
func TestOverriddenBadValue(t *testing.T) {
	p := writeConfig(t, "rate: fast\n")
	err := Load("feedhandler", []string{"--config", p, "--rate", "5"}, env(map[string]string{"TICKCAST_RATE": "6"}), &testSettings{})
	want := `rate: invalid value "fast" from config ` + p + `:1: not a number`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	err = Load("feedhandler", []string{"--rate", "5"}, env(map[string]string{"TICKCAST_RATE": "x"}), &testSettings{})
	want = `rate: invalid value "x" from env TICKCAST_RATE: not a number`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestUsageErrors covers everything else a user can get wrong.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	tests := []struct {
		name    string
		args    []string
		vars    map[string]string
		config  string // written to a file passed with --config; PATH in want is its path
		want    string
		wantErr error // if set, errors.Is(err, wantErr)
	}{
		{name: "unknown flag", args: []string{"--max-dlay", "5us"},
			want: "max-dlay: unknown setting from flag", wantErr: ErrUnknownSetting},
		{name: "unknown flag after good ones", args: []string{"--rate", "5", "-bogus"},
			want: "bogus: unknown setting from flag", wantErr: ErrUnknownSetting},
		{name: "positional", args: []string{"x"},
			want: `unexpected argument "x"`, wantErr: ErrUnexpectedArgument},
		{name: "positional after flags", args: []string{"--rate", "5", "x", "--count", "1"},
			want: `unexpected argument "x"`, wantErr: ErrUnexpectedArgument},
		{name: "bool flag takes its value after =", args: []string{"--verify", "false"},
			want: `unexpected argument "false"`, wantErr: ErrUnexpectedArgument},
		{name: "positional after --", args: []string{"--", "--rate"},
			want: `unexpected argument "--rate"`, wantErr: ErrUnexpectedArgument},
		{name: "bad value as the next argument", args: []string{"--rate", "abc"},
			want: `rate: invalid value "abc" from --rate: not a number`},
		{name: "missing flag value", args: []string{"--rate"},
			want: `rate: invalid value "" from --rate: missing value`},
		{name: "bad flag syntax", args: []string{"---rate"},
			want: `flag: bad flag syntax: "---rate"`},
		{name: "empty value", args: []string{"--rate="},
			want: `rate: invalid value "" from --rate: not a number`},
		{name: "unknown config key", config: "rate: 5\nmax-dlay: 5us\n",
			want: "max-dlay: unknown setting from config PATH:2", wantErr: ErrUnknownSetting},
		{name: "config key config", config: "config: other.yaml\n",
			want: "config: unknown setting from config PATH:1", wantErr: ErrUnknownSetting},
		{name: "duplicate config key", config: "rate: 5\ncount: 1\nrate: 6\n",
			want: `rate: invalid value "6" from config PATH:3: already set on line 1`},
		{name: "list for a single value", config: "count: 1\nrate: [1, 2]\n",
			want: `rate: invalid value "" from config PATH:2: want one value, not a list`},
		{name: "mapping for a value", config: "rate:\n  per: 5\n",
			want: `rate: invalid value "" from config PATH:1: want a value, not a mapping`},
		{name: "nested list item", config: "peers: [a, [b]]\n",
			want: `peers: invalid value "" from config PATH:1: a list item must be a single value`},
		{name: "not a mapping", config: "- rate\n- 5\n",
			want: "config PATH:1: not a mapping of setting names to values"},
		{name: "scalar document", config: "rate 5\n",
			want: "config PATH:1: not a mapping of setting names to values"},
		{name: "complex key", config: "? [rate]\n: 5\n",
			want: "config PATH:1: a key must be a setting name"},
		{name: "yaml syntax", config: "rate: 5\ncount: 1\nbad: : x\n",
			want: "config PATH:3: mapping values are not allowed in this context"},
		{name: "tab indentation", config: "rate: 5\n\tcount: 1\n",
			want: "config PATH:2: found a tab character that violates indentation"},
		{name: "two documents", config: "rate: 5\n---\ncount: 1\n",
			want: "config PATH:2: more than one YAML document"},
		{name: "missing config file from flag", args: []string{"--config", missing},
			want:    "config " + missing + ": cannot read the file named by --config: no such file or directory",
			wantErr: fs.ErrNotExist},
		{name: "missing config file from env", vars: map[string]string{"TICKCAST_CONFIG": missing},
			want:    "config " + missing + ": cannot read the file named by TICKCAST_CONFIG: no such file or directory",
			wantErr: fs.ErrNotExist},
		{name: "config is a directory", args: []string{"--config", dir},
			want: "config " + dir + ": cannot read the file named by --config: is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, want := tt.args, tt.want
			if tt.config != "" {
				p := writeConfig(t, tt.config)
				args = append([]string{"--config", p}, args...)
				want = strings.ReplaceAll(want, "PATH", p)
			}
			err := Load("feedhandler", args, env(tt.vars), &testSettings{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v (%T), want an *Error", err, err)
			}
			if err.Error() != want {
				t.Errorf("message\n got %s\nwant %s", err, want)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantErr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"--rate", "5", "-help"}} {
		err := Load("feedhandler", args, env(nil), &testSettings{})
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: got %v, want flag.ErrHelp", args, err)
		}
	}
}

// TestBadStruct: a mistake in the settings struct is a plain error, not an
// *Error, since no user can fix it.
func TestBadStruct(t *testing.T) {
	tests := []struct {
		name string
		dst  any
		want string
	}{
		{"not a pointer", testSettings{}, "cliconf: Load needs a pointer to a settings struct, got cliconf.testSettings"},
		{"nil", nil, "cliconf: Load needs a pointer to a settings struct, got <nil>"},
		{"pointer to int", new(int), "cliconf: Load needs a pointer to a settings struct, got *int"},
		{"unsupported type", &struct {
			F float32 `flag:"f"`
		}{}, "cliconf: .F: unsupported type float32"},
		{"bad default", &struct {
			Rate float64 `flag:"rate" default:"fast"`
		}{}, `cliconf: .Rate: default "fast": not a number`},
		{"reserved name", &struct {
			Config string `flag:"config"`
		}{}, `cliconf: .Config: flag name "config" is reserved`},
		{"bad name", &struct {
			Rate float64 `flag:"Rate"`
		}{}, `cliconf: .Rate: flag name "Rate" is not lower-case letters, digits and '-'`},
		{"duplicate name", &struct {
			A int `flag:"n"`
			B int `flag:"n"`
		}{}, `cliconf: .B: flag name "n" is also used by A`},
		{"unexported", &struct {
			a int `flag:"a"`
		}{}, `cliconf: .a: flag tag on an unexported field`},
	}
	for _, tt := range tests {
		err := Load("feedhandler", nil, env(nil), tt.dst)
		var e *Error
		if err == nil || errors.As(err, &e) {
			t.Errorf("%s: got %v, want a plain error", tt.name, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, err, tt.want)
		}
	}
}

func TestInvalid(t *testing.T) {
	err := Invalid("rate", "must not be negative, got %v", -1.5)
	var e *Error
	if !errors.As(err, &e) || e.Field != "rate" {
		t.Fatalf("got %#v, want an *Error for rate", err)
	}
	if got, want := err.Error(), "rate: must not be negative, got -1.5"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	err = Invalid("group", "not a multicast address: %w", fs.ErrInvalid)
	if !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Invalid does not wrap with %%w: %v", err)
	}
}

// TestLocate checks that a program's range check, passed through
// Origins.Locate, names where the value came from: the flag, the
// environment variable, or the config file and the line of its key.
func TestLocate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(p, []byte("# rates\ncount: 1\n\nrate: -5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"flag", []string{"--rate", "-5"}, nil, "rate: -5: must not be negative (from --rate)"},
		{"flag=", []string{"--rate=-5"}, nil, "rate: -5: must not be negative (from --rate)"},
		{"env", nil, map[string]string{"TICKCAST_RATE": "-5"}, "rate: -5: must not be negative (from env TICKCAST_RATE)"},
		{"config", []string{"--config", p}, nil, "rate: -5: must not be negative (from config " + p + ":4)"},
		{"config from env", nil, map[string]string{"TICKCAST_CONFIG": p}, "rate: -5: must not be negative (from config " + p + ":4)"},
		{"flag over config", []string{"--config", p, "--rate", "-6"}, nil, "rate: -6: must not be negative (from --rate)"},
		{"env over config", []string{"--config", p}, map[string]string{"TICKCAST_RATE": "-7"}, "rate: -7: must not be negative (from env TICKCAST_RATE)"},
	}
	for _, tt := range tests {
		var s testSettings
		if err := Load("feedhandler", tt.args, env(tt.vars), &s); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		err := s.Origins.Locate(Invalid("rate", "%v: must not be negative", s.Rate))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, want %s", tt.name, err, tt.want)
		}
	}

	// A setting at its default; an error that wraps one; other errors.
	if got, want := (Origins{}).Locate(Invalid("count", "too few")).Error(), "count: too few (the built-in default)"; got != want {
		t.Errorf("default: got %q, want %q", got, want)
	}
	o := Origins{"rate": "flag"}
	wrapped := fmt.Errorf("checking: %w", Invalid("rate", "too high"))
	plain := errors.New("plain")
	if o.Locate(plain) != plain || o.Locate(nil) != nil || o.Locate(wrapped) != wrapped {
		t.Error("Locate changed an error that Invalid did not make")
	}
	loaded := &Error{Field: "rate", Origin: "env TICKCAST_RATE", Value: "x", Err: errFloat}
	if o.Locate(loaded) != error(loaded) {
		t.Error("Locate changed an error that has its origin")
	}
	orig := Invalid("rate", "too high")
	o.Locate(orig)
	if orig.Error() != "rate: too high" {
		t.Errorf("Locate changed the error it was given: %v", orig)
	}
}

func TestOriginsString(t *testing.T) {
	o := Origins{"rate": "flag", "count": "config /etc/t.yaml:3", "config": "env TICKCAST_CONFIG"}
	want := "config=env TICKCAST_CONFIG, count=config /etc/t.yaml:3, rate=flag"
	if got := o.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := (Origins{}).String(); got != "" {
		t.Errorf("empty: got %q", got)
	}
}

func TestSplitList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{" a , b ,", []string{"a", "b"}},
		{",,a,,", []string{"a"}},
		{"a b,c", []string{"a b", "c"}},
		{" , ", nil},
	}
	for _, tt := range tests {
		if got := splitList(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"50us", 50 * time.Microsecond, true},
		{"50µs", 50 * time.Microsecond, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"2m30s", 150 * time.Second, true},
		{"-1ms", -time.Millisecond, true},
		{"0", 0, true},
		{"100ns", 100, true},
		{"", 0, false},
		{"50", 0, false},
		{"1d", 0, false},
		{"5 s", 0, false},
	}
	for _, tt := range tests {
		var s testSettings
		err := Load("subscriber", []string{"--max-delay=" + tt.in}, env(nil), &s)
		if (err == nil) != tt.ok {
			t.Errorf("%q: error %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if tt.ok && s.MaxDelay != tt.want {
			t.Errorf("%q: got %v, want %v", tt.in, s.MaxDelay, tt.want)
		}
	}
}

// TestNamedTypes: fields of named types built on supported kinds work.
func TestNamedTypes(t *testing.T) {
	type feedName string
	type hosts []string
	var s struct {
		Feed  feedName `flag:"feed" default:"synthetic"`
		Hosts hosts    `flag:"hosts"`
	}
	if err := Load("feedhandler", []string{"--hosts", "a,b"}, env(nil), &s); err != nil {
		t.Fatal(err)
	}
	if s.Feed != "synthetic" || !reflect.DeepEqual(s.Hosts, hosts{"a", "b"}) {
		t.Errorf("got %+v", s)
	}
}

func TestFlagGivenTwice(t *testing.T) {
	var s testSettings
	if err := Load("feedhandler", []string{"--rate", "1", "--peers", "a,b", "--rate=2", "--peers", "c"}, env(nil), &s); err != nil {
		t.Fatal(err)
	}
	if s.Rate != 2 || !reflect.DeepEqual(s.Peers, []string{"c"}) {
		t.Errorf("rate %v, peers %q; want the last values 2, [c]", s.Rate, s.Peers)
	}
}
