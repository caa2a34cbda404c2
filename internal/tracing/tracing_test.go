package tracing

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStart: a trace file is written and holds a trace's header; an empty
// path traces nothing; a path that cannot be created is an error naming it.
func TestStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.trace")
	stop, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 16 || string(b[:11]) != "go 1.26 tra" {
		t.Errorf("trace file starts %q, want a Go execution trace header", b[:min(len(b), 16)])
	}
	stop, err = Start("")
	if err != nil || stop() != nil {
		t.Errorf("empty path: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "missing", "run.trace")
	if _, err := Start(bad); err == nil {
		t.Errorf("Start(%q) succeeded", bad)
	}
}
