package tickcast

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
)

// docBlocks returns the fenced sh blocks of a markdown file, each as its
// lines.
func docBlocks(t *testing.T, file string) [][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```sh":
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, trimmed)
		}
	}
	return blocks
}

var goRunCmd = regexp.MustCompile(`^go run \./cmd/(\w+)`)

// TestDocCommandsRun runs, as written, the commands of README.md and
// docs/running.md that use the programs (go run ./cmd/... and bin/...),
// each block in a shell in a fresh directory, and checks that each exits 0
// and that each run that prints a subscriber summary says "ok": true.
// bin/ holds the programs built from this tree behind wrappers that give
// each one a multicast group, a NATS port and metrics ports of its own, as
// TICKCAST_* variables, so the commands run beside other tests; go run
// ./cmd/X runs bin/X.
func TestDocCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the programs and runs the documents' commands (about 40 s): not with -short")
	}
	sh := testenv.NeedTool(t, "sh")
	jq, _ := exec.LookPath("jq")

	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	build := exec.Command("go", "build", "-o", real+string(filepath.Separator), "./cmd/feedhandler", "./cmd/subscriber")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	group := testenv.MulticastGroups(t, 80)[0]
	nats := testenv.FreeAddr(t)
	env := map[string]string{
		"feedhandler": "TICKCAST_NATS_LISTEN=" + nats + " TICKCAST_METRICS_ADDR=127.0.0.1:0",
		"subscriber":  "TICKCAST_NATS_URL=nats://" + nats + " TICKCAST_METRICS_ADDR=127.0.0.1:0",
	}
	for prog, vars := range env {
		script := "#!/bin/sh\nTICKCAST_GROUP=" + group.String() + " " + vars + " exec " + filepath.Join(real, prog) + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, prog), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	var blocks [][]string
	for _, f := range []string{"README.md", "docs/running.md"} {
		for _, b := range docBlocks(t, f) {
			var run []string
			for _, line := range b {
				cmd := strings.TrimSpace(cutComment(line))
				switch {
				case cmd == "" || strings.HasPrefix(cmd, "go test") || strings.HasPrefix(cmd, "go build -o bin/ ./cmd/..."):
					// The tests themselves, and the build done above.
				case goRunCmd.MatchString(cmd):
					run = append(run, goRunCmd.ReplaceAllString(cmd, "bin/$1"))
				case strings.HasPrefix(cmd, "bin/feedhandler") || strings.HasPrefix(cmd, "bin/subscriber") ||
					cmd == "wait" || strings.HasPrefix(cmd, "jq ") || strings.HasPrefix(cmd, "cat "):
					run = append(run, cmd)
				}
			}
			if len(run) > 0 {
				blocks = append(blocks, run)
			}
		}
	}
	if len(blocks) < 3 {
		t.Fatalf("found %d blocks of commands to run in README.md and docs/running.md, want the quick start, the separate programs and the symbols example", len(blocks))
	}
	blocks = append(blocks, []string{"bin/feedhandler --help", "bin/subscriber --help"})

	for i, b := range blocks {
		script := strings.Join(b, "\n")
		if strings.Contains(script, "jq ") && jq == "" {
			t.Logf("jq is not installed: not running\n%s", script)
			continue
		}
		work := filepath.Join(dir, "run"+string(rune('a'+i)))
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, filepath.Join(work, "bin")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, sh, "-e", "-c", script)
		cmd.Dir = work
		var stdout, stderr testenv.SyncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		out := stdout.String()
		if err != nil {
			t.Errorf("%s\nexit: %v\nstdout:\n%s\nstderr (last 2000 bytes):\n%s", script, err, out, tail(stderr.String(), 2000))
			continue
		}
		if strings.Contains(script, "--help") {
			if !strings.Contains(stderr.String()+out, "--symbols") && !strings.Contains(stderr.String()+out, "--count") {
				t.Errorf("%s: the help lists no settings:\n%s%s", script, out, stderr.String())
			}
			continue
		}
		compact := strings.NewReplacer(" ", "", "\n", "").Replace(out)
		if !strings.Contains(compact, `"ok":true`) || strings.Contains(compact, `"ok":false`) {
			t.Errorf("%s\nprinted no \"ok\": true:\n%s\nstderr (last 2000 bytes):\n%s", script, out, tail(stderr.String(), 2000))
		}
		if strings.Contains(script, "--symbols") && (strings.Contains(compact, `"received":0,`) || !strings.Contains(compact, `"symbols_not_found":null`)) {
			t.Errorf("%s: want messages received and every symbol found:\n%s", script, out)
		}
		t.Logf("ran:\n%s\n%s", script, out)
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
