// Package config holds what the configuration structs of tickcast's
// packages share: the error their validation returns, and the limits that
// more than one package checks.
//
// Every configuration struct in the module follows one convention:
//
//   - Each default is an exported constant of its package, named Default
//     and the field (udp.DefaultRingSlots, seqgap.DefaultWindow, …), and
//     the field's doc comment names it. The zero value of a field selects
//     its default unless the comment says otherwise.
//   - An unexported withDefaults method returns a copy with the zero fields
//     set, and an unexported validate method checks the result and returns
//     a *Error naming the first bad field. Constructors call both, so a
//     caller never sees a half-checked configuration.
//   - A limit that several packages check (the channel count) is declared
//     here once.
//
// Command-line programs translate Error.Field to the flag that sets it;
// where a program's flag default differs from the library default, the
// program lists the override with its reason in one table, and a test holds
// every other flag default equal to the library's.
package config

import "fmt"

// MaxChannels is the most channels a feed may have: a channel number is
// two base-36 characters of a MoldUDP64 session (36² = 1296).
const MaxChannels = 36 * 36

// Error reports a configuration field with a value that cannot be used.
type Error struct {
	// Pkg is the package that refused the value, e.g. "udp".
	Pkg string
	// Struct is the configuration type, e.g. "Config" or
	// "SubscriberConfig".
	Struct string
	// Field is the field, e.g. "RingSlots".
	Field string
	// Value is the refused value.
	Value any
	// Reason says what is wrong with it, e.g. "not a power of two".
	Reason string
}

// Error returns "<pkg>: invalid <Struct>.<Field> <value>: <reason>", with
// a string value quoted.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: invalid %s.%s %s: %s", e.Pkg, e.Struct, e.Field, e.value(), e.Reason)
}

func (e *Error) value() string {
	if s, ok := e.Value.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(e.Value)
}

// Checker builds the Errors of one configuration type.
type Checker struct {
	Pkg, Struct string
}

// Invalid returns an *Error for field holding value, with the reason
// formatted from format and args.
func (c Checker) Invalid(field string, value any, format string, args ...any) error {
	return &Error{Pkg: c.Pkg, Struct: c.Struct, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// Channels checks a channel count against 1..MaxChannels.
func (c Checker) Channels(field string, n int) error {
	if n < 1 || n > MaxChannels {
		return c.Invalid(field, n, "want 1..%d", MaxChannels)
	}
	return nil
}

// Default sets *v to d if *v is its type's zero value: the step each
// withDefaults method takes for a field whose zero value selects its
// default.
func Default[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
