// Command subscriber is tickcast's reference subscriber: it joins a feed's
// multicast channels, releases every channel's messages in sequence order,
// optionally verifies each one against the synthetic feed (--verify), and
// prints one JSON summary line at exit (received, gaps, missing, duplicates,
// kernel drops, verify_ok, mallocs per message, ...).
//
// It exits when every joined channel has ended its session, when --expect
// messages have arrived, after --idle-timeout without a packet, or on
// SIGINT/SIGTERM. Exit status: 0 when nothing was missing, the expectation
// was met and verification (if asked) passed; 1 otherwise; 2 for bad flags or
// configuration. --list-devices prints the host's RDMA devices and exits.
// Settings come from flags, TICKCAST_* environment variables
// and an optional YAML file (--config), in that order of precedence.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/logging"
	"github.com/tickcast/tickcast/internal/metricsrv"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/ud/rdma/devices"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if url, ok := metricsrv.HealthArg(args); ok {
		return metricsrv.HealthMain("subscriber", url, stdout, stderr)
	}
	var s subapp.Settings
	err := cliconf.Load("subscriber", args, getenv, &s)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, cliconf.Usage("subscriber", &s), metricsrv.HealthUsage("subscriber", subapp.DefaultMetricsAddr))
		return 0
	}
	if err != nil {
		return badSettings(stderr, &s, err)
	}
	if s.ListDevices {
		if err := devices.WriteList(stdout, s.Iface); err != nil {
			fmt.Fprintf(stderr, "subscriber: --list-devices: %v\n", err)
			return 1
		}
		return 0
	}
	log, err := logging.New(s.LogFormat, s.LogLevel, stderr)
	if err != nil {
		var le *logging.SettingError
		if errors.As(err, &le) {
			err = cliconf.Invalid(le.Setting, "%q: want %s", le.Value, le.Want)
		}
		return badSettings(stderr, &s, err)
	}
	app, err := subapp.New(s, log, stdout)
	if err != nil {
		var ce *cliconf.Error
		if errors.As(err, &ce) {
			return badSettings(stderr, &s, err)
		}
		log.Error().Err(err).Msg("cannot subscribe")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.Run(ctx)
}

// badSettings prints err, an error in the settings, saying where the value
// it is about came from (the flag, the environment variable, or the config
// file and line), and returns exit status 2.
func badSettings(stderr io.Writer, s *subapp.Settings, err error) int {
	fmt.Fprintf(stderr, "subscriber: %v\n", s.Origins.Locate(err))
	return 2
}
