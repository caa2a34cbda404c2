package natsconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nuid"
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
	// DefaultClusterName is the cluster name used when ClusterConfig.Name
	// is empty.
	DefaultClusterName = "tickcast"
	// startTimeout bounds how long StartServer waits for the server.
	startTimeout = 5 * time.Second
)

// ClusterConfig joins the embedded server to a NATS cluster: it listens for
// routes from the other nodes and opens routes to them.
//
// Routes are authenticated when Password is set: every node of the cluster
// must then have the same User and Password, which the server asks of the
// routes it accepts and presents on the routes it opens. Without a
// password, anyone who reaches the cluster port joins the cluster and sees
// all its traffic, so a server with users or a token refuses a cluster
// without a password unless Host is a loopback address.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every node; default
	// DefaultClusterName.
	Name string
	// Host is the address routes are accepted on; default DefaultHost.
	Host string
	// Port is the route port; 0 picks a free one (see Server.ClusterURL).
	Port int
	// Routes are the route URLs (nats-route://host:port) of the other
	// nodes; a node's own URL may be among them.
	Routes []string
	// User names the route credentials; default DefaultClusterName when
	// Password is set.
	User string
	// Password, when set, authenticates routes in both directions.
	Password string
}

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
	// Name is the server's name, unique in its cluster; a JetStream node
	// must keep it across restarts. Default: "tickcast-HOST-PORT" from Host
	// and Port, or from Cluster.Host and Cluster.Port when Port is 0, or a
	// random name when both ports are 0.
	Name string
	// JetStream enables JetStream (for the session record, see
	// SessionBucket), in every user's account. Requires StoreDir.
	JetStream bool
	// StoreDir is the directory of JetStream's file store; required with
	// JetStream. A node restarted with the same StoreDir (and Name) keeps
	// its streams.
	StoreDir string
	// JetStreamMaxStore, when above 0, limits JetStream's file store to
	// this many bytes; 0 leaves the server's default (most of the disk's
	// free space).
	JetStreamMaxStore int64
	// Cluster, when set, makes the server a node of a NATS cluster.
	Cluster *ClusterConfig
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
	cfg  ServerConfig    // as started, for SetUsers
	opts *server.Options // as started
	mu   sync.Mutex      // serializes SetUsers
}

