// Package metricsrv serves a program's Prometheus metrics over HTTP at
// /metrics (the --metrics-addr setting of both binaries), from a registry of
// the program's own, with the Go runtime and process collectors.
package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// CheckAddr checks a --metrics-addr value: empty (metrics off) or
// host:port with a numeric port (0 picks a free one).
func CheckAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port, e.g. 127.0.0.1:9464 (empty: no metrics)", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port %q is not a number in 0..65535", addr, port)
	}
	return nil
}

// Server is a program's metrics registry and, unless metrics are off, the
// HTTP server that exposes it.
type Server struct {
	// Registry is where the program registers its collectors. It exists
	// even when metrics are off, so registering needs no condition.
	Registry *prometheus.Registry
	ln       net.Listener
	srv      *http.Server
	done     chan struct{}
}

// Start listens on addr and serves Registry at /metrics on its own
// goroutine; with addr empty it only makes the registry. A listen error
// (address in use, a host that is not local) is returned: the caller
// reports it and exits, rather than running without the metrics it was
// asked for.
func Start(addr string, log zerolog.Logger) (*Server, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &Server{Registry: reg}
	if addr == "" {
		return s, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "tickcast: metrics at /metrics")
	})
	s.ln, s.done = ln, make(chan struct{})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("metrics server stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving Prometheus metrics at /metrics")
	return s, nil
}

// Addr returns the address the server listens on (the free port chosen for
// port 0), or "" when metrics are off.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops the server, letting a scrape in progress finish for up to a
// second.
func (s *Server) Close() {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	<-s.done
}
