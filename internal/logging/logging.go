// Package logging builds the zerolog logger both binaries use: human-readable
// console output when stderr is a terminal, one JSON object per line
// otherwise (for log shippers), unless the format is forced.
package logging

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// SettingError is New's error for a format or level it does not know.
type SettingError struct {
	// Setting is "log-format" or "log-level".
	Setting string
	// Value is the format or level given.
	Value string
	// Want lists the values New takes.
	Want string
}

// Error returns the setting, the value and what New takes, such as
//
//	log-format "xml": want auto, console or json
func (e *SettingError) Error() string {
	return fmt.Sprintf("%s %q: want %s", e.Setting, e.Value, e.Want)
}

// New returns a logger writing to w (os.Stderr when nil). format is "auto",
// "console" or "json"; level is a zerolog level name (debug, info, warn,
// error). A format or level it does not know is a *SettingError.
func New(format, level string, w io.Writer) (zerolog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), &SettingError{Setting: "log-level", Value: level, Want: "debug, info, warn or error"}
	}
	switch format {
	case "auto":
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000000"}
		}
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000000", NoColor: true}
	case "json":
	default:
		return zerolog.Nop(), &SettingError{Setting: "log-format", Value: format, Want: "auto, console or json"}
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
