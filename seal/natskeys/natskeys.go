// Package natskeys hands out the keys of package seal over NATS: the feed
// handler answers requests on tickcast.FEED.keys.CH with the channel's
// current epoch keys (Server), and a subscriber fetches them before it joins
// and ahead of every rotation (Fetcher). NATS authentication decides who may
// ask (docs/security.md).
package natskeys

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// Subject returns the subject of channel ch's key requests.
func Subject(feed string, ch int) string {
	return "tickcast." + feed + ".keys." + strconv.Itoa(ch)
}

// ServerConfig configures a key Server.
type ServerConfig struct {
	// Feed names the feed in the subjects.
	Feed string
	// Channels is the feed's number of channels.
	Channels int
	// Schedule returns channel ch's current schedule (nil while it has
	// none).
	Schedule func(ch int) *seal.Schedule
	// Entitled, if set, says whether user (the requester: see Requester)
	// may be given channel ch's keys; its error is the refusal's reason.
	// Nil: anyone the NATS server lets ask is.
	Entitled func(user string, ch int) error
	// Audit, if set, is called with every key reply, given or refused.
	Audit func(Grant)
}

// Grant is one key reply, for the audit (docs/security.md).
type Grant struct {
	Time    time.Time `json:"time"`
	User    string    `json:"user"`
	Channel int       `json:"channel"`
	// Session and Epochs say which keys were given (none when refused);
	// a key's id is SESSION/CHANNEL/EPOCH (KeyID).
	Session string   `json:"session,omitempty"`
	Epochs  []uint32 `json:"epochs,omitempty"`
	// Refused is the reason no key was given; empty when they were.
	Refused string `json:"refused,omitempty"`
	// Answered is false for a refusal that got no reply (its reply
	// subject is nobody's inbox).
	Answered bool `json:"answered"`
}

// KeyID names one epoch's key of a channel's session.
func KeyID(session string, ch int, epoch uint32) string {
	return session + "/" + strconv.Itoa(ch) + "/" + strconv.FormatUint(uint64(epoch), 10)
}

// Requester returns the user a request's reply goes to: the name of its
// inbox prefix _INBOX_<name> (natsconn.UserInboxPrefix), which a NATS
// server with users lets only that user read. It is "" for the default
// prefix, and for a reply subject that is no inbox.
func Requester(reply string) string {
	name, ok := strings.CutPrefix(reply, "_INBOX_")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, ".")
	return name
}

// Server answers key requests from the schedules of the channels.
type Server struct {
	cfg     ServerConfig
	sub     *nats.Subscription
	served  atomic.Uint64
	refused atomic.Uint64
}

// Serve subscribes to cfg.Feed's key subjects.
func Serve(nc *nats.Conn, cfg ServerConfig) (*Server, error) {
	s := &Server{cfg: cfg}
	sub, err := nc.Subscribe("tickcast."+cfg.Feed+".keys.*", s.answer)
	if err != nil {
		return nil, fmt.Errorf("natskeys: subscribe: %w", err)
	}
	s.sub = sub
	return s, nil
}

func (s *Server) answer(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	var r seal.Reply
	ch, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
	var sch *seal.Schedule
	if err == nil && ch >= 0 && ch < s.cfg.Channels {
		sch = s.cfg.Schedule(ch)
	}
	if len(m.Data) > 0 && (sch == nil || string(m.Data) != sch.Session().String()) {
		// Keys of a session this feed handler does not publish: another
		// one of the feed may (a restarted or a second feed handler).
		return
	}
	g := Grant{Time: time.Now(), User: Requester(m.Reply), Channel: ch, Answered: true}
	var why error
	if s.cfg.Entitled != nil && err == nil {
		why = s.cfg.Entitled(g.User, ch)
	}
	switch {
	case err != nil || ch < 0 || ch >= s.cfg.Channels:
		r.Error = fmt.Sprintf("%s: no such channel (the feed has %d)", m.Subject, s.cfg.Channels)
	case why != nil:
		r.Error = why.Error()
		if g.User == "" {
			// The reply would go to a subject that is nobody's inbox,
			// which someone else may read: no answer at all.
			g.Answered = false
		}
	case sch == nil:
		r.Error = fmt.Sprintf("channel %d has no session yet", ch)
	default:
		if r, err = seal.ReplyFor(sch, g.Time.UnixNano()); err != nil {
			r = seal.Reply{Error: err.Error()}
		}
	}
	g.Refused = r.Error
	if r.Error == "" {
		g.Session = r.Session
		for _, k := range r.Keys {
			g.Epochs = append(g.Epochs, k.Epoch)
		}
	}
	if g.Answered {
		b, _ := json.Marshal(&r)
		if m.Respond(b) != nil {
			return
		}
	}
	if s.cfg.Audit != nil {
		s.cfg.Audit(g)
	}
	if r.Error != "" {
		s.refused.Add(1)
		return
	}
	s.served.Add(1)
}

// Served returns the key replies sent with keys, and those refused.
func (s *Server) Served() (served, refused uint64) { return s.served.Load(), s.refused.Load() }

