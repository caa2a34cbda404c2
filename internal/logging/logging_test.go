package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestFormats(t *testing.T) {
	var buf bytes.Buffer
	l, err := New("json", "info", &buf)
	if err != nil {
		t.Fatal(err)
	}
	l.Info().Int("channel", 3).Msg("hello")
	l.Debug().Msg("hidden")
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["channel"] != float64(3) || m["message"] != "hello" {
		t.Fatalf("json log %q: %v", buf.String(), err)
	}
	buf.Reset()
	l, _ = New("console", "debug", &buf)
	l.Debug().Msg("shown")
	if !strings.Contains(buf.String(), "shown") || strings.HasPrefix(buf.String(), "{") {
		t.Fatalf("console log %q", buf.String())
	}
	// Not a terminal: auto means JSON.
	buf.Reset()
	l, _ = New("auto", "info", &buf)
	l.Info().Msg("x")
	if !strings.HasPrefix(buf.String(), "{") {
		t.Fatalf("auto on a buffer: %q", buf.String())
	}
	if _, err := New("xml", "info", nil); err == nil || !strings.Contains(err.Error(), "log-format") {
		t.Fatalf("bad format: %v", err)
	}
	if _, err := New("json", "loud", nil); err == nil || !strings.Contains(err.Error(), "log-level") {
		t.Fatalf("bad level: %v", err)
	}
}
