// Package metricsrv serves a program's Prometheus metrics over HTTP at
// /metrics (the --metrics-addr setting of both binaries), from a registry of
// the program's own, with the Go runtime and process collectors. A program
// left at its default address can fall back to the next free port
// (StartDefault), and a server can register itself for Prometheus's
// file-based service discovery (Server.Register).
package metricsrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
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
	sdFile   string // the service discovery file Register wrote, which Close removes
	health   atomic.Pointer[func() error]
}

// Start listens on addr and serves Registry at /metrics on its own
// goroutine; with addr empty it only makes the registry. A listen error
// (address in use, a host that is not local) is returned, naming
// --metrics-addr: the caller reports it and exits, rather than running
// without the metrics it was asked for.
func Start(addr string, log zerolog.Logger) (*Server, error) {
	return StartDefault(addr, 1, log)
}

// StartDefault is Start for a program left at its default address: when
// addr's port is in use it tries the ports after it, ports in all (addr's
// included), serves on the first free one and logs which one it took. Only
// an address in use moves it on; any other listen error, or every port of
// the range in use, is returned. With ports 1 it is Start.
func StartDefault(addr string, ports int, log zerolog.Logger) (*Server, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &Server{Registry: reg}
	if addr == "" {
		return s, nil
	}
	ln, err := listen(addr, ports)
	if err != nil {
		return nil, err
	}
	if got := ln.Addr().String(); got != addr && ports > 1 {
		log.Warn().Str("addr", got).Str("default", addr).
			Msg("default metrics port in use (another program serves there): serving on the next free port")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc(HealthPath, s.serveHealth)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "tickcast: metrics at /metrics, health at "+HealthPath)
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

// listen listens on addr, or, while the port is in use, on the ports after
// it, ports in all. Its errors name --metrics-addr.
func listen(addr string, ports int) (net.Listener, error) {
	host, portText, _ := net.SplitHostPort(addr) // CheckAddr checked it
	port, _ := strconv.Atoi(portText)
	ports = max(1, min(ports, 65536-port))
	if port == 0 {
		ports = 1
	}
	for i := range ports {
		a := net.JoinHostPort(host, strconv.Itoa(port+i))
		ln, err := net.Listen("tcp", a)
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("metrics: --metrics-addr %s: %w", addr, err)
		}
		if ports == 1 {
			return nil, fmt.Errorf("metrics: --metrics-addr %s: %w (another program serves there: set --metrics-addr to a free address; port 0 takes any free port)", addr, err)
		}
	}
	return nil, fmt.Errorf("metrics: every port of %s..%d is in use (the default --metrics-addr and the %d after it): set --metrics-addr to a free address; port 0 takes any free port",
		addr, port+ports-1, ports-1)
}

// Addr returns the address the server listens on (the free port chosen for
// port 0), or "" when metrics are off.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Register writes the server's target for Prometheus's file-based service
// discovery (file_sd_configs) into dir, an existing directory, and returns
// the file's path: PROGRAM-HOST-PORT.json, unique on the host (HOST is the
// host name; a program that restarts on the same port replaces its file),
// holding one target group with the labels. The target is the listen
// address, or the host name with the port when the server listens on every
// interface. The file is written under a temporary name (hidden, ending in
// .tmp, which a *.json pattern does not match) and renamed into place, so
// Prometheus never reads it half written. Close removes it.
func (s *Server) Register(dir, program string, labels map[string]string) (string, error) {
	if s.ln == nil {
		return "", errors.New("metrics: service discovery needs metrics on (--metrics-addr)")
	}
	hostname, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("metrics: service discovery: %w", err)
	}
	host, port, _ := net.SplitHostPort(s.ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = hostname
	}
	b, err := json.MarshalIndent([]targetGroup{{Targets: []string{net.JoinHostPort(host, port)}, Labels: labels}}, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, program+"-"+hostname+"-"+port+".json")
	if err := writeAtomic(path, append(b, '\n')); err != nil {
		return "", fmt.Errorf("metrics: service discovery: %w", err)
	}
	s.sdFile = path
	return path, nil
}

// targetGroup is one entry of a file_sd file.
type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// writeAtomic writes b to path through a temporary file in the same
// directory and a rename, readable by everyone (Prometheus may run as
// another user).
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Close removes the service discovery file, if Register wrote one, and
// stops the server, letting a scrape in progress finish for up to a second.
func (s *Server) Close() {
	if s.sdFile != "" {
		os.Remove(s.sdFile)
		s.sdFile = ""
	}
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	<-s.done
}
