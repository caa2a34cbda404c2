// Command itchgen writes a synthetic TotalView-ITCH 5.0 day (package
// feed/itch/itchgen) in NASDAQ's file format, plain or gzip.
//
// Usage:
//
//	itchgen --out FILE [--seed N] [--stocks N] [--orders N] [--count N] [--gzip]
//
// The same flags write the same bytes. --out - writes to stdout, so a day
// can be piped into a reader without touching the disk; a FILE ending in
// .gz is gzip-compressed, as is any output with --gzip. At the end it
// prints one JSON line (on stderr when the day went to stdout): the
// messages and bytes written, the live orders at the end and at most, and
// the elapsed time. Bad flags exit 2 with a message naming the flag; a
// write error exits 1. See docs/scale.md.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tickcast/tickcast/config"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// summary is the JSON line itchgen prints at the end.
type summary struct {
	Out          string  `json:"out"`
	Seed         uint64  `json:"seed"`
	Stocks       int     `json:"stocks"`
	Messages     uint64  `json:"messages"`
	Bytes        int64   `json:"bytes"`
	Gzip         bool    `json:"gzip"`
	OrdersLive   int     `json:"orders_live"`
	OrdersHigh   int     `json:"orders_high_water"`
	OrdersTarget int     `json:"orders_target"`
	ElapsedS     float64 `json:"elapsed_s"`
}

// flagNames maps itchgen.Config's fields to the flags that set them.
var flagNames = map[string]string{"Stocks": "stocks", "Orders": "orders", "Messages": "count"}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("itchgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg itchgen.Config
	var out string
	var gz bool
	fs.StringVar(&out, "out", "", "file to write (required; - for stdout; a name ending in .gz is gzip-compressed)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed: the same flags write the same bytes")
	fs.IntVar(&cfg.Stocks, "stocks", itchgen.DefaultStocks, fmt.Sprintf("stocks, 1..%d (stock locates 1..N)", itchgen.MaxStocks))
	fs.IntVar(&cfg.Orders, "orders", itchgen.DefaultOrders, "live orders the day builds up to and then holds, a percent or two either way")
	fs.Uint64Var(&cfg.Messages, "count", itchgen.DefaultMessages, "messages in the day, the opening (system event, stock directory and trading action per stock) and closing ones included")
	fs.BoolVar(&gz, "gzip", false, "gzip the output (implied by a .gz file name)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "itchgen: unexpected argument %q\n", fs.Arg(0))
		return 2
	case out == "":
		fmt.Fprintln(stderr, "itchgen: --out: the file to write is required (- for stdout)")
		return 2
	case cfg.Stocks == 0 || cfg.Orders == 0 || cfg.Messages == 0:
		fmt.Fprintln(stderr, "itchgen: --stocks, --orders and --count must not be 0")
		return 2
	}
	g, err := itchgen.New(cfg)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "itchgen: --%s: %v: %s\n", flagNames[ce.Field], ce.Value, ce.Reason)
		} else {
			fmt.Fprintf(stderr, "itchgen: %v\n", err)
		}
		return 2
	}
	gz = gz || strings.HasSuffix(out, ".gz")
	report := stdout
	var w io.Writer = stdout
	var f *os.File
	if out == "-" {
		report = stderr
	} else {
		if f, err = os.Create(out); err != nil {
			fmt.Fprintf(stderr, "itchgen: %v\n", err)
			return 1
		}
		w = f
	}
	start := time.Now()
	cw := &countingWriter{w: w}
	if gz {
		err = g.WriteGzip(cw)
	} else {
		_, err = g.WriteTo(cw)
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "itchgen: writing %s: %v\n", out, err)
		return 1
	}
	c := g.Config()
	b, _ := json.Marshal(summary{Out: out, Seed: c.Seed, Stocks: c.Stocks, Messages: g.Generated(), Bytes: cw.n, Gzip: gz,
		OrdersLive: g.Live(), OrdersHigh: g.HighWater(), OrdersTarget: c.Orders, ElapsedS: time.Since(start).Seconds()})
	fmt.Fprintln(report, string(b))
	return 0
}
