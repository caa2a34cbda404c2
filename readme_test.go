package tickcast

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docCommand is one shell command written in a document: a line of a
// fenced code block, or an inline code span that starts with "go ".
type docCommand struct {
	file   string
	line   int
	text   string
	inline bool // a code span in prose, which may name a flag without its value
}

var inlineGo = regexp.MustCompile("`(go [^`]+)`")

// docCommands returns the shell commands of README.md and docs/*.md: every
// line of a fenced block that is sh, bash, shell or unmarked, and every
// inline code span that starts with "go ". Comments after # are cut.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md"}, files...)
	var out []docCommand
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inFence, shell := false, false
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				if !inFence {
					lang := strings.TrimPrefix(trimmed, "```")
					shell = lang == "" || lang == "sh" || lang == "bash" || lang == "shell" || lang == "console"
				}
				inFence = !inFence
				continue
			}
			if inFence {
				if shell {
					if cmd := strings.TrimSpace(cutComment(strings.TrimPrefix(trimmed, "$ "))); cmd != "" {
						out = append(out, docCommand{f, n, cmd, false})
					}
				}
				continue
			}
			for _, m := range inlineGo.FindAllStringSubmatch(line, -1) {
				out = append(out, docCommand{f, n, m[1], true})
			}
		}
	}
	return out
}

// cutComment cuts a shell comment (# at the start of a word, outside
// quotes) from line.
func cutComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// shellWords splits a command into words as sh does for plain words and
// single- and double-quoted strings (no expansion, no escapes but \" in
// double quotes).
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'' || c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if c == '"' && s[j] == '\\' && j+1 < len(s) {
					j++
				}
				w.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("unclosed %c", c)
			}
			i, inWord = j, true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// goTestValueFlags are the go test flags written in the documents that take
// a value (as -flag value or -flag=value).
var goTestValueFlags = map[string]bool{
	"run": true, "fuzz": true, "bench": true, "benchtime": true, "count": true, "fuzztime": true,
	"fuzzminimizetime": true, "timeout": true, "tags": true, "cpu": true, "skip": true, "o": true,
	"coverprofile": true, "cpuprofile": true, "memprofile": true, "trace": true, "parallel": true,
	"e2e-count": true, "exec": true,
}

// goTest is a parsed go test command line.
type goTest struct {
	flags map[string]string // -run, -fuzz, -bench ... without the dash
	pkgs  []string
}

// parseGoTest parses the words after "go test"; ok is false for a line
// that is not a go test command.
func parseGoTest(words []string) (gt goTest, ok bool, err error) {
	// Skip environment assignments (FUZZTIME=2m go test ...).
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		words = words[1:]
	}
	if len(words) < 2 || words[0] != "go" || words[1] != "test" {
		return gt, false, nil
	}
	gt.flags = map[string]string{}
	for i := 2; i < len(words); i++ {
		w := words[i]
		if w == "|" || w == "&&" || w == ";" || w == ">" || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") {
			break
		}
		if w == "-args" {
			break
		}
		if !strings.HasPrefix(w, "-") {
			gt.pkgs = append(gt.pkgs, w)
			continue
		}
		name := strings.TrimLeft(w, "-")
		if k, v, found := strings.Cut(name, "="); found {
			gt.flags[k] = v
			continue
		}
		if goTestValueFlags[name] {
			if i+1 == len(words) {
				return gt, true, fmt.Errorf("-%s without a value", name)
			}
			gt.flags[name] = words[i+1]
			i++
			continue
		}
		gt.flags[name] = ""
	}
	if len(gt.pkgs) == 0 {
		gt.pkgs = []string{"."}
	}
	return gt, true, nil
}

var testFunc = regexp.MustCompile(`(?m)^func (Test|Fuzz|Benchmark|Example)(\w*)\(`)

// packageTargets returns the top-level test, fuzz, benchmark and example
// functions of the package in dir, by kind ("Test", "Fuzz", ...), from its
// _test.go files (every build tag included).
func packageTargets(dir string) (map[string][]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			// As go test: TestX needs X empty or not starting with a
			// lower-case letter.
			if m[2] != "" && m[2][0] >= 'a' && m[2][0] <= 'z' {
				continue
			}
			out[m[1]] = append(out[m[1]], m[1]+m[2])
		}
	}
	return out, nil
}

// expandPackages returns the directories a go test package pattern names
// (./x, ., ./x/...).
func expandPackages(pattern string) ([]string, error) {
	root, recursive := strings.CutSuffix(pattern, "/...")
	root = filepath.Clean(root)
	if !recursive {
		if _, err := os.Stat(root); err != nil {
			return nil, fmt.Errorf("package %s: %v", pattern, err)
		}
		return []string{root}, nil
	}
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	return dirs, err
}

// topPattern compiles the first element of a go test -run/-fuzz/-bench
// pattern (elements are split at slashes outside brackets and
// parentheses, as the testing package does); the top-level names are
// matched against it unanchored.
func topPattern(p string) (*regexp.Regexp, error) {
	depth, cut := 0, len(p)
	for i := 0; i < len(p) && cut == len(p); i++ {
		switch p[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '\\':
			i++
		case '/':
			if depth == 0 {
				cut = i
			}
		}
	}
	return regexp.Compile(p[:cut])
}

