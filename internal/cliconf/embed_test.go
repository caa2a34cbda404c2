package cliconf

import (
	"strings"
	"testing"
)

// Shared is a group of settings that several programs embed.
type Shared struct {
	URL  string `flag:"url" default:"nats://127.0.0.1:4222" help:"server"`
	User string `flag:"user" help:"user"`
}

func TestEmbeddedSettings(t *testing.T) {
	var s struct {
		Shared
		Rate    float64 `flag:"rate" default:"5" help:"rate"`
		Origins Origins
	}
	env := map[string]string{"TICKCAST_USER": "alice"}
	if err := Load("x", []string{"--url", "nats://h:1"}, func(k string) string { return env[k] }, &s); err != nil {
		t.Fatal(err)
	}
	if s.URL != "nats://h:1" || s.User != "alice" || s.Rate != 5 {
		t.Fatalf("%+v", s)
	}
	if s.Origins["url"] != "flag" || s.Origins["user"] != "env TICKCAST_USER" {
		t.Fatalf("origins %v", s.Origins)
	}
	if u := Usage("x", &s); !strings.Contains(u, "--url") || !strings.Contains(u, "TICKCAST_USER") {
		t.Fatalf("usage misses embedded settings:\n%s", u)
	}
}
