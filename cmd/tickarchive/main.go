// Command tickarchive reads a feed's archive (feedhandler --archive, package
// archive) from JetStream, to export a range of it to a file or to say what
// it holds.
//
// Usage:
//
//	tickarchive export --from POS [--to POS] [--channels 0,1] --format pcap|archive -o FILE [flags]
//	tickarchive info [--channels 0,1] [--file FILE] [flags]
//
// export writes the range from --from to --to (positions as subscriber
// --replay-from takes them: an RFC 3339 time, SESSION:SEQ or start) of the
// channels given, or of every channel the archive holds. A range is what a
// replay of it delivers, and a range the archive does not hold is refused
// as a replay refuses it, naming what the archive holds.
//
//   - --format archive writes an archive file: the range's records exactly as
//     stored and the key records that open their sealed packets. subscriber
//     --replay-file FILE replays it with no NATS server. Records are kept
//     whole, so a file exported from SESSION:SEQ starts with the whole record
//     holding it.
//   - --format pcap writes a classic pcap (Ethernet, IPv4, UDP) of the
//     range's packets, each exactly as sent (sealed, and encrypted if the
//     channel is), from 127.0.0.1 to the channel's multicast group and port
//     as the feed handler computes them from --group, at the times recorded
//     (a record's packets spread evenly over its span, as a replay paces
//     them), in time order across channels. tshark -d
//     udp.port==PORT,moldudp64 decodes it.
//
// export prints one JSON summary line on stdout and exits 1 if a record was
// corrupt (it is reported with its place in the stream, and left out).
//
// info reads the channels' records through and prints, per channel, its
// records, loss records and the messages they cover, corrupt records, bytes
// and time range, and per session its first and last message. With --file it
// reads an archive file instead, with no NATS server.
//
// NATS is reached as subscriber reaches it: --nats-url and the --nats-*
// credentials and TLS flags. Settings come from flags and an optional YAML
// file (--config), not from TICKCAST_* environment variables, whose
// --channels and --format are the other programs' settings with other
// meanings. Bad flags exit 2, naming the flag and where its value came from;
// other failures exit 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/natsconn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// natsSettings say where the archive is.
type natsSettings struct {
	NATSURL  string   `flag:"nats-url" default:"nats://127.0.0.1:4222" help:"NATS server or cluster holding the archive's JetStream stream"`
	FeedName string   `flag:"feed-name" default:"tickcast" help:"feed name: the archive's stream is TICKCAST_ARCHIVE_FEED"`
	Channels []string `flag:"channels" default:"" help:"channels to read, as 0,1 (empty: every channel the archive holds)"`
	natsconn.Flags
}

// exportSettings are tickarchive export's.
type exportSettings struct {
	natsSettings
	From    string `flag:"from" help:"where the range starts: an RFC 3339 time (the first record stored at or after it), SESSION:SEQ (the packet holding that message) or start; required"`
	To      string `flag:"to" help:"where it ends: a time (the records whose first packet was recorded at or before it) or SESSION:SEQ (the packet holding that message) (empty: the last record stored when the export starts)"`
	Format  string `flag:"format" help:"pcap (Ethernet/IPv4/UDP, for tshark) or archive (records and key records, for subscriber --replay-file); required"`
	Output  string `flag:"output" help:"file to write; required"`
	Group   string `flag:"group" default:"239.77.0.1:31001" help:"with --format pcap, the A-line group of channel 0 as the feed handler's --group: channel c's packets go to the address plus c, same port"`
	Origins cliconf.Origins
}

// infoSettings are tickarchive info's.
type infoSettings struct {
	natsSettings
	File    string `flag:"file" help:"archive file (export --format archive) to describe instead of the stream; no NATS then"`
	Origins cliconf.Origins
}

