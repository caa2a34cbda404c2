package metricsrv

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// HealthPath is where the metrics server answers health checks: 200 and
// "ok" while the program is healthy, 503 and the reason while it is not or
// has not said yet (SetHealth).
const HealthPath = "/healthz"

// HealthFlag is the flag that turns either program into a health check of a
// running instance (HealthArg), for container healthchecks in images
// without a shell.
const HealthFlag = "health"

// SetHealth sets the function that tells whether the program is healthy:
// nil, or an error that says why not. It is called on every health check,
// on the HTTP server's goroutine, so it must be safe to call concurrently.
func (s *Server) SetHealth(f func() error) { s.health.Store(&f) }

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	f := s.health.Load()
	err := errors.New("starting")
	if f != nil {
		err = (*f)()
	}
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// HealthArg reports whether args ask for a health check (--health URL or
// --health=URL, as the only flag) and returns the URL.
func HealthArg(args []string) (url string, ok bool) {
	if len(args) == 0 {
		return "", false
	}
	name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
	if !strings.HasPrefix(args[0], "-") || name != HealthFlag {
		return "", false
	}
	switch {
	case hasValue && len(args) == 1:
		return value, true
	case !hasValue && len(args) == 2:
		return args[1], true
	}
	return "", true // malformed: CheckHealth says so
}

// CheckHealth asks the health endpoint at url and returns nil when it says
// healthy, else an error that says why: the program's own reason, or why it
// could not be asked.
func CheckHealth(url string, timeout time.Duration) error {
	if !strings.HasPrefix(url, "http://") {
		return fmt.Errorf("--%s %q: want the URL of a running instance's health endpoint, e.g. http://127.0.0.1:9464%s, as the only flag", HealthFlag, url, HealthPath)
	}
	c := http.Client{Timeout: timeout}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("not answering: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, text)
	}
	return nil
}

// HealthUsage is the --help paragraph of the health check, for a program
// whose metrics are at defaultAddr by default.
func HealthUsage(program, defaultAddr string) string {
	return fmt.Sprintf(`
Health check:
  %s --%s URL
        ask a running instance whether it is healthy, at URL (its metrics
        address and %s, e.g. http://%s%s), print the answer and exit 0 when
        healthy, 1 when not or when it does not answer within 2s; nothing
        else runs and no other setting is read (container healthchecks in
        images without a shell)
`, program, HealthFlag, HealthPath, defaultAddr, HealthPath)
}

// HealthMain runs the health check of args' URL: it prints the verdict and
// returns the exit code.
func HealthMain(program, url string, stdout, stderr io.Writer) int {
	if err := CheckHealth(url, 2*time.Second); err != nil {
		fmt.Fprintf(stderr, "%s: unhealthy: %v\n", program, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: healthy\n", program)
	return 0
}
