package fh

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/seal/natskeys"
)

// entitlements are the embedded server's users, which decide who is given
// which channel's keys (natskeys.ServerConfig.Entitled). They are replaced
// whole by SetUsers.
type entitlements struct {
	users atomic.Pointer[[]natsconn.User]
}

// entitled says whether user may be given channel ch's keys. Without users
// (an open embedded server, or an external one whose permissions decide)
// everyone may.
func (e *entitlements) entitled(user string, ch int) error {
	us := e.users.Load()
	if us == nil || len(*us) == 0 {
		return nil
	}
	if user == "" {
		return errors.New("the request's reply subject is no user's inbox (_INBOX_<user>): refused")
	}
	for _, u := range *us {
		if u.Name != user {
			continue
		}
		if u.Role == natsconn.RoleFeedHandler || u.Entitled(ch) {
			return nil
		}
		return fmt.Errorf("user %s is not entitled to channel %d (its channels: %s)", user, ch, u.ChannelList())
	}
	return fmt.Errorf("user %s is not in the feed handler's users", user)
}

// auditLog writes every key reply (natskeys.Grant) as a JSON line to
// Config.KeyAudit, or to the log when that is empty.
type auditLog struct {
	h  *FeedHandler
	mu sync.Mutex
	f  *os.File
	// failed is set once a write failed (logged once).
	failed bool
}

// openAudit opens Config.KeyAudit for appending.
func (h *FeedHandler) openAudit() (*auditLog, error) {
	a := &auditLog{h: h}
	if h.cfg.KeyAudit == "" {
		return a, nil
	}
	f, err := os.OpenFile(h.cfg.KeyAudit, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fh: key audit: %w", err)
	}
	a.f = f
	return a, nil
}

func (a *auditLog) record(g natskeys.Grant) {
	log := a.h.log
	user := cmp.Or(g.User, anonymous) // an open server's requester
	if g.Refused != "" {
		log.Warn().Str("user", user).Int("channel", g.Channel).Str("reason", g.Refused).Bool("answered", g.Answered).Msg("keys refused")
	}
	if a.f == nil {
		if g.Refused == "" {
			log.Info().Str("user", user).Int("channel", g.Channel).Str("session", g.Session).
				Uints32("epochs", g.Epochs).Msg("keys handed out")
		}
		return
	}
	b, _ := json.Marshal(&g)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.f.Write(append(b, '\n')); err != nil && !a.failed {
		a.failed = true
		log.Error().Err(err).Str("file", a.f.Name()).Msg("cannot write the key audit: keys are still handed out, unrecorded")
	}
}

func (a *auditLog) close() {
	if a != nil && a.f != nil {
		a.f.Close()
	}
}

// SetUsers replaces the embedded server's users (Config.NATSUsers), as
// after an edit of the users file: a user who is gone is disconnected, and
// a user's entitlements are its new ones. Keys already handed out stay
// valid to the end of their epoch: a user whose entitlement to a channel is
// withdrawn more than seal.Lead before a rotation holds none of its keys
// after it (docs/security.md).
func (h *FeedHandler) SetUsers(users []natsconn.User) error {
	if h.srv == nil {
		return errors.New("fh: SetUsers: the users are the external NATS server's (Config.NATSURL)")
	}
	if err := h.srv.SetUsers(users); err != nil {
		return err
	}
	h.ent.users.Store(&users)
	return nil
}
