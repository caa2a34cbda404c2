package natsconn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultReconnectWait is the pause between reconnect attempts by default.
const DefaultReconnectWait = 250 * time.Millisecond

// reconnectLogEvery is how often a run of identical reconnect failures is
// reported.
const reconnectLogEvery = 10 * time.Second

// Events passed to Connect's log function.
const (
	// EventConnected: the connection is up for the first time (err nil).
	EventConnected = "connected"
	// EventDisconnected: the connection was lost (err says why, if known).
	EventDisconnected = "disconnected"
	// EventReconnectFailed: an attempt to (re)connect failed; repeats of
	// the same error are reported at most every 10 s.
	EventReconnectFailed = "reconnect-failed"
	// EventWaiting: an attempt at the first connection failed within
	// FirstConnectGrace of Connect: the server may still be starting (a
	// program started beside it). Later failures are EventReconnectFailed.
	EventWaiting = "waiting"
	// EventReconnected: the connection is up again (err nil).
	EventReconnected = "reconnected"
	// EventClosed: the connection is closed for good (err is its last
	// error, nil after Close).
	EventClosed = "closed"
	// EventError: an asynchronous error, such as a permissions violation
	// (errors.Is(err, nats.ErrPermissionViolation)) or a slow consumer.
	EventError = "error"
)

// FirstConnectGrace is how long after Connect a failed first connection is
// reported as EventWaiting (routine) rather than EventReconnectFailed.
const FirstConnectGrace = 10 * time.Second

// Routine reports whether a connection event is routine, to be logged at
// info level rather than as a warning: the connection coming up, and a
// disconnection or close without an error (the program closing it).
func Routine(event string, err error) bool {
	switch event {
	case EventConnected, EventReconnected, EventWaiting:
		return true
	case EventDisconnected, EventClosed:
		return err == nil
	}
	return false
}

// ConnConfig says how to reach and authenticate to NATS. At most one of
// User/Password, Token, NKeySeedFile and CredsFile may be used.
type ConnConfig struct {
	// URL is the server URL, or several separated by commas; required.
	URL string
	// Name is the connection's name as the server shows it.
	Name string
	// User and Password authenticate by user name and password.
	User, Password string
	// Token authenticates with a token.
	Token string
	// NKeySeedFile is a file holding the user's nkey seed ("SU...").
	NKeySeedFile string
	// CredsFile is a NATS credentials file (user JWT and seed).
	CredsFile string
	// TLSCA is a PEM file of CAs to trust for the server's certificate;
	// when empty the system's roots are used.
	TLSCA string
	// TLSCert and TLSKey are the client certificate and its key, for
	// servers that require one.
	TLSCert, TLSKey string
	// InboxPrefix replaces "_INBOX" in the reply subjects of this
	// connection's requests; a subscriber user sets UserInboxPrefix(name).
	InboxPrefix string
	// ReconnectWait is the pause between reconnect attempts; default
	// DefaultReconnectWait.
	ReconnectWait time.Duration
	// Metrics, when set, is kept up to date from the connection's events
	// (connected, lost, reconnected, closed).
	Metrics *Metrics
}

