package recovery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// NATS headers of replies (docs/recovery.md).
const (
	HeaderPart        = "Tickcast-Part"
	HeaderFinal       = "Tickcast-Final"
	HeaderError       = "Tickcast-Error"
	HeaderReason      = "Tickcast-Reason"
	HeaderOldest      = "Tickcast-Oldest"
	HeaderNext        = "Tickcast-Next"
	HeaderSession     = "Tickcast-Session"
	HeaderSnapshotSeq = "Tickcast-Snapshot-Seq"
	HeaderEnded       = "Tickcast-Ended"
	// HeaderRepair names a repair: on every message of a repair published
	// on a repair subject, and on the pointer that answers a request with
	// it. Its value is the server's token and the repair's number,
	// "TOKEN-N".
	HeaderRepair = "Tickcast-Repair"
	// HeaderFirst and HeaderCount give a repair's range (with
	// HeaderSession) on its final marker and on pointers.
	HeaderFirst = "Tickcast-First"
	HeaderCount = "Tickcast-Count"
	// HeaderAnswer on a retransmit request, with the value AnswerRepair,
	// asks for the answer on the channel's repair subject.
	HeaderAnswer = "Tickcast-Answer"
	// HeaderRepeat, with the value "true", marks a pointer that answers a
	// request for a range someone else asked for first, within the
	// server's repair window: the loss is shared with other subscribers,
	// and the client backs off before its next requests
	// (ClientConfig.RepairBackoff).
	HeaderRepeat = "Tickcast-Repeat"
	// HeaderLease is on the answer to a demand request: how long, in
	// milliseconds, the demand keeps the channel's live feed on.
	HeaderLease = "Tickcast-Lease"
	// HeaderSource, with the value SourceArchive, marks a retransmission
	// read from the feed's archive: the range had left the feed handler's
	// store (ServerConfig.Archive).
	HeaderSource = "Tickcast-Source"
)

// SourceArchive is the HeaderSource value of an answer from the archive.
const SourceArchive = "archive"

// AnswerRepair is the HeaderAnswer value of a request that takes its answer
// from the channel's repair subject: the server publishes the messages there,
// once for every request of the same range within its repair window, and
// answers the request itself with a pointer to that repair.
const AnswerRepair = "repair"

// MaxPartBytes is the largest MoldUDP64 packet one reply part carries: far
// below NATS's default 1 MiB maximum payload, and below the 65,507 bytes a
// UDP datagram can hold, so a part could be re-sent as a datagram.
const MaxPartBytes = 60000

// DefaultFeed is the feed name used when none is configured.
const DefaultFeed = "tickcast"

// RetransmitSubject is where channel ch's retransmit requests go.
func RetransmitSubject(feed string, ch int) string {
	return "tickcast." + feed + ".retransmit." + strconv.Itoa(ch)
}

// SnapshotSubject is where channel ch's snapshot requests go.
func SnapshotSubject(feed string, ch int) string {
	return "tickcast." + feed + ".snapshot." + strconv.Itoa(ch)
}

// SessionSubject is where requests that ask which session channel ch
// publishes go (a session query; docs/recovery.md).
func SessionSubject(feed string, ch int) string {
	return "tickcast." + feed + ".session." + strconv.Itoa(ch)
}

// LiveSubject is where channel ch's datagrams are published over NATS.
func LiveSubject(feed string, ch int) string {
	return "tickcast." + feed + ".live." + strconv.Itoa(ch)
}

// DemandSubject is where consumers of channel ch's live subject announce
// that they want it (docs/recovery.md): a message, best a request, every
// DemandEvery. It is not under the live subjects, so that a consumer of
// tickcast.FEED.live.> never reads a demand as a datagram.
func DemandSubject(feed string, ch int) string {
	return "tickcast." + feed + ".demand." + strconv.Itoa(ch)
}

// DemandEvery is how often a consumer of a live subject repeats its demand
// (ud/natslive's default); ServerConfig.LiveLease's default is five times
// as long.
const DemandEvery = time.Second

// RepairSubject is where channel ch's repairs are published: the answers
// to retransmit requests that asked for them (HeaderAnswer), heard by every
// client of the feed.
func RepairSubject(feed string, ch int) string {
	return "tickcast." + feed + ".repair." + strconv.Itoa(ch)
}

// repairID is a repair's HeaderRepair value.
func repairID(token string, n uint64) string {
	return token + "-" + strconv.FormatUint(n, 10)
}

// parseRepairID splits a HeaderRepair value into the server's token and the
// repair's number.
func parseRepairID(id string) (token string, n uint64, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	return id[:i], n, err == nil
}

// ValidateFeed checks a feed name: one NATS subject token of letters,
// digits, '-' and '_'.
func ValidateFeed(feed string) error {
	if feed == "" || len(feed) > 64 {
		return fmt.Errorf("feed name %q: want 1..64 characters", feed)
	}
	for _, c := range feed {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("feed name %q: %q is not allowed (letters, digits, - and _)", feed, c)
		}
	}
	return nil
}

// channelOf parses the channel token at the end of a request subject.
func channelOf(subject string) (int, error) {
	i := strings.LastIndexByte(subject, '.')
	ch, err := strconv.Atoi(subject[i+1:])
	if err != nil || ch < 0 {
		return 0, fmt.Errorf("subject %q does not end in a channel number", subject)
	}
	return ch, nil
}

// requester identifies who sent a request, for the rate limit. With NATS
// permissions each subscriber user may only read replies under its own
// prefix, _INBOX_<user>., which is therefore its identity however many
// connections it opens. Without users, it is the reply subject without its
// last token (one client's inbox).
func requester(reply string) string {
	if strings.HasPrefix(reply, "_INBOX_") {
		if i := strings.IndexByte(reply, '.'); i > 0 {
			return reply[:i+1]
		}
	}
	if i := strings.LastIndexByte(reply, '.'); i > 0 {
		return reply[:i+1]
	}
	return reply
}

// ErrorCode is the code of an error reply.
type ErrorCode string

// Error codes (docs/recovery.md).
const (
	CodeBadRequest     ErrorCode = "bad-request"
	CodeUnknownSession ErrorCode = "unknown-session"
	CodeTooOld         ErrorCode = "too-old"
	CodeNotYet         ErrorCode = "not-yet"
	CodeTooMany        ErrorCode = "too-many"
	CodeRateLimited    ErrorCode = "rate-limited"
	CodeUnknownChannel ErrorCode = "unknown-channel"
)

// ReplyError is an error reply, or a failed exchange (Code empty) such as
// a timeout or a malformed reply.
type ReplyError struct {
	Code   ErrorCode
	Reason string
	Oldest uint64 // CodeTooOld: oldest sequence still held
	Next   uint64 // CodeNotYet: next sequence to be published
	// Ended, with CodeNotYet: the session has ended; Next is one past its
	// last message and nothing more will come.
	Ended bool
	// Err is the cause of a failed exchange, when it has one (ErrTimeout,
	// or the NATS error that kept a request from being sent); errors.Is
	// finds it.
	Err error
}

// Unwrap returns the cause of a failed exchange, or nil.
func (e *ReplyError) Unwrap() error { return e.Err }

func (e *ReplyError) Error() string {
	if e.Code == "" {
		return "recovery: " + e.Reason
	}
	return fmt.Sprintf("recovery: %s: %s", e.Code, e.Reason)
}

// ErrTimeout is wrapped by a ReplyError when the reply did not complete in
// time.
var ErrTimeout = errors.New("recovery: reply timed out")
