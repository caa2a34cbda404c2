package cliconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzLoadConfigFile: whatever a config file holds, Load does not panic and
// either succeeds or returns an *Error naming the file; what it accepts,
// written back out as YAML, loads to the same settings, and each setting it
// took from the file has the file and a line as its origin.
func FuzzLoadConfigFile(f *testing.F) {
	for _, seed := range []string{
		"",
		"rate: 5\nmax-delay: 20us\n",
		"source: x\nverify: true\nworkers: 3\noffset: -7\ncount: 9\nrate: 1.5\nmax-delay: 1h\npeers: [a, b]\n",
		"peers: a, b ,c\n",
		"rate: &r 2\nworkers: *r\n",
		"rate: abc\n",
		"max-dlay: 5us\n",
		"- a\n- b\n",
		"rate: 1\n---\nrate: 2\n",
		"source: \"\\x00\\u2028\"\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "fuzz.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var s testSettings
		err := Load("fuzz", []string{"--config", path}, env(nil), &s)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if !strings.HasPrefix(e.Origin, "config "+path) {
				t.Fatalf("error %v: origin %q does not name the file", err, e.Origin)
			}
			return
		}
		for name, origin := range s.Origins {
			if name == ConfigFlag {
				continue
			}
			line, ok := strings.CutPrefix(origin, "config "+path+":")
			if n, err := strconv.Atoi(line); !ok || err != nil || n < 1 {
				t.Fatalf("%s: origin %q is not the file and a line", name, origin)
			}
		}

		// Written out by hand rather than with yaml.Marshal, which does not
		// round-trip every string (it writes "\n" as a block scalar that
		// reads back empty). A Go ASCII-quoted string is a valid YAML
		// double-quoted scalar with the same meaning.
		var b strings.Builder
		for _, kv := range [][2]string{
			{"source", strconv.QuoteToASCII(s.Source)},
			{"verify", strconv.FormatBool(s.Verify)},
			{"workers", strconv.Itoa(s.Workers)},
			{"offset", strconv.FormatInt(s.Offset, 10)},
			{"count", strconv.FormatUint(s.Count, 10)},
			{"rate", strconv.FormatFloat(s.Rate, 'g', -1, 64)},
			{"max-delay", s.MaxDelay.String()},
			{"peers", quoteList(s.Peers)},
		} {
			fmt.Fprintf(&b, "%s: %s\n", kv[0], kv[1])
		}
		out := b.String()
		again := filepath.Join(dir, "again.yaml")
		if err := os.WriteFile(again, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		var s2 testSettings
		if err := Load("fuzz", []string{"--config", again}, env(nil), &s2); err != nil {
			t.Fatalf("re-load of\n%s\nfailed: %v", out, err)
		}
		s.Origins, s2.Origins = nil, nil
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("re-load differs:\n got %#v\nwant %#v\nfrom\n%s", s2, s, out)
		}
	})
}

// quoteList writes items as a YAML flow sequence of double-quoted strings.
func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = strconv.QuoteToASCII(it)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
