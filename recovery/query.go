package recovery

import (
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tickcast/tickcast/mold"
)

// SessionState is a channel's session as the feed handler serving it
// answers a session query.
type SessionState struct {
	Session mold.Session
	// Next is the next sequence the feed handler will publish, or one past
	// the session's last message when it has ended.
	Next  uint64
	Ended bool
}

// QuerySession asks the feed handlers of feed which session channel ch
// publishes and where it stands, and waits up to timeout for the answer.
// Nobody serving the feed gives an error that wraps nats.ErrNoResponders
// (or nats.ErrTimeout); a server without a session yet answers a
// *ReplyError with CodeUnknownSession.
func QuerySession(nc *nats.Conn, feed string, ch int, timeout time.Duration) (SessionState, error) {
	subject := SessionSubject(feed, ch)
	m, err := nc.Request(subject, nil, timeout)
	if err != nil {
		return SessionState{}, fmt.Errorf("recovery: session query on %s: %w", subject, err)
	}
	if m.Header.Get(HeaderError) != "" {
		return SessionState{}, errorReply(m)
	}
	s, err := parseSessionAnswer(subject, m)
	if err != nil {
		return SessionState{}, err
	}
	next, err := strconv.ParseUint(m.Header.Get(HeaderNext), 10, 64)
	if err != nil || next == 0 {
		return SessionState{}, &ReplyError{Reason: fmt.Sprintf("%s: answer has no next sequence (%s %q)", subject, HeaderNext, m.Header.Get(HeaderNext))}
	}
	return SessionState{Session: s, Next: next, Ended: m.Header.Get(HeaderEnded) == "true"}, nil
}

// errorReply reads an error reply's headers.
func errorReply(m *nats.Msg) *ReplyError {
	e := &ReplyError{Code: ErrorCode(m.Header.Get(HeaderError)), Reason: m.Header.Get(HeaderReason)}
	e.Oldest, _ = strconv.ParseUint(m.Header.Get(HeaderOldest), 10, 64)
	e.Next, _ = strconv.ParseUint(m.Header.Get(HeaderNext), 10, 64)
	e.Ended = m.Header.Get(HeaderEnded) == "true"
	return e
}
