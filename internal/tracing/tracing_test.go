package tracing

import (
	"os"
	"path/filepath"
	"strings"
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

// TestStartCPU: a CPU profile is written as a gzip-compressed profile; an
// empty path profiles nothing; StartBoth writes both files, and a path that
// cannot be created is an error naming the flag, with no trace left behind.
func TestStartCPU(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "run.trace")
	stop, err := StartBoth(tr, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cpu)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("cpu profile starts %q, want gzip (a pprof profile)", b[:min(len(b), 4)])
	}
	if b, err := os.ReadFile(tr); err != nil || len(b) < 11 || string(b[:11]) != "go 1.26 tra" {
		t.Errorf("trace beside the profile: %v, starts %q", err, b[:min(len(b), 11)])
	}
	stop, err = StartCPU("")
	if err != nil || stop() != nil {
		t.Errorf("empty path: %v", err)
	}
	tr2 := filepath.Join(dir, "second.trace")
	_, err = StartBoth(tr2, filepath.Join(dir, "missing", "cpu.pprof"))
	if err == nil || !strings.HasPrefix(err.Error(), "cpuprofile: ") {
		t.Errorf("StartBoth with a bad profile path: %v, want an error naming cpuprofile", err)
	}
	if _, err := os.Stat(tr2); !os.IsNotExist(err) {
		t.Errorf("the trace of a failed StartBoth was left behind: %v", err)
	}
}
