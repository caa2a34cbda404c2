package natsconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults and limits of [ServerConfig].
const (
	// DefaultHost is the address the embedded server listens on by default.
	DefaultHost = "127.0.0.1"
	// DefaultFeed is the feed name used when ServerConfig.Feed is empty.
	DefaultFeed = "tickcast"
	// DefaultMaxPayload is the largest message the server accepts by default.
	DefaultMaxPayload = 1 << 20
	// MinMaxPayload is the smallest MaxPayload allowed: a recovery reply part
	// carries up to 60,000 bytes plus headers.
	MinMaxPayload = 64 << 10
	// MaxMaxPayload is the largest MaxPayload allowed (the server's pending
	// limit per client).
	MaxMaxPayload = 64 << 20
	// startTimeout bounds how long StartServer waits for the server.
	startTimeout = 5 * time.Second
)

// TLSFiles names PEM files for the embedded server's TLS.
type TLSFiles struct {
	// Cert is the server certificate (chain), required.
	Cert string
	// Key is the server certificate's private key, required.
	Key string
	// CA, when set, makes the server require client certificates signed
	// by it (mutual TLS). Without it, clients are not asked for one.
	CA string
}

// ServerConfig configures the embedded NATS server; the zero value is a
// server on a free loopback port that everyone may use.
type ServerConfig struct {
	// Host is the listen address; default DefaultHost.
	Host string
	// Port is the client port; 0 picks a free one (see Server.ClientURL).
	Port int
	// Feed is the feed's name in the recovery subjects
	// (tickcast.FEED.*); default DefaultFeed. It scopes the users'
	// permissions.
	Feed string
	// Users, when any, are the only clients let in, each with the
	// permissions of its role (see the package doc). Exclusive with Token.
	Users []User
	// Token, when set, is the one secret every client must present; such
	// clients may publish and subscribe to anything. Exclusive with Users.
	Token string
	// TLS, when set, makes the server require TLS from every client.
	TLS *TLSFiles
	// MaxPayload is the largest message accepted, in bytes; default
	// DefaultMaxPayload, allowed MinMaxPayload..MaxMaxPayload.
	MaxPayload int32
	// Log, when set, receives the server's notices, warnings and errors;
	// level is "info", "warn", "error" or "fatal". When nil the server
	// logs nothing.
	Log func(level, msg string)
}

// Server is a running embedded NATS server.
type Server struct {
	srv  *server.Server
	url  string
	once sync.Once
}

// withDefaults returns cfg with empty fields set to their defaults.
func (cfg ServerConfig) withDefaults() ServerConfig {
	if cfg.Host == "" {
		cfg.Host = DefaultHost
	}
	if cfg.Feed == "" {
		cfg.Feed = DefaultFeed
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	return cfg
}

// validate checks a defaulted config; errors name the field.
func (cfg ServerConfig) validate() error {
	if strings.ContainsAny(cfg.Host, " \t/") {
		return fmt.Errorf("ServerConfig.Host %q: not a host name or address", cfg.Host)
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return fmt.Errorf("ServerConfig.Port %d: want 0..65535", cfg.Port)
	}
	if !validName(cfg.Feed) {
		return fmt.Errorf("ServerConfig.Feed %q: want letters, digits, '-' or '_'", cfg.Feed)
	}
	if cfg.MaxPayload < MinMaxPayload || cfg.MaxPayload > MaxMaxPayload {
		return fmt.Errorf("ServerConfig.MaxPayload %d: want %d..%d", cfg.MaxPayload, MinMaxPayload, MaxMaxPayload)
	}
	if cfg.Token != "" && len(cfg.Users) > 0 {
		return errors.New("ServerConfig.Token: exclusive with Users")
	}
	seen := make(map[string]bool, len(cfg.Users))
	for i, u := range cfg.Users {
		if err := u.validate(); err != nil {
			return fmt.Errorf("ServerConfig.Users[%d]: %w", i, err)
		}
		if seen[u.Name] {
			return fmt.Errorf("ServerConfig.Users[%d]: user %q defined twice", i, u.Name)
		}
		seen[u.Name] = true
	}
	if t := cfg.TLS; t != nil {
		if t.Cert == "" {
			return errors.New("ServerConfig.TLS.Cert: required")
		}
		if t.Key == "" {
			return errors.New("ServerConfig.TLS.Key: required")
		}
	}
	return nil
}

// options translates a validated config into nats-server options.
func (cfg ServerConfig) options() (*server.Options, error) {
	opts := &server.Options{
		Host:       cfg.Host,
		Port:       cfg.Port,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true,
		NoLog:      cfg.Log == nil,
		JetStream:  false,
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	opts.Authorization = cfg.Token
	for _, u := range cfg.Users {
		perms := permissions(cfg.Feed, u)
		if u.NKey != "" {
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: perms})
		} else {
			opts.Users = append(opts.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: perms})
		}
	}
	if t := cfg.TLS; t != nil {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: t.Cert,
			KeyFile:  t.Key,
			CaFile:   t.CA,
			Verify:   t.CA != "",
		})
		if err != nil {
			return nil, fmt.Errorf("ServerConfig.TLS: %w", err)
		}
		opts.TLSConfig = tc
		opts.TLS = true
		opts.TLSVerify = t.CA != ""
		opts.TLSTimeout = 2
	}
	return opts, nil
}

