package cliconf

import (
	"errors"
	"fmt"
)

// ErrUnknownSetting is the Err of an *Error for a flag or config file key that
// names no setting.
var ErrUnknownSetting = errors.New("unknown setting")

// ErrUnexpectedArgument is the Err of an *Error for a positional argument:
// tickcast's programs take flags only.
var ErrUnexpectedArgument = errors.New("unexpected argument")

// Error is a setting that could not be taken: a bad value, an unknown name, a
// config file that cannot be read or parsed. Test for it with errors.As.
type Error struct {
	// Field is the setting's name (its flag name, such as "max-delay"), or
	// empty when the error is about no one setting (a YAML syntax error, a
	// positional argument).
	Field string
	// Origin is where the value came from: "flag", "env TICKCAST_RATE",
	// "config /etc/tickcast.yaml:12" (the line is left out when it is not
	// known), "default" for a setting left at its built-in default, or
	// "command line" for a positional argument. It is empty for an error
	// made by Invalid until Origins.Locate fills it in.
	Origin string
	// Value is the offending text as given.
	Value string
	// Err says what was wrong, such as "not a number".
	Err error

	// checked marks an error made by Invalid: a value that parsed but that
	// the program refuses, whose message carries the value itself.
	checked bool
}

// Error returns a one-line message naming the setting, the origin and the
// problem, such as
//
//	rate: invalid value "abc" from env TICKCAST_RATE: not a number
//	rate: invalid value "abc" from --rate: not a number
//	rate: -5: must not be negative (from config /etc/tickcast.yaml:3)
//
// A value from the command line is said to come from its flag (--rate).
func (e *Error) Error() string {
	switch {
	case e.checked && e.Origin == "":
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	case e.checked && e.Origin == "default":
		return fmt.Sprintf("%s: %v (the built-in default)", e.Field, e.Err)
	case e.checked:
		return fmt.Sprintf("%s: %v (from %s)", e.Field, e.Err, e.from())
	case errors.Is(e.Err, ErrUnexpectedArgument):
		return fmt.Sprintf("unexpected argument %q", e.Value)
	case errors.Is(e.Err, ErrUnknownSetting):
		return fmt.Sprintf("%s: unknown setting from %s", e.Field, e.Origin)
	case e.Field == "" && e.Value != "":
		return fmt.Sprintf("%s: %v: %q", e.Origin, e.Err, e.Value)
	case e.Field == "":
		return fmt.Sprintf("%s: %v", e.Origin, e.Err)
	case e.Origin == "":
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	default:
		return fmt.Sprintf("%s: invalid value %q from %s: %v", e.Field, e.Value, e.from(), e.Err)
	}
}

// from names the origin as a user gave the value: the flag itself rather
// than "flag".
func (e *Error) from() string {
	if e.Origin == "flag" && e.Field != "" {
		return "--" + e.Field
	}
	return e.Origin
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Invalid returns an *Error for a setting whose value parsed but is out of
// the range the program accepts, so that a program's checks read like Load's:
//
//	if s.Rate < 0 {
//		return cliconf.Invalid("rate", "must not be negative, got %v", s.Rate)
//	}
//
// gives "rate: must not be negative, got -1". field is the setting's flag
// name. The format and args are as for fmt.Errorf, so %w wraps. Pass the
// error through Origins.Locate to say where the value came from.
func Invalid(field, format string, args ...any) error {
	return &Error{Field: field, Err: fmt.Errorf(format, args...), checked: true}
}

// Locate returns err saying where the value it is about came from, when
// err is an *Error made by Invalid: the origin o records for its
// setting (the flag, the environment variable, the config file and line),
// or "default" when o has none, the setting being at its built-in default.
// Any other error is returned as it is. With it a range check's message
// reads
//
//	rate: -5: must not be negative (from env TICKCAST_RATE)
//
// err itself is left as it was: the result is a copy. An error that wraps
// one made by Invalid is returned as it is, its text being fixed already.
func (o Origins) Locate(err error) error {
	e, ok := err.(*Error)
	if !ok || !e.checked || e.Origin != "" || e.Field == "" {
		return err
	}
	c := *e
	if c.Origin = o[e.Field]; c.Origin == "" {
		c.Origin = "default"
	}
	return &c
}