// checkGoTest checks one go test command of the documents: each -fuzz
// names exactly one fuzz target of exactly one package; -run with -bench
// or -fuzz names no test (it is there to skip them), and alone it names
// exactly one test of the package (at least one for several packages);
// -bench names at least one benchmark.
func checkGoTest(gt goTest) error {
	var dirs []string
	for _, p := range gt.pkgs {
		d, err := expandPackages(p)
		if err != nil {
			return err
		}
		dirs = append(dirs, d...)
	}
	targets := map[string][]string{}
	for _, d := range dirs {
		pt, err := packageTargets(d)
		if err != nil {
			return err
		}
		for kind, names := range pt {
			targets[kind] = append(targets[kind], names...)
		}
	}
	match := func(flag string, kinds ...string) ([]string, error) {
		re, err := topPattern(gt.flags[flag])
		if err != nil {
			return nil, fmt.Errorf("-%s %q: %v", flag, gt.flags[flag], err)
		}
		var out []string
		for _, k := range kinds {
			for _, n := range targets[k] {
				if re.MatchString(n) {
					out = append(out, n)
				}
			}
		}
		return out, nil
	}
	if _, ok := gt.flags["fuzz"]; ok {
		got, err := match("fuzz", "Fuzz")
		if err != nil {
			return err
		}
		if len(got) != 1 || len(dirs) != 1 {
			return fmt.Errorf("-fuzz %q matches %d fuzz targets %v in %v: go test wants exactly one in one package", gt.flags["fuzz"], len(got), got, gt.pkgs)
		}
	}
	if _, ok := gt.flags["bench"]; ok {
		got, err := match("bench", "Benchmark")
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return fmt.Errorf("-bench %q matches no benchmark in %v", gt.flags["bench"], gt.pkgs)
		}
	}
	if _, ok := gt.flags["run"]; ok {
		got, err := match("run", "Test", "Fuzz", "Example")
		if err != nil {
			return err
		}
		_, bench := gt.flags["bench"]
		_, fuzz := gt.flags["fuzz"]
		switch {
		case bench || fuzz:
			if len(got) != 0 {
				return fmt.Errorf("-run %q beside -bench or -fuzz runs %d tests %v too; '^$' runs none", gt.flags["run"], len(got), got)
			}
		case len(got) == 0:
			return fmt.Errorf("-run %q matches no test in %v", gt.flags["run"], gt.pkgs)
		}
	}
	return nil
}

// TestDocGoTestCommands: every go test command written in README.md and
// docs/*.md (fenced blocks and inline code) names targets that exist, as
// written: a -fuzz pattern that matches two fuzz targets, or a -run pattern
// that matches none, fails when a reader runs it.
func TestDocGoTestCommands(t *testing.T) {
	checked := 0
	for _, c := range docCommands(t) {
		words, err := shellWords(c.text)
		if err != nil && !strings.HasPrefix(c.text, "go ") {
			continue // output or prose in an unmarked block
		}
		if err != nil {
			t.Errorf("%s:%d: %q: %v", c.file, c.line, c.text, err)
			continue
		}
		gt, ok, err := parseGoTest(words)
		if !ok || (err != nil && c.inline) {
			continue
		}
		if err == nil {
			checked++
			err = checkGoTest(gt)
		}
		if err != nil {
			t.Errorf("%s:%d: %s: %v", c.file, c.line, c.text, err)
		}
	}
	if checked == 0 {
		t.Fatal("no go test commands found in the documents: the extraction is wrong")
	}
}

// TestCheckGoTest: the checker rejects the mistakes it is there for.
func TestCheckGoTest(t *testing.T) {
	for _, tc := range []struct {
		cmd string
		ok  bool
	}{
		{`go test -run '^$' -fuzz FuzzParse ./mold`, false},
		{`go test -run '^$' -fuzz '^FuzzParse$' ./mold`, true},
		{`go test -run '^$' -fuzz '^FuzzParse$' ./...`, false},
		{`go test -run TestNoSuchTestAnywhere ./mold`, false},
		{`go test -run TestDocGoTestCommands .`, true},
		{`go test -run 'TestDocGoTestCommands/sub' .`, true},
		{`go test -run . -bench . ./mold`, false},
		{`go test -run '^$' -bench NoSuchBenchmark ./mold`, false},
		{`go test -run '^$' -fuzz '^FuzzParse$' ./nosuchpackage`, false},
	} {
		words, err := shellWords(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		gt, ok, err := parseGoTest(words)
		if !ok || err != nil {
			t.Fatalf("%s: parsed ok=%v err=%v", tc.cmd, ok, err)
		}
		if err := checkGoTest(gt); (err == nil) != tc.ok {
			t.Errorf("%s: checkGoTest = %v, want ok %v", tc.cmd, err, tc.ok)
		}
	}
}
