package cliconf

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix is the prefix of every environment variable that tickcast's
// programs read.
const EnvPrefix = "TICKCAST_"

// ConfigFlag is the name of the flag that names the config file; its
// environment variable is TICKCAST_CONFIG.
const ConfigFlag = "config"

// precedence is the rule, in the words that Usage prints and the package doc
// uses.
const precedence = "A flag overrides an environment variable, which overrides the config file, which overrides the built-in default."

// Origins maps the name of each setting that was set explicitly to where its
// value came from: "flag", "env TICKCAST_RATE" or "config FILE:LINE". A
// setting left at its default is absent. When a config file was read,
// "config" names where its path came from. Load fills the field of this type
// in the settings struct, if there is one, so a program can log it at start.
type Origins map[string]string

// String lists the origins sorted by setting name, as name=origin separated
// by ", ", for logging.
func (o Origins) String() string {
	names := make([]string, 0, len(o))
	for n := range o {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(o[n])
	}
	return b.String()
}

// kind is what a setting's field holds, which decides how text is parsed.
type kind int

const (
	kindString kind = iota
	kindBool
	kindInt
	kindInt64
	kindUint64
	kindFloat64
	kindDuration
	kindList
)

// typeName is how Usage names each kind.
var typeName = [...]string{
	kindString:   "string",
	kindBool:     "bool",
	kindInt:      "int",
	kindInt64:    "int64",
	kindUint64:   "uint64",
	kindFloat64:  "float",
	kindDuration: "duration",
	kindList:     "list",
}

var durationType = reflect.TypeFor[time.Duration]()

var originsType = reflect.TypeFor[Origins]()

// setting is one tagged field of a settings struct.
type setting struct {
	name  string // flag name and config key
	env   string // environment variable
	help  string
	def   string // default tag, as written
	kind  kind
	typ   reflect.Type
	index []int // field index path in the struct (through embedded structs)
}

// settingsOf returns the settings declared by struct type t, and the index of
// its Origins field (-1 when there is none).
//
// Settings of an embedded struct field (without a flag tag) are the outer
// struct's settings, so programs can share groups of settings.
func settingsOf(t reflect.Type) ([]setting, int, error) {
	var out []setting
	origins := -1
	seen := map[string]string{}
	var walk func(t reflect.Type, prefix []int) error
	walk = func(t reflect.Type, prefix []int) error {
		for i := range t.NumField() {
			f := t.Field(i)
			idx := append(append([]int(nil), prefix...), i)
			name, tagged := f.Tag.Lookup("flag")
			if !tagged {
				if f.Type == originsType && len(prefix) == 0 {
					origins = i
				}
				if f.Anonymous && f.Type.Kind() == reflect.Struct {
					if err := walk(f.Type, idx); err != nil {
						return err
					}
				}
				continue
			}
			s, err := settingOf(t, f, name, seen)
			if err != nil {
				return err
			}
			s.index = idx
			out = append(out, s)
		}
		return nil
	}
	if err := walk(t, nil); err != nil {
		return nil, 0, err
	}
	return out, origins, nil
}

// settingOf checks one tagged field.
func settingOf(t reflect.Type, f reflect.StructField, name string, seen map[string]string) (setting, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("cliconf: %s.%s: %s", t.Name(), f.Name, fmt.Sprintf(format, args...))
	}
	if !f.IsExported() {
		return setting{}, bad("flag tag on an unexported field")
	}
	if !validName(name) {
		return setting{}, bad("flag name %q is not lower-case letters, digits and '-'", name)
	}
	switch name {
	case ConfigFlag, "h", "help":
		return setting{}, bad("flag name %q is reserved", name)
	}
	if other, dup := seen[name]; dup {
		return setting{}, bad("flag name %q is also used by %s", name, other)
	}
	seen[name] = f.Name
	k, ok := kindOf(f.Type)
	if !ok {
		return setting{}, bad("unsupported type %s", f.Type)
	}
	s := setting{
		name: name,
		env:  envName(name),
		help: f.Tag.Get("help"),
		def:  f.Tag.Get("default"),
		kind: k,
		typ:  f.Type,
	}
	if _, err := s.defaultValue(); err != nil {
		return setting{}, bad("default %q: %v", s.def, err)
	}
	return s, nil
}

func validName(name string) bool {
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// envName returns the environment variable of setting name: "max-delay"
// gives "TICKCAST_MAX_DELAY".
func envName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func kindOf(t reflect.Type) (kind, bool) {
	if t == durationType {
		return kindDuration, true
	}
	switch t.Kind() {
	case reflect.String:
		return kindString, true
	case reflect.Bool:
		return kindBool, true
	case reflect.Int:
		return kindInt, true
	case reflect.Int64:
		return kindInt64, true
	case reflect.Uint64:
		return kindUint64, true
	case reflect.Float64:
		return kindFloat64, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return kindList, true
		}
	}
	return 0, false
}

// Parse errors: short, because *Error puts the setting, value and origin
// around them.
var (
	errBool     = errors.New("not a boolean (want true or false)")
	errInt      = errors.New("not an integer")
	errUint     = errors.New("not a non-negative integer")
	errRange    = errors.New("out of range")
	errFloat    = errors.New("not a number")
	errFinite   = errors.New("not a finite number")
	errDuration = errors.New("not a duration (such as 50us, 1.5s or 2m)")
)

// parse turns text, from whichever source, into a value of the setting's
// type. It is the one parser for flags, environment variables, config files
// and defaults.
func (s *setting) parse(text string) (reflect.Value, error) {
	v := reflect.New(s.typ).Elem()
	switch s.kind {
	case kindString:
		v.SetString(text)
	case kindBool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return v, errBool
		}
		v.SetBool(b)
	case kindInt, kindInt64:
		n, err := strconv.ParseInt(text, 10, s.typ.Bits())
		if err != nil {
			return v, numError(err, errInt)
		}
		v.SetInt(n)
	case kindUint64:
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return v, numError(err, errUint)
		}
		v.SetUint(n)
	case kindFloat64:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return v, numError(err, errFloat)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return v, errFinite
		}
		v.SetFloat(f)
	case kindDuration:
		d, err := time.ParseDuration(text)
		if err != nil {
			return v, errDuration
		}
		v.SetInt(int64(d))
	case kindList:
		return s.list(splitList(text)), nil
	}
	return v, nil
}

// defaultValue returns the setting's built-in default: its default tag, or
// the zero value when there is none.
func (s *setting) defaultValue() (reflect.Value, error) {
	if s.def == "" {
		return reflect.Zero(s.typ), nil
	}
	return s.parse(s.def)
}

// list returns items as a value of the setting's (slice) type.
func (s *setting) list(items []string) reflect.Value {
	if len(items) == 0 {
		return reflect.Zero(s.typ)
	}
	v := reflect.MakeSlice(s.typ, len(items), len(items))
	for i, it := range items {
		v.Index(i).SetString(it)
	}
	return v
}

func numError(err, syntax error) error {
	if errors.Is(err, strconv.ErrRange) {
		return errRange
	}
	return syntax
}

// splitList splits a comma-separated list, trimming spaces around items and
// dropping empty ones, so "" is the empty list.
func splitList(text string) []string {
	var items []string
	for it := range strings.SplitSeq(text, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	return items
}