const usageHead = `tickarchive reads a feed's archive (feedhandler --archive) from JetStream.

Commands:
  tickarchive export --from POS [--to POS] [--channels 0,1] --format pcap|archive -o FILE [flags]
      write a range of the archive to a pcap (for tshark) or an archive file
      (for subscriber --replay-file, with no NATS)
  tickarchive info [--channels 0,1] [--file FILE] [flags]
      say what the archive (or an archive file) holds: per channel, its
      sessions, messages, records, loss records, bytes and time range

Settings come from flags and --config FILE (YAML), not from the environment.
Exit status: 0 done, 1 failed (or a corrupt record met), 2 bad flags.
Run "tickarchive export --help" or "tickarchive info --help" for the flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageHead)
		return 2
	}
	cmd, rest := args[0], args[1:]
	noEnv := func(string) string { return "" }
	switch cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usageHead)
		return 0
	case "export":
		var s exportSettings
		if code, ok := load("tickarchive export", oFlag(rest), noEnv, &s, &s.Origins, stdout, stderr); !ok {
			return code
		}
		return export(ctx, &s, stdout, stderr)
	case "info":
		var s infoSettings
		if code, ok := load("tickarchive info", rest, noEnv, &s, &s.Origins, stdout, stderr); !ok {
			return code
		}
		return info(ctx, &s, stdout, stderr)
	}
	fmt.Fprintf(stderr, "tickarchive: unknown command %q: want export or info (tickarchive --help)\n", cmd)
	return 2
}

// load reads a command's settings; ok false means exit with code.
func load(name string, args []string, getenv func(string) string, dst any, origins *cliconf.Origins, stdout, stderr io.Writer) (int, bool) {
	err := cliconf.Load(name, args, getenv, dst)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage(name, dst))
		return 0, false
	}
	if err != nil {
		return badSettings(stderr, *origins, err), false
	}
	return 0, true
}

// usage is cliconf's usage without the environment variables, which
// tickarchive does not read.
func usage(name string, dst any) string {
	u := cliconf.Usage(name, dst)
	u = envLine.ReplaceAllString(u, "$1")
	if i, j := strings.Index(u, "Every setting"), strings.Index(u, "\nFlags:"); i >= 0 && j > i {
		u = u[:i] + "Every setting can be given as a flag or as a key in a YAML config file named by\n" +
			"--config; a flag overrides the config file, which overrides the built-in\n" +
			"default. TICKCAST_* environment variables are not read: --channels and\n" +
			"--format mean other things to the feed handler and the subscriber.\n" + u[j:]
	}
	if name == "tickarchive export" {
		u = strings.Replace(u, "  --output string\n", "  -o, --output string\n", 1)
	}
	return u
}

// envLine matches the environment variable in a flag's usage.
var envLine = regexp.MustCompile(`(?m)^(\s+)env TICKCAST_[A-Z0-9_]+, `)

// oFlag turns -o FILE into --output FILE.
func oFlag(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch {
		case a == "-o" || a == "--o":
			a = "--output"
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--o="):
			a = "--output=" + a[strings.IndexByte(a, '=')+1:]
		}
		out[i] = a
	}
	return out
}

// badSettings prints err, an error in the settings, saying where the value
// came from, and returns exit status 2.
func badSettings(stderr io.Writer, o cliconf.Origins, err error) int {
	fmt.Fprintf(stderr, "tickarchive: %v\n", o.Locate(err))
	return 2
}

// channels parses --channels: nil for every channel the archive holds.
func (s *natsSettings) channels() ([]int, error) {
	var out []int
	for _, c := range s.Channels {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > 65535 {
			return nil, cliconf.Invalid("channels", "%q: want channel numbers, as 0,1", c)
		}
		out = append(out, n)
	}
	return out, nil
}

// connect connects to NATS as subscriber does, and waits for the
// connection, up to 10 s.
func (s *natsSettings) connect(stderr io.Writer) (*nats.Conn, error) {
	cc := s.Flags.ConnConfig(s.NATSURL, "tickarchive", s.Flags.InboxPrefix())
	nc, err := natsconn.Connect(cc, func(event string, err error) {
		if !natsconn.Routine(event, err) {
			fmt.Fprintf(stderr, "tickarchive: nats %s: %v\n", event, err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("NATS %s: %w", s.NATSURL, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !nc.IsConnected(); {
		if time.Now().After(deadline) || nc.IsClosed() {
			last := nc.LastError()
			nc.Close()
			return nil, fmt.Errorf("NATS %s (--nats-url): not connected within 10s: %v", s.NATSURL, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nc, nil
}
