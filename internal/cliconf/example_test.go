package cliconf_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tickcast/tickcast/internal/cliconf"
)

// Settings is what a program declares: one tagged field per setting.
type Settings struct {
	Source   string        `flag:"source" default:"synthetic" help:"upstream feed: synthetic"`
	Rate     float64       `flag:"rate" default:"100000" help:"messages per second (0 = as fast as possible)"`
	MaxDelay time.Duration `flag:"max-delay" default:"50us" help:"longest a message waits in a batch"`
	Verify   bool          `flag:"verify" help:"check every message"`

	Origins cliconf.Origins
}

// load is what a program's main does with its settings.
func load(args []string, getenv func(string) string) (Settings, int) {
	var s Settings
	err := cliconf.Load("feedhandler", args, getenv, &s)
	if err == nil && s.Rate < 0 {
		// Locate adds where the value came from.
		err = s.Origins.Locate(cliconf.Invalid("rate", "must not be negative, got %v", s.Rate))
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Print(cliconf.Usage("feedhandler", &s))
		return s, 0
	case err != nil:
		fmt.Printf("feedhandler: %v (run with --help for usage)\n", err)
		return s, 2
	}
	return s, -1 // carry on
}

func ExampleLoad() {
	environ := map[string]string{"TICKCAST_RATE": "5000", "TICKCAST_MAX_DELAY": "1ms"}
	getenv := func(k string) string { return environ[k] }

	s, _ := load([]string{"--max-delay", "20us", "--verify"}, getenv)
	fmt.Printf("source %s, rate %v, max-delay %v, verify %v\n", s.Source, s.Rate, s.MaxDelay, s.Verify)
	fmt.Println("set explicitly:", s.Origins)

	_, status := load([]string{"--rate", "abc"}, getenv)
	fmt.Println("status", status)
	environ["TICKCAST_RATE"] = "-1"
	_, status = load(nil, getenv)
	fmt.Println("status", status)
	// Output:
	// source synthetic, rate 5000, max-delay 20µs, verify true
	// set explicitly: max-delay=flag, rate=env TICKCAST_RATE, verify=flag
	// feedhandler: rate: invalid value "abc" from --rate: not a number (run with --help for usage)
	// status 2
	// feedhandler: rate: must not be negative, got -1 (from env TICKCAST_RATE) (run with --help for usage)
	// status 2
}

func ExampleUsage() {
	load([]string{"--help"}, os.Getenv)
	// Output:
	// Usage: feedhandler [flags]
	//
	// Every setting can be given as a flag, as an environment variable or as a key in
	// a YAML config file named by --config. A flag overrides an environment variable,
	// which overrides the config file, which overrides the built-in default.
	//
	// Flags:
	//   --source string
	//         upstream feed: synthetic
	//         env TICKCAST_SOURCE, default "synthetic"
	//   --rate float
	//         messages per second (0 = as fast as possible)
	//         env TICKCAST_RATE, default 100000
	//   --max-delay duration
	//         longest a message waits in a batch
	//         env TICKCAST_MAX_DELAY, default 50us
	//   --verify
	//         check every message
	//         env TICKCAST_VERIFY, default false
	//   --config file
	//         YAML config file of settings keyed by flag name, one "name: value" per
	//         line; --config "" reads none
	//         env TICKCAST_CONFIG, default none
}
