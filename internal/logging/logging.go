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

// New returns a logger writing to w (os.Stderr when nil). format is "auto",
// "console" or "json"; level is a zerolog level name (debug, info, warn,
// error).
func New(format, level string, w io.Writer) (zerolog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("log-level %q: want debug, info, warn or error", level)
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
		return zerolog.Nop(), fmt.Errorf("log-format %q: want auto, console or json", format)
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