// defaultName derives a server name from an address.
func defaultName(host string, port int) string {
	name := "tickcast-" + host + "-" + strconv.Itoa(port)
	return strings.NewReplacer(":", "_", "[", "", "]", "", "%", "_").Replace(name)
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
	if c := cfg.Cluster; c != nil {
		cc := *c
		if cc.Name == "" {
			cc.Name = DefaultClusterName
		}
		if cc.Host == "" {
			cc.Host = DefaultHost
		}
		if cc.User == "" && cc.Password != "" {
			cc.User = DefaultClusterName
		}
		cfg.Cluster = &cc
	}
	if cfg.Name == "" {
		switch {
		case cfg.Port != 0:
			cfg.Name = defaultName(cfg.Host, cfg.Port)
		case cfg.Cluster != nil && cfg.Cluster.Port != 0:
			cfg.Name = defaultName(cfg.Cluster.Host, cfg.Cluster.Port)
		default:
			cfg.Name = "tickcast-" + nuid.Next()
		}
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
	if strings.ContainsAny(cfg.Name, " \t\r\n") {
		return fmt.Errorf("ServerConfig.Name %q: must not contain spaces", cfg.Name)
	}
	if cfg.JetStream && cfg.StoreDir == "" {
		return errors.New("ServerConfig.StoreDir: required with JetStream")
	}
	if cfg.StoreDir != "" && !cfg.JetStream {
		return errors.New("ServerConfig.StoreDir: set without JetStream")
	}
	if c := cfg.Cluster; c != nil {
		if err := c.validate(len(cfg.Users) > 0 || cfg.Token != ""); err != nil {
			return err
		}
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

// validate checks a defaulted cluster config; errors name the field. auth
// says whether the server authenticates its clients.
func (c ClusterConfig) validate(auth bool) error {
	if !validName(c.Name) {
		return fmt.Errorf("ServerConfig.Cluster.Name %q: want letters, digits, '-' or '_'", c.Name)
	}
	if strings.ContainsAny(c.Host, " \t/") {
		return fmt.Errorf("ServerConfig.Cluster.Host %q: not a host name or address", c.Host)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("ServerConfig.Cluster.Port %d: want 0..65535", c.Port)
	}
	for i, r := range c.Routes {
		if _, err := routeURL(r, "", ""); err != nil {
			return fmt.Errorf("ServerConfig.Cluster.Routes[%d]: %w", i, err)
		}
	}
	if auth && c.Password == "" && !isLoopback(c.Host) {
		return fmt.Errorf("ServerConfig.Cluster.Password: required when clients authenticate and Host %q is not a loopback address", c.Host)
	}
	return nil
}

// routeURL parses a route URL and, when password is set and the URL has no
// credentials, adds user and password.
func routeURL(s, user, password string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	if u.Scheme != "nats-route" && u.Scheme != "nats" {
		return nil, fmt.Errorf("%q: want nats-route://host:port", s)
	}
	if u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("%q: want nats-route://host:port", s)
	}
	if password != "" && u.User == nil {
		u.User = url.UserPassword(user, password)
	}
	return u, nil
}

// isLoopback reports whether host is "localhost" or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// options translates a validated config into nats-server options.
func (cfg ServerConfig) options() (*server.Options, error) {
	opts := &server.Options{
		Host:       cfg.Host,
		Port:       cfg.Port,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true,
		NoLog:      cfg.Log == nil,
		ServerName: cfg.Name,
		JetStream:  cfg.JetStream,
		StoreDir:   cfg.StoreDir,
	}
	if cfg.JetStreamMaxStore > 0 {
		opts.JetStreamMaxStore = cfg.JetStreamMaxStore
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if c := cfg.Cluster; c != nil {
		opts.Cluster = server.ClusterOpts{
			Name:     c.Name,
			Host:     c.Host,
			Port:     c.Port,
			Username: c.User,
			Password: c.Password,
		}
		if opts.Cluster.Port == 0 {
			opts.Cluster.Port = server.RANDOM_PORT
		}
		for _, r := range c.Routes {
			u, err := routeURL(r, c.User, c.Password)
			if err != nil { // checked by validate
				return nil, fmt.Errorf("ServerConfig.Cluster.Routes: %w", err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	opts.Authorization = cfg.Token
	setUsers(opts, cfg.Feed, cfg.Users)
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

// setUsers gives opts users, each with its permissions on feed's subjects,
// in place of any it had.
func setUsers(opts *server.Options, feed string, users []User) {
	opts.Users, opts.Nkeys = nil, nil
	for _, u := range users {
		perms := permissions(feed, u)
		if u.NKey != "" {
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: perms})
		} else {
			opts.Users = append(opts.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: perms})
		}
	}
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
	return &Server{srv: srv, url: clientURL(srv, cfg.TLS != nil), cfg: cfg, opts: opts.Clone()}, nil
}

// SetUsers replaces the server's users, as a reload of its configuration:
// a client whose user is gone is disconnected, and the others' permissions
// (entitlements among them) are those of their new entry from now on. The
// server must have been started with users.
func (s *Server) SetUsers(users []User) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cfg.Users) == 0 {
		return errors.New("natsconn: SetUsers: the server was started without users")
	}
	cfg := s.cfg
	cfg.Users = users
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("natsconn: SetUsers: %w", err)
	}
	if len(users) == 0 {
		return errors.New("natsconn: SetUsers: no users (a server started with users keeps some)")
	}
	opts := s.opts.Clone()
	setUsers(opts, cfg.Feed, users)
	// The ports the server took (Port 0 picks one); a reload may not
	// change them.
	if a, ok := s.srv.Addr().(*net.TCPAddr); ok {
		opts.Port = a.Port
	}
	if a := s.srv.ClusterAddr(); a != nil {
		opts.Cluster.Port = a.Port
	}
	if err := s.srv.ReloadOptions(opts); err != nil {
		return fmt.Errorf("natsconn: SetUsers: %w", err)
	}
	s.cfg, s.opts = cfg, opts
	return nil
}

// listenURL returns the URL, with scheme, of a listener's address as a
// client on this machine reaches it.
func listenURL(scheme string, a net.Addr) string {
	host, port := DefaultHost, 0
	if a, ok := a.(*net.TCPAddr); ok {
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
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	return u.String()
}

// clientURL returns the URL clients on this machine use to reach srv.
func clientURL(srv *server.Server, tls bool) string {
	if tls {
		return listenURL("tls", srv.Addr())
	}
	return listenURL("nats", srv.Addr())
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

// Name returns the server's name (ServerConfig.Name or its default).
func (s *Server) Name() string { return s.srv.Name() }

// ClusterURL returns the route URL (nats-route://host:port) other nodes of
// the cluster use to reach this one, with the actual port (useful with
// ClusterConfig.Port 0); "" when the server is not in a cluster.
func (s *Server) ClusterURL() string {
	a := s.srv.ClusterAddr()
	if a == nil {
		return ""
	}
	return listenURL("nats-route", a)
}

// Peers returns the names of the other nodes this server has routes to,
// sorted; meant for tests and diagnostics.
func (s *Server) Peers() []string {
	rz, err := s.srv.Routez(nil)
	if err != nil {
		return nil
	}
	var names []string
	for _, r := range rz.Routes {
		if !slices.Contains(names, r.RemoteName) {
			names = append(names, r.RemoteName)
		}
	}
	slices.Sort(names)
	return names
}

// MetaLeader returns the name of the JetStream meta leader as this server
// knows it: "" when JetStream is off, or clustered and without a leader.
// A server that is not in a cluster is its own leader. Meant for tests and
// diagnostics.
func (s *Server) MetaLeader() string {
	if !s.srv.JetStreamEnabled() {
		return ""
	}
	if !s.srv.JetStreamIsClustered() {
		return s.srv.Name()
	}
	jsz, err := s.srv.Jsz(nil)
	if err != nil || jsz.Meta == nil {
		return ""
	}
	return jsz.Meta.Leader
}

// JetStreamPeers returns, on the JetStream meta leader of a cluster, the
// names of the nodes (itself among them) that run JetStream and have
// reported to it, so that streams may be placed on them, sorted; nil on
// any other server. Meant for tests and diagnostics.
func (s *Server) JetStreamPeers() []string {
	if !s.srv.JetStreamEnabled() || !s.srv.JetStreamIsClustered() {
		return nil
	}
	peers := s.srv.JetStreamClusterPeers()
	slices.Sort(peers)
	return peers
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

// JetStreamMaxStore returns the bytes JetStream may store on this server
// (ServerConfig.JetStreamMaxStore, or the server's default from its
// disk's free space); 0 when JetStream is off.
func (s *Server) JetStreamMaxStore() int64 {
	if c := s.srv.JetStreamConfig(); c != nil {
		return c.MaxStore
	}
	return 0
}

// IsStreamLeader reports whether this server leads the replicated stream
// (in the global account, where the server's users are); meant for tests
// and diagnostics.
func (s *Server) IsStreamLeader(stream string) bool {
	return s.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}