// Close unsubscribes.
func (s *Server) Close() error { return s.sub.Unsubscribe() }

// Fetcher keeps a subscriber's keys: one seal.Keys per channel, replaced
// whole as new keys come (readers load it without a lock). A goroutine
// fetches the next keys ahead of each rotation, and Miss asks it to fetch
// at once (a packet of a session or epoch it holds no key for).
type Fetcher struct {
	nc       *nats.Conn
	feed     string
	timeout  time.Duration
	chans    []int
	keys     []atomic.Pointer[seal.Keys]
	rotation []atomic.Int64 // per channel, from the last reply
	poke     chan want
	stop     chan struct{}
	wg       sync.WaitGroup
	fetches  atomic.Uint64
	failures atomic.Uint64
	lastErr  atomic.Pointer[error]
	onRefuse atomic.Pointer[func(ch int, err error)]
	mu       sync.Mutex // serializes the replacements of keys
	// ctx ends every request in flight at Close.
	ctx    context.Context
	cancel context.CancelFunc
}

// want is a fetch asked for: a channel's keys, of session if not zero.
type want struct {
	ch      int
	session mold.Session
}

// NewFetcher fetches the keys of channels (indexes into a feed of
// channels), waiting up to timeout for each, and then keeps them fresh
// until Close. A channel whose keys could not be fetched yet (no feed
// handler answers: it may start later) is fetched again every 20 ms, and
// at once on Miss; its error is returned beside the working Fetcher. A
// refusal (seal.ErrRefused: the channel does not exist, or the user is not
// entitled to it) is returned with no Fetcher.
func NewFetcher(nc *nats.Conn, feed string, channels int, join []int, timeout time.Duration) (*Fetcher, error) {
	f := &Fetcher{nc: nc, feed: feed, timeout: timeout, chans: join,
		keys: make([]atomic.Pointer[seal.Keys], channels), rotation: make([]atomic.Int64, channels),
		poke: make(chan want, 4*channels), stop: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if !nc.IsConnected() {
		// Still connecting (the server may start later): no request can
		// go yet. The background fetches them once it is up.
		f.wg.Add(1)
		go f.run()
		return f, fmt.Errorf("natskeys: not connected to %s yet", nc.Opts.Servers)
	}
	errs := make([]error, len(join))
	var wg sync.WaitGroup
	for i, ch := range join {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.fetch(ch, mold.Session{})
		}()
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if errors.Is(err, seal.ErrRefused) {
			return nil, err
		}
		first = cmp.Or(first, err)
	}
	f.wg.Add(1)
	go f.run()
	return f, first
}

// Keys returns channel ch's keys (never nil after NewFetcher for a joined
// channel).
func (f *Fetcher) Keys(ch int) *seal.Keys { return f.keys[ch].Load() }

// Miss asks for channel ch's keys of session to be fetched now: a packet
// came under a session or epoch whose key is not held. It never blocks.
func (f *Fetcher) Miss(ch int, session mold.Session) {
	select {
	case f.poke <- want{ch, session}:
	default:
	}
}

// OnRefused sets a function called (from the fetcher's goroutine) when a
// channel's keys are refused after NewFetcher: the user's entitlement was
// withdrawn. The keys held still open their epochs; nothing opens after.
func (f *Fetcher) OnRefused(fn func(ch int, err error)) { f.onRefuse.Store(&fn) }

// Stats returns the fetches made and those that failed, and the last
// failure.
func (f *Fetcher) Stats() (fetches, failures uint64, last error) {
	if e := f.lastErr.Load(); e != nil {
		last = *e
	}
	return f.fetches.Load(), f.failures.Load(), last
}

// Close stops the refreshing.
func (f *Fetcher) Close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
		f.cancel()
	}
	f.wg.Wait()
}

// A fetch for a named session (a packet under a session whose keys are not
// held) waits at most sessionTimeout, and comes at most once per
// sessionGap per channel: forged sessions cost the fetcher little.
const (
	sessionTimeout = 250 * time.Millisecond
	sessionGap     = time.Second
)

// refusedGap is how long a channel whose keys were refused waits before it
// asks again (an entitlement given back is taken up within it).
const refusedGap = 5 * time.Second

// errNotConnected is fetch's error while the connection is down: the
// fetch is tried again at the next poke, not after a gap.
var errNotConnected = errors.New("not connected to NATS")

// ErrNoResponders is fetch's error when nobody answers on the key subject.
var ErrNoResponders = errors.New("no feed handler answers key requests")