// validate checks cfg; errors name the field.
func (cfg ConnConfig) validate() error {
	if strings.TrimSpace(cfg.URL) == "" {
		return errors.New("ConnConfig.URL: required")
	}
	for _, u := range strings.Split(cfg.URL, ",") {
		if _, err := url.Parse(strings.TrimSpace(u)); err != nil {
			return fmt.Errorf("ConnConfig.URL: %w", err)
		}
	}
	switch {
	case cfg.User != "" && cfg.Password == "":
		return errors.New("ConnConfig.Password: required with User")
	case cfg.Password != "" && cfg.User == "":
		return errors.New("ConnConfig.User: required with Password")
	case cfg.TLSCert != "" && cfg.TLSKey == "":
		return errors.New("ConnConfig.TLSKey: required with TLSCert")
	case cfg.TLSKey != "" && cfg.TLSCert == "":
		return errors.New("ConnConfig.TLSCert: required with TLSKey")
	case cfg.ReconnectWait < 0:
		return fmt.Errorf("ConnConfig.ReconnectWait %v: must not be negative", cfg.ReconnectWait)
	}
	var methods []string
	if cfg.User != "" {
		methods = append(methods, "User")
	}
	if cfg.Token != "" {
		methods = append(methods, "Token")
	}
	if cfg.NKeySeedFile != "" {
		methods = append(methods, "NKeySeedFile")
	}
	if cfg.CredsFile != "" {
		methods = append(methods, "CredsFile")
	}
	if len(methods) > 1 {
		return fmt.Errorf("ConnConfig.%s: exclusive with %s", methods[1], methods[0])
	}
	if p := cfg.InboxPrefix; p != "" && (strings.ContainsAny(p, "*> \t\r\n") || strings.HasSuffix(p, ".") || strings.HasPrefix(p, ".") || strings.Contains(p, "..")) {
		return fmt.Errorf("ConnConfig.InboxPrefix %q: not a literal subject prefix", p)
	}
	for _, f := range []struct{ field, path string }{
		{"NKeySeedFile", cfg.NKeySeedFile}, {"CredsFile", cfg.CredsFile},
		{"TLSCA", cfg.TLSCA}, {"TLSCert", cfg.TLSCert}, {"TLSKey", cfg.TLSKey},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("ConnConfig.%s: %w", f.field, err)
		}
	}
	return nil
}

// With the default ReconnectWait, a connection tries fastAttempts times
// fastWait apart before it waits DefaultReconnectWait (plus up to 100 ms of
// jitter) between attempts: a subscriber started with its feed handler, or
// whose feed handler's embedded server restarts, is connected (and holds
// its keys) within milliseconds of the server, not a quarter second; a
// server that stays down is asked four times a second.
const (
	fastAttempts = 25
	fastWait     = 10 * time.Millisecond
)

func reconnectDelay(attempts int) time.Duration {
	if attempts <= fastAttempts {
		return fastWait
	}
	return DefaultReconnectWait + rand.N(100*time.Millisecond)
}

