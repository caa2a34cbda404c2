package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

// TestWrite: itchgen writes the generator's day, plain and gzipped, and
// reports what it wrote; feed/itch reads the files back.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--seed", "5", "--stocks", "30", "--orders", "1000", "--count", "30000"}
	g, err := itchgen.New(itchgen.Config{Seed: 5, Stocks: 30, Orders: 1000, Messages: 30000})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if _, err := g.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"day.itch", "day.itch.gz"} {
		path := filepath.Join(dir, name)
		var out, errb bytes.Buffer
		if code := run(append([]string{"--out", path}, args...), &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errb.String())
		}
		var s summary
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatalf("%s: summary %q: %v", name, out.String(), err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if s.Messages != 30000 || s.Bytes != fi.Size() || s.Gzip != strings.HasSuffix(name, ".gz") || s.OrdersHigh < 1000 {
			t.Errorf("%s: summary %+v, file of %d bytes", name, s, fi.Size())
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		src, err := itch.NewSource(f, itch.Config{OrderCapacity: 4000})
		if err != nil {
			t.Fatal(err)
		}
		var m feed.Msg
		for src.Next(&m) == nil {
		}
		f.Close()
		if st := src.Stats(); st.Messages != 30000 || src.Offset() != int64(want.Len()) || src.MidDay() || src.Books().Orders() != s.OrdersLive {
			t.Errorf("%s: feed/itch read %d messages, %d bytes (want %d), %d live orders (summary %d), mid-day %v",
				name, st.Messages, src.Offset(), want.Len(), src.Books().Orders(), s.OrdersLive, src.MidDay())
		}
	}
	plain, _ := os.ReadFile(filepath.Join(dir, "day.itch"))
	if !bytes.Equal(plain, want.Bytes()) {
		t.Error("the file differs from the generator's day")
	}
}

// TestStdout: --out - writes the day to stdout and the summary to stderr.
func TestStdout(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--out", "-", "--stocks", "5", "--orders", "50", "--count", "500"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var s summary
	if err := json.Unmarshal(errb.Bytes(), &s); err != nil || s.Bytes != int64(out.Len()) || s.Messages != 500 {
		t.Errorf("summary %q (%v) for %d bytes on stdout", errb.String(), err, out.Len())
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{}, "--out"},
		{[]string{"--out", "x", "--stocks", "70000"}, "--stocks"},
		{[]string{"--out", "x", "--orders", "-1"}, "--orders"},
		{[]string{"--out", "x", "--stocks", "10", "--count", "5"}, "--count"},
		{[]string{"--out", "x", "--count", "0"}, "--count"},
		{[]string{"--out", "x", "extra"}, "extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.flag) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", tc.args, code, errb.String(), tc.flag)
		}
	}
}