// StartServer validates cfg, starts the server and waits (up to 5 s) until
// it accepts connections.
func StartServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("natsconn: %w", err)
	}
	opts, err := cfg.options()
	if err != nil {
		return nil, fmt.Errorf("natsconn: %w", err)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsconn: nats server: %w", err)
	}
	lg := &serverLog{fn: cfg.Log, fatal: make(chan string, 1)}
	srv.SetLogger(lg, false, false)
	srv.Start() // returns once the listener is up or has failed
	deadline := time.Now().Add(startTimeout)
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		select {
		case msg := <-lg.fatal:
			srv.Shutdown()
			return nil, fmt.Errorf("natsconn: nats server on %s: %s", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), msg)
		default:
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			return nil, fmt.Errorf("natsconn: nats server on %s not ready after %v", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), startTimeout)
		}
	}
	return &Server{srv: srv, url: clientURL(srv, cfg.TLS != nil)}, nil
}

// clientURL returns the URL clients on this machine use to reach srv.
func clientURL(srv *server.Server, tls bool) string {
	host, port := DefaultHost, 0
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		port = a.Port
		switch {
		case a.IP.IsUnspecified() && a.IP.To4() == nil:
			host = "::1"
		case a.IP.IsUnspecified():
			host = DefaultHost
		default:
			host = a.IP.String()
		}
	}
	u := url.URL{Scheme: "nats", Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if tls {
		u.Scheme = "tls"
	}
	return u.String()
}

// ClientURL returns the URL clients on this machine connect to, with the
// actual port (useful with Port 0); its scheme is tls when TLS is on.
func (s *Server) ClientURL() string { return s.url }

// Shutdown closes every client connection and stops the server, waiting
// until it has stopped. Calling it again does nothing.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	})
}

// Interest reports whether any client of the server subscribes to subject
// (in the global account, where the server's users are). It takes the
// account's locks: call it off hot paths.
func (s *Server) Interest(subject string) bool {
	acc := s.srv.GlobalAccount()
	return acc != nil && acc.SubscriptionInterest(subject)
}

// NumClients returns the number of connected clients; meant for tests and
// diagnostics.
func (s *Server) NumClients() int { return s.srv.NumClients() }

// serverLog adapts the server's logger to ServerConfig.Log and catches a
// fatal error (such as a listen failure) for StartServer.
type serverLog struct {
	fn    func(level, msg string)
	fatal chan string
}

func (l *serverLog) emit(level, format string, v []any) {
	if l.fn != nil {
		l.fn(level, fmt.Sprintf(format, v...))
	}
}

// Noticef implements server.Logger.
func (l *serverLog) Noticef(format string, v ...any) { l.emit("info", format, v) }

// Warnf implements server.Logger.
func (l *serverLog) Warnf(format string, v ...any) { l.emit("warn", format, v) }

// Errorf implements server.Logger.
func (l *serverLog) Errorf(format string, v ...any) { l.emit("error", format, v) }

// Fatalf implements server.Logger; the server keeps running or stops on its
// own, it does not exit the process.
func (l *serverLog) Fatalf(format string, v ...any) {
	l.emit("fatal", format, v)
	select {
	case l.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}

// Debugf implements server.Logger; debug output is off.
func (l *serverLog) Debugf(string, ...any) {}

// Tracef implements server.Logger; tracing is off.
func (l *serverLog) Tracef(string, ...any) {}
