package hgrm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// A written file is a percentile distribution in µs: a header, then lines
// "value percentile total-count 1/(1-percentile)" whose last one holds the
// largest value and every count.
func TestWriteMicroseconds(t *testing.T) {
	h := hdrhistogram.New(1, 60e9, 3)
	for i := int64(1); i <= 1000; i++ {
		if err := h.RecordValue(i * 1000); err != nil { // 1..1000 µs
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "x.hgrm")
	if err := Write(path, h); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var last []string
	header := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Value"):
			header = true
		case l != "" && !strings.HasPrefix(l, "#"):
			last = strings.Fields(l)
		}
	}
	if !header || len(last) != 4 {
		t.Fatalf("no header or no percentile lines in:\n%s", b)
	}
	v, _ := strconv.ParseFloat(last[0], 64)
	n, _ := strconv.ParseInt(last[2], 10, 64)
	if v < 999 || v > 1001 || n != 1000 {
		t.Errorf("last line %q: want about 1000 µs and count 1000", last)
	}
}

// An empty path writes nothing and is not an error; a path that cannot be
// created is.
func TestWritePaths(t *testing.T) {
	h := hdrhistogram.New(1, 60e9, 3)
	if err := Write("", h); err != nil {
		t.Errorf("Write(\"\") = %v", err)
	}
	if err := Write(filepath.Join(t.TempDir(), "no", "such", "dir.hgrm"), h); err == nil {
		t.Error("Write into a missing directory: no error")
	}
}
