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
	// known) or "command line" for a positional argument. It is empty for an
	// error made by Invalid.
	Origin string
	// Value is the offending text as given.
	Value string
	// Err says what was wrong, such as "not a number".
	Err error
}

// Error returns a one-line message naming the setting, the origin and the
// problem, such as
//
//	rate: invalid value "abc" from env TICKCAST_RATE: not a number
func (e *Error) Error() string {
	switch {
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
		return fmt.Sprintf("%s: invalid value %q from %s: %v", e.Field, e.Value, e.Origin, e.Err)
	}
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
// name. The format and args are as for fmt.Errorf, so %w wraps.
func Invalid(field, format string, args ...any) error {
	return &Error{Field: field, Err: fmt.Errorf(format, args...)}
}