// options translates a validated config, and the log function, into
// nats.go options.
func (cfg ConnConfig) options(log func(event string, err error)) ([]nats.Option, error) {
	wait := cfg.ReconnectWait
	if wait == 0 {
		wait = DefaultReconnectWait
	}
	rl := &reconnectLog{log: log, start: time.Now()}
	delay := nats.ReconnectWait(wait)
	if cfg.ReconnectWait == 0 {
		delay = nats.CustomReconnectDelay(reconnectDelay)
	}
	opts := []nats.Option{
		nats.MaxReconnects(-1),
		delay,
		// Reconnect forever: an authentication failure after a server
		// restart is reported and retried, not final.
		nats.IgnoreAuthErrorAbort(),
		nats.ConnectHandler(func(nc *nats.Conn) { rl.connected(); cfg.Metrics.up(nc, false); log(EventConnected, nil) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { rl.lost(err); cfg.Metrics.down(); log(EventDisconnected, err) }),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { rl.failed(err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { rl.reset(); cfg.Metrics.up(nc, true); log(EventReconnected, nil) }),
		nats.ClosedHandler(func(nc *nats.Conn) {
			cfg.Metrics.down()
			// The last error of a connection that was healthy when it was
			// closed is history (a server not up yet at the start).
			err := nc.LastError()
			if rl.healthy() {
				err = nil
			}
			log(EventClosed, err)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				err = fmt.Errorf("subscription %q: %w", sub.Subject, err)
			}
			log(EventError, err)
		}),
	}
	if cfg.Name != "" {
		opts = append(opts, nats.Name(cfg.Name))
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("ConnConfig.NKeySeedFile: %w", err)
		}
		opts = append(opts, o)
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	return opts, nil
}

// Connect validates cfg and connects. log, which may be nil, receives the
// connection's events (the Event constants) with their errors; it runs on
// the connection's callback goroutine and must not block.
//
// A server that cannot be reached (nothing listening, a dial timeout, a
// name that does not resolve yet) is not an error: Connect returns a
// connection that keeps trying every ReconnectWait, buffers what is
// published meanwhile, and becomes usable when a server is up. A server
// that is reached but refuses the client (an authorization violation, a
// TLS failure) is an error, since retrying would not help; an authorization
// failure matches errors.Is(err, nats.ErrAuthorization). Once connected,
// the connection reconnects forever.
func Connect(cfg ConnConfig, log func(event string, err error)) (*nats.Conn, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("natsconn: %w", err)
	}
	if log == nil {
		log = func(string, error) {}
	}
	opts, err := cfg.options(log)
	if err != nil {
		return nil, fmt.Errorf("natsconn: %w", err)
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err == nil {
		return nc, nil
	}
	if !unreachable(err) {
		return nil, fmt.Errorf("natsconn: connect to %s: %w", redactURL(cfg.URL), classify(err))
	}
	// Nothing answered: keep trying in the background.
	nc, err = nats.Connect(cfg.URL, append(opts, nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return nil, fmt.Errorf("natsconn: connect to %s: %w", redactURL(cfg.URL), classify(err))
	}
	go watchFirstConnect(nc, log)
	return nc, nil
}

// watchFirstConnect reports why a connection that is still making its first
// connection fails. nats.go calls no handler when a server it reaches
// refuses the first connection (an authorization violation): without this,
// a subscriber started before its server with wrong credentials would
// retry in silence. Each distinct error is reported once; the watch ends
// when the connection is up or closed.
func watchFirstConnect(nc *nats.Conn, log func(string, error)) {
	last := ""
	for !nc.IsConnected() && !nc.IsClosed() {
		if err := nc.LastError(); err != nil && err.Error() != last {
			last = err.Error()
			log(EventError, fmt.Errorf("natsconn: first connection refused: %w", classify(err)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unreachable reports whether a connect error means no server answered, as
// opposed to a server that answered and refused.
func unreachable(err error) bool {
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// classify maps a server's authorization refusal, which nats.go returns as
// plain text, to nats.ErrAuthorization.
func classify(err error) error {
	if strings.Contains(strings.ToLower(err.Error()), "authorization violation") && !errors.Is(err, nats.ErrAuthorization) {
		return nats.ErrAuthorization
	}
	return err
}

// redactURL hides passwords in URLs for error messages.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// reconnectLog reports reconnect failures, collapsing runs of the same
// error to one report every reconnectLogEvery.
type reconnectLog struct {
	log   func(string, error)
	start time.Time // when Connect was called
	mu    sync.Mutex
	last  string
	at    time.Time
	up    bool // the first connection was made
	ok    bool // connected, and not lost since with an error
}

func (r *reconnectLog) failed(err error) {
	msg := fmt.Sprint(err)
	r.mu.Lock()
	report := msg != r.last || time.Since(r.at) >= reconnectLogEvery
	if report {
		r.last, r.at = msg, time.Now()
	}
	event := EventReconnectFailed
	if !r.up && time.Since(r.start) < FirstConnectGrace {
		event = EventWaiting
	}
	r.mu.Unlock()
	if report {
		r.log(event, err)
	}
}

func (r *reconnectLog) connected() {
	r.mu.Lock()
	r.up, r.ok = true, true
	r.mu.Unlock()
}

// lost notes a disconnection: with an error the connection is not healthy
// until it reconnects; without one the program is closing it.
func (r *reconnectLog) lost(err error) {
	if err != nil {
		r.mu.Lock()
		r.ok = false
		r.mu.Unlock()
	}
}

func (r *reconnectLog) healthy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok
}

func (r *reconnectLog) reset() {
	r.mu.Lock()
	r.last = ""
	r.ok = true
	r.mu.Unlock()
}
