package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteDayCount: the day --day writes has the messages asked for, as
// countITCH reads them back, and a truncated file is an error naming where.
func TestWriteDayCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "day.itch")
	if err := writeDay(path, 100_000); err != nil {
		t.Fatal(err)
	}
	n, err := countITCH(path)
	if err != nil || n != 100_000 {
		t.Fatalf("countITCH: %d, %v; want 100000", n, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := countITCH(path); err == nil || !strings.Contains(err.Error(), "message 100000") {
		t.Errorf("truncated file: %v, want an error naming message 100000", err)
	}
}

// TestDaySettings: bad --day settings are refused naming the flag.
func TestDaySettings(t *testing.T) {
	good := daySettings{count: 1_000_000, channels: []int{1, 4}, subs: []int{1, 2}, rounds: 3, batch: 16, timeout: time.Minute}
	if err := good.validate(); err != nil {
		t.Fatalf("good settings: %v", err)
	}
	for flag, bad := range map[string]func(*daySettings){
		"--count":    func(s *daySettings) { s.count = 10 },
		"--repeat":   func(s *daySettings) { s.rounds = 0 },
		"--batch":    func(s *daySettings) { s.batch = 2000 },
		"--channels": func(s *daySettings) { s.channels = []int{40} },
		"--subs":     func(s *daySettings) { s.subs = []int{9} },
		"--timeout":  func(s *daySettings) { s.timeout = time.Millisecond },
	} {
		s := good
		bad(&s)
		if err := s.validate(); err == nil || !strings.HasPrefix(err.Error(), flag) {
			t.Errorf("%s: %v, want an error naming it", flag, err)
		}
	}
	// A given file needs no --count.
	s := good
	s.file, s.count = "day.itch", 0
	if err := s.validate(); err != nil {
		t.Errorf("--itch-file without --count: %v", err)
	}
}

// TestSpread: the median, and the range with more than one value.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want string
	}{
		{nil, "-"},
		{[]float64{2}, "2.0"},
		{[]float64{3, 1, 2}, "2.0 (1.0–3.0)"},
		{[]float64{4, 1, 2, 3}, "2.5 (1.0–4.0)"},
	} {
		if got := spread(c.v, 1, "%.1f"); got != c.want {
			t.Errorf("spread(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestDaySection: a day run appends its section to a Markdown file once,
// replaces it on the next run, and daySection finds it for a latency run
// to keep.
func TestDaySection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	if err := os.WriteFile(path, []byte("# latency\n\ntable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &dayResult{Date: "first", ITCHMessages: 7}
	if err := writeDaySection(path, r); err != nil {
		t.Fatal(err)
	}
	r.Date = "second"
	if err := writeDaySection(path, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	md := string(b)
	if !strings.HasPrefix(md, "# latency\n\ntable\n\n"+dayBegin) || strings.Count(md, dayBegin) != 1 ||
		strings.Contains(md, "first") || !strings.Contains(md, "second") {
		t.Fatalf("after two day runs:\n%s", md)
	}
	sec, ok := daySection(md)
	if !ok || !strings.HasPrefix(sec, dayBegin) || !strings.HasSuffix(sec, dayEnd+"\n") {
		t.Errorf("daySection: %v %q", ok, sec)
	}
	if _, ok := daySection("# nothing here"); ok {
		t.Error("daySection found a section in a file without one")
	}
}