// fetch asks for channel ch's keys, of session if not zero, and adds
// them to those held.
func (f *Fetcher) fetch(ch int, session mold.Session) error {
	f.fetches.Add(1)
	subj := Subject(f.feed, ch)
	var body []byte
	if session != (mold.Session{}) {
		body = []byte(session.String())
	}
	err := func() error {
		timeout := f.timeout
		if body != nil {
			// Only a feed handler of that session answers; a forged
			// session gets no answer, which must not hold the refreshes.
			timeout = min(timeout, sessionTimeout)
		}
		if !f.nc.IsConnected() {
			return fmt.Errorf("natskeys: %s: %w (%s)", subj, errNotConnected, f.nc.Status())
		}
		ctx, cancel := context.WithTimeout(f.ctx, timeout)
		defer cancel()
		m, err := f.nc.RequestWithContext(ctx, subj, body)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			// A NATS server whose permissions refuse the request drops
			// it and tells the connection (asynchronously): say that,
			// rather than that nobody answered.
			if last := f.nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), `"`+subj+`"`) {
				return fmt.Errorf("natskeys: %s on %s: %w: the NATS server refused the request (%v)", subj, f.nc.ConnectedUrlRedacted(), seal.ErrRefused, last)
			}
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("natskeys: %s on %s: %w", subj, f.nc.ConnectedUrlRedacted(), ErrNoResponders)
		}
		if err != nil {
			return fmt.Errorf("natskeys: %s on %s: %w", subj, f.nc.ConnectedUrlRedacted(), err)
		}
		session, keys, rot, err := seal.ParseReply(m.Data, ch)
		if err != nil {
			return fmt.Errorf("natskeys: %s: %w", subj, err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		cur := f.keys[ch].Load()
		if cur == nil {
			cur = &seal.Keys{}
		}
		f.keys[ch].Store(cur.With(session, keys))
		f.rotation[ch].Store(int64(rot))
		return nil
	}()
	if err != nil {
		f.failures.Add(1)
		f.lastErr.Store(&err)
		if fn := f.onRefuse.Load(); fn != nil && errors.Is(err, seal.ErrRefused) {
			(*fn)(ch, err)
		}
	}
	return err
}

// run fetches each channel's keys again once the clock is within
// seal.FetchAhead of the end of the last epoch it holds a key for (so the
// next is there before it is used: the feed handler hands it out from
// seal.Lead before), and
// at once when poked, at most every minGap per channel.
func (f *Fetcher) run() {
	defer f.wg.Done()
	const minGap = 20 * time.Millisecond
	last := make([]time.Time, len(f.keys))      // refreshes and fetches of any session
	lastNamed := make([]time.Time, len(f.keys)) // fetches of a named session
	// A short tick: a channel without keys (its feed handler, or the
	// connection, just coming up) gets them within milliseconds.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case w := <-f.poke:
			at, gap := &last[w.ch], minGap
			if w.session != (mold.Session{}) {
				at, gap = &lastNamed[w.ch], sessionGap
			}
			if time.Since(*at) >= gap && f.nc.IsReconnecting() {
				// A packet came, so a feed handler is up, and with
				// it (embedded) the NATS server: try to connect now
				// rather than at the end of the reconnect wait.
				f.nc.ForceReconnect()
			}
			if time.Since(*at) >= gap {
				*at = time.Now()
				switch err := f.fetch(w.ch, w.session); {
				case errors.Is(err, errNotConnected) || errors.Is(err, ErrNoResponders):
					// Again 10 ms on: the connection, or the feed
					// handler's key server, is coming up. (A forged
					// session meets a server that does not answer: a
					// timeout, which waits the whole gap.)
					*at = time.Now().Add(10*time.Millisecond - gap)
				case errors.Is(err, seal.ErrRefused):
					last[w.ch], lastNamed[w.ch] = time.Now().Add(refusedGap), time.Now().Add(refusedGap)
				}
			}
		case now := <-tick.C:
			for _, ch := range f.chans {
				ks, rot := f.keys[ch].Load(), time.Duration(f.rotation[ch].Load())
				due := ks == nil // none yet: the feed handler may have started since
				var session mold.Session
				if ks != nil {
					session, _ = ks.Latest()
					maxE, _ := ks.MaxEpoch(session)
					due = seal.Epoch(now.UnixNano()+int64(seal.FetchAhead(rot)), rot) > maxE
				}
				if due && time.Since(last[ch]) >= minGap {
					last[ch] = now
					if err := f.fetch(ch, session); errors.Is(err, seal.ErrRefused) {
						last[ch], lastNamed[ch] = now.Add(refusedGap), now.Add(refusedGap)
					}
				}
			}
		}
	}
}

// Encrypted returns those of channels whose feed handler says their
// messages are encrypted (a key reply marked encrypted), asking each once,
// waiting up to timeout: a subscriber that does not authenticate cannot
// read them, and must not take their packets. Channels nobody answers for,
// or refused, are not in the result; the first such error is returned
// beside it.
func Encrypted(nc *nats.Conn, feed string, channels []int, timeout time.Duration) ([]int, error) {
	var enc []int
	var first error
	for _, ch := range channels {
		m, err := nc.Request(Subject(feed, ch), nil, timeout)
		if err != nil {
			first = cmp.Or(first, fmt.Errorf("natskeys: %s: %w", Subject(feed, ch), err))
			continue
		}
		_, keys, _, err := seal.ParseReply(m.Data, ch)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		if keys[0].Encrypts() {
			enc = append(enc, ch)
		}
	}
	return enc, first
}
