// Package cliconf is how tickcast's programs take their settings: from
// command-line flags, environment variables and an optional YAML config file,
// with one precedence rule for every setting:
//
//	flag > environment variable > config file > built-in default
//
// A flag overrides an environment variable, which overrides the config file,
// which overrides the built-in default.
//
// # Declaring settings
//
// A program declares its settings as a struct whose fields carry tags:
//
//	type Settings struct {
//		Rate     float64       `flag:"rate"      default:"100000" help:"messages per second (0 = as fast as possible)"`
//		MaxDelay time.Duration `flag:"max-delay" default:"50us"   help:"longest a message waits in a batch"`
//		Peers    []string      `flag:"peers"                      help:"comma-separated host:port list"`
//		Verify   bool          `flag:"verify"                     help:"check every message"`
//
//		Origins cliconf.Origins // filled by Load: what was set explicitly, and where
//	}
//
// The flag tag is the setting's name. It is the flag (--max-delay), the config
// file key (max-delay: 20us) and, upper-cased with '-' turned into '_' behind
// the prefix TICKCAST_, the environment variable (TICKCAST_MAX_DELAY). Both
// binaries share the one prefix, so one environment configures both. The
// default tag is the built-in default, written as it would be on the command
// line; a missing default tag means the zero value. The help tag is the text
// that Usage prints. Fields without a flag tag are left alone, except a field
// of type Origins, which Load fills.
//
// Supported field types are string, bool, int, int64, uint64, float64,
// time.Duration and []string, or named types built on them. A []string is
// written as a comma-separated list ("a, b,c"; spaces around items are
// dropped, and so are empty items); in the config file it may also be a YAML
// sequence, whose items are taken as they are. Integers are decimal; floats
// are as strconv.ParseFloat reads them but must be finite; bools are as
// strconv.ParseBool reads them (true, false, 1, 0, ...); durations are as
// time.ParseDuration reads them (50us, 1.5s, 2m).
//
// # Sources
//
// Flags are parsed by the standard flag package, so -rate 5, --rate 5 and
// --rate=5 are the same. A bool flag given without a value means true; a
// value for it goes after '=' (--verify=false), since --verify false reads
// "false" as an argument.
// An environment variable that is empty counts as unset. The config file is
// named by --config FILE or by TICKCAST_CONFIG (the flag wins); it is a YAML
// mapping whose keys are setting names, and a key that names no setting is an
// error. A key with no value (or ~, or null) gives the empty text. There is
// no config file unless one is named, a named file that cannot be read is an
// error, and --config "" means no config file even when TICKCAST_CONFIG names
// one. A setting given twice on the command line takes the last value; given
// twice in the config file, it is an error.
//
// Values from every source are parsed by the same code, so --rate abc,
// TICKCAST_RATE=abc and "rate: abc" in the config file fail the same way.
// Every value given is checked, even one that a source of higher precedence
// overrides: a stale bad value is reported rather than left to surprise
// someone later.
//
// # Errors
//
// Every mistake a user can make is reported as an *Error naming the setting,
// where the value came from (the config file's line when it is known) and what
// was wrong:
//
//	rate: invalid value "abc" from env TICKCAST_RATE: not a number
//	rate: invalid value "abc" from --rate: not a number
//	max-dlay: unknown setting from config /etc/tickcast.yaml:3
//	unexpected argument "x"
//
// Load returns flag.ErrHelp for -h or --help; the program then prints
// Usage(name, &settings) to standard output and exits with status 0. A
// mistake in the struct itself (an unsupported field type, a default that does
// not parse) is a programming error and is returned as a plain error.
//
// Load checks types only. Ranges are the program's business: it checks them
// after Load and reports a bad one with Invalid, so that its errors read like
// Load's, and passes the error through Origins.Locate, so that it too says
// where the value came from:
//
//	rate: -5: must not be negative (from --rate)
//	rate: -5: must not be negative (from env TICKCAST_RATE)
//	rate: -5: must not be negative (from config /etc/tickcast.yaml:3)
//
// By convention tickcast's programs print any error from Load or from their
// own checks of the settings to standard error, with a hint to run with
// --help, and exit with status 2, as the flag package does for a bad command
// line.
package cliconf
