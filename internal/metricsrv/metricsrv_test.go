package metricsrv

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestCheckAddr(t *testing.T) {
	for addr, ok := range map[string]bool{"": true, "127.0.0.1:9464": true, ":0": true, "[::1]:80": true,
		"127.0.0.1": false, "localhost:http": false, "1.2.3.4:70000": false, "nonsense": false} {
		if err := CheckAddr(addr); (err == nil) != ok {
			t.Errorf("CheckAddr(%q) = %v", addr, err)
		}
	}
}

func TestServe(t *testing.T) {
	s, err := Start("127.0.0.1:0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("status %d\n%s", resp.StatusCode, body)
	}
	// The same address again: in use, and said so.
	if _, err := Start(s.Addr(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second listener on %s: %v", s.Addr(), err)
	}
	off, err := Start("", zerolog.Nop())
	if err != nil || off.Addr() != "" || off.Registry == nil {
		t.Fatalf("metrics off: %v %q", err, off.Addr())
	}
	off.Close()
	if _, err := Start("192.0.2.1:9464", zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Fatalf("listening on an address that is not local: %v", err)
	}
}
