package cliconf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
)

// Load fills the settings struct that dst points to from its defaults, the
// config file, the environment and args, in rising precedence: a flag
// overrides an environment variable, which overrides the config file, which
// overrides the built-in default.
//
// name is the program's name, used in messages. args are the command-line
// arguments without the program name (os.Args[1:]). getenv looks up an
// environment variable; nil means os.Getenv, and tests pass a map's lookup.
//
// Load returns flag.ErrHelp for -h or --help, an *Error for anything wrong
// with what the user gave, and a plain error for a mistake in the struct
// itself. On error *dst is left as it was; on success every tagged field is
// set and the Origins field, if the struct has one, says which settings were
// set explicitly and where.
func Load(name string, args []string, getenv func(string) string, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("cliconf: Load needs a pointer to a settings struct, got %T", dst)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	settings, originsField, err := settingsOf(rv.Elem().Type())
	if err != nil {
		return err
	}

	// Every value is parsed as it is found, so a bad one is reported even
	// when a source of higher precedence overrides it. Values are then
	// applied from the lowest precedence up, each overwriting the last.
	fromFlags, config, err := parseFlags(name, args, settings)
	if err != nil {
		return err
	}
	fromEnv, err := readEnv(getenv, settings)
	if err != nil {
		return err
	}
	if !config.given {
		if p := getenv(configEnv); p != "" {
			config = configName{path: p, origin: "env " + configEnv, given: true}
		}
	}
	var fromFile []value
	if config.path != "" {
		data, err := os.ReadFile(config.path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return &Error{
				Origin: "config " + config.path,
				Err:    fmt.Errorf("cannot read the file named by %s: %w", config.by(), err),
			}
		}
		if fromFile, err = parseConfig(config.path, data, settings); err != nil {
			return err
		}
	}

	out := reflect.New(rv.Elem().Type()).Elem()
	out.Set(rv.Elem())
	for _, s := range settings {
		v, _ := s.defaultValue() // checked by settingsOf
		out.FieldByIndex(s.index).Set(v)
	}
	origins := Origins{}
	for _, from := range [][]value{fromFile, fromEnv, fromFlags} {
		for _, v := range from {
			out.FieldByIndex(v.s.index).Set(v.v)
			origins[v.s.name] = v.origin
		}
	}
	if config.path != "" {
		origins[ConfigFlag] = config.origin
	}
	if originsField >= 0 {
		out.Field(originsField).Set(reflect.ValueOf(origins))
	}
	rv.Elem().Set(out)
	return nil
}

// Defaults fills the settings struct that dst points to with its built-in
// defaults alone, as Load does with no flags, environment or config file:
// what a program's settings are when nothing is given. The feed handler's
// --demo subscriber takes the subscriber's settings from it.
func Defaults(dst any) error {
	return Load("defaults", nil, func(string) string { return "" }, dst)
}

// configEnv is the environment variable that names the config file.
var configEnv = envName(ConfigFlag)

// value is one parsed value and where it came from.
type value struct {
	s      *setting
	v      reflect.Value
	origin string
}

// configName is the config file's path and where it came from. A path given
// as empty (--config "") means no config file, even if TICKCAST_CONFIG names
// one.
type configName struct {
	path   string
	origin string // "flag" or "env TICKCAST_CONFIG"
	given  bool
}

// by names what gave the path, for messages.
func (c configName) by() string {
	if c.origin == "flag" {
		return "--" + ConfigFlag
	}
	return configEnv
}

// errMissing is the Err of a flag given last without its value.
var errMissing = errors.New("missing value")

// flagValue is the flag.Value of one setting: it parses with the same code as
// every other source and keeps the typed error, which the flag package would
// flatten into a string.
type flagValue struct {
	s   *setting
	got *[]value
	bad **Error
}

func (f *flagValue) String() string { return "" }

func (f *flagValue) Set(text string) error {
	v, err := f.s.parse(text)
	if err != nil {
		*f.bad = &Error{Field: f.s.name, Origin: "flag", Value: text, Err: err}
		return err
	}
	*f.got = append(*f.got, value{s: f.s, v: v, origin: "flag"})
	return nil
}

func (f *flagValue) IsBoolFlag() bool { return f.s.kind == kindBool }

// parseFlags parses args with a flag.FlagSet built from settings.
func parseFlags(name string, args []string, settings []setting) ([]value, configName, error) {
	var (
		got    []value
		bad    *Error
		config configName
	)
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for i := range settings {
		s := &settings[i]
		fs.Var(&flagValue{s: s, got: &got, bad: &bad}, s.name, s.help)
	}
	fs.Func(ConfigFlag, "YAML config file", func(p string) error {
		config = configName{path: p, origin: "flag", given: true}
		return nil
	})
	if err := fs.Parse(args); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return nil, config, flag.ErrHelp
		case bad != nil:
			return nil, config, bad
		}
		return nil, config, flagError(err)
	}
	if rest := fs.Args(); len(rest) > 0 {
		return nil, config, &Error{Origin: "command line", Value: rest[0], Err: ErrUnexpectedArgument}
	}
	return got, config, nil
}

// flagError turns the flag package's own errors, which are plain strings,
// into an *Error.
func flagError(err error) *Error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return &Error{Field: name, Origin: "flag", Err: ErrUnknownSetting}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return &Error{Field: name, Origin: "flag", Err: errMissing}
	}
	if arg, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok {
		return &Error{Origin: "flag", Value: arg, Err: errors.New("bad flag syntax")}
	}
	return &Error{Origin: "flag", Err: err}
}

// readEnv reads each setting's environment variable; an empty one is unset.
func readEnv(getenv func(string) string, settings []setting) ([]value, error) {
	var got []value
	for i := range settings {
		s := &settings[i]
		text := getenv(s.env)
		if text == "" {
			continue
		}
		v, err := s.parse(text)
		if err != nil {
			return nil, &Error{Field: s.name, Origin: "env " + s.env, Value: text, Err: err}
		}
		got = append(got, value{s: s, v: v, origin: "env " + s.env})
	}
	return got, nil
}
