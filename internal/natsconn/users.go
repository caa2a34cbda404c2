package natsconn

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Role is what a user may do on the recovery subjects; see the package doc.
type Role uint8

const (
	// RoleNone is the zero Role; a user must have another one.
	RoleNone Role = iota
	// RoleFeedHandler publishes live data and answers retransmit and
	// snapshot requests.
	RoleFeedHandler
	// RoleSubscriber receives live data and sends retransmit and snapshot
	// requests, reading the replies on its own inbox prefix.
	RoleSubscriber
)

// String returns the role's name as [ParseRole] accepts it.
func (r Role) String() string {
	switch r {
	case RoleFeedHandler:
		return "feedhandler"
	case RoleSubscriber:
		return "subscriber"
	case RoleNone:
		return "none"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole parses "feedhandler" (or "feed-handler") and "subscriber",
// in any case.
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "feedhandler", "feed-handler":
		return RoleFeedHandler, nil
	case "subscriber":
		return RoleSubscriber, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (want feedhandler or subscriber)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (r Role) MarshalText() ([]byte, error) {
	if r != RoleFeedHandler && r != RoleSubscriber {
		return nil, fmt.Errorf("natsconn: cannot marshal %v", r)
	}
	return []byte(r.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with [ParseRole].
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// User is one account of the embedded server. It authenticates either with
// Password (plain, or a bcrypt hash starting with "$2") or with NKey, the
// public user nkey ("U..."), whose seed the client holds; never both.
type User struct {
	// Name identifies the user, and names a subscriber's inbox prefix
	// (see [UserInboxPrefix]): letters, digits, '-' and '_' only.
	Name string
	// Password is the user's password; empty for an NKey user.
	Password string
	// NKey is the user's public nkey; empty for a password user.
	NKey string
	// Role says what the user may publish and subscribe to.
	Role Role
	// Channels, for a subscriber, are the channels it is entitled to: it
	// may receive their live data and repairs, ask for their
	// retransmissions, snapshots and sessions, and be given their keys
	// (docs/security.md). Nil entitles it to every channel. A feed
	// handler has no Channels.
	Channels []int
}

// MaxChannel is the highest channel number an entitlement may name.
const MaxChannel = 1023

// Entitled reports whether u may receive channel ch.
func (u User) Entitled(ch int) bool {
	return u.Channels == nil || slices.Contains(u.Channels, ch)
}

// ChannelList returns u's channels as ParseChannels reads them ("0-3;7"),
// or "all".
func (u User) ChannelList() string {
	if u.Channels == nil {
		return "all"
	}
	var b strings.Builder
	for i := 0; i < len(u.Channels); {
		j := i
		for j+1 < len(u.Channels) && u.Channels[j+1] == u.Channels[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		b.WriteString(strconv.Itoa(u.Channels[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(u.Channels[j]))
		}
		i = j + 1
	}
	return b.String()
}

// ParseChannels parses an entitlement's channel list: channel numbers and
// ranges separated by ';', as "0-3;7", or "all" (nil). The result is sorted
// without repeats.
func ParseChannels(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "all") {
		return nil, nil
	}
	if s == "" {
		return nil, errors.New("empty channel list (want channels as 0-3;7, or all)")
	}
	var chans []int
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseChannel(lo)
		if err != nil {
			return nil, fmt.Errorf("channels %q: %q: %w", s, part, err)
		}
		b := a
		if isRange {
			if b, err = parseChannel(hi); err != nil {
				return nil, fmt.Errorf("channels %q: %q: %w", s, part, err)
			}
			if b < a {
				return nil, fmt.Errorf("channels %q: range %q ends before it starts", s, part)
			}
		}
		for c := a; c <= b; c++ {
			chans = append(chans, c)
		}
	}
	slices.Sort(chans)
	return slices.Compact(chans), nil
}

func parseChannel(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > MaxChannel {
		return 0, fmt.Errorf("want a channel number 0..%d", MaxChannel)
	}
	return n, nil
}

// ReplyWindow is how long after receiving a request a feed-handler user may
// publish reply parts to its reply subject.
const ReplyWindow = 2 * time.Minute

// SessionBucket is the JetStream key-value bucket holding the session
// record of each feed, keyed by feed name, which the feed handlers of a
// feed share (see [OpenSessionBucket]).
const SessionBucket = "tickcast_sessions"

// UserInboxPrefix returns the inbox prefix of the named user,
// "_INBOX_<name>": a subscriber passes it as [ConnConfig.InboxPrefix], and
// the server lets only that user subscribe below it.
func UserInboxPrefix(name string) string { return "_INBOX_" + name }

// validName reports whether s is usable as a user name, and so as part of a
// single subject token.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// validate checks one user on its own.
func (u User) validate() error {
	if !validName(u.Name) {
		return fmt.Errorf("user %q: Name: want letters, digits, '-' or '_'", u.Name)
	}
	switch {
	case u.Password != "" && u.NKey != "":
		return fmt.Errorf("user %q: Password and NKey are exclusive", u.Name)
	case u.Password == "" && u.NKey == "":
		return fmt.Errorf("user %q: Password or NKey required", u.Name)
	case u.NKey != "" && !nkeys.IsValidPublicUserKey(u.NKey):
		return fmt.Errorf("user %q: NKey is not a public user nkey (U...)", u.Name)
	}
	if u.Role != RoleFeedHandler && u.Role != RoleSubscriber {
		return fmt.Errorf("user %q: Role %v: want RoleFeedHandler or RoleSubscriber", u.Name, u.Role)
	}
	if u.Channels != nil && u.Role != RoleSubscriber {
		return fmt.Errorf("user %q: Channels: only a subscriber has entitlements (a %v serves every channel)", u.Name, u.Role)
	}
	if u.Channels != nil && len(u.Channels) == 0 {
		return fmt.Errorf("user %q: Channels: empty (nil entitles to every channel)", u.Name)
	}
	for _, c := range u.Channels {
		if c < 0 || c > MaxChannel {
			return fmt.Errorf("user %q: Channels: %d: want 0..%d", u.Name, c, MaxChannel)
		}
	}
	return nil
}

// sessionGrants returns the subjects a feed handler of feed publishes to
// for the session record: the JetStream API requests that look up
// (STREAM.INFO), create (INFO, for the account check that comes first, and
// STREAM.CREATE) and read (DIRECT.GET of the key's last value) the bucket,
// and the record's own subject, which Create and Update publish to.
func sessionGrants(feed string) []string {
	stream := "KV_" + SessionBucket
	key := "$KV." + SessionBucket + "." + feed
	return []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.CREATE." + stream,
		"$JS.API.DIRECT.GET." + stream + "." + key,
		key,
	}
}

// ArchiveStream is the JetStream stream of feed's archive (package
// archive).
func ArchiveStream(feed string) string { return "TICKCAST_ARCHIVE_" + feed }

// ArchiveSubject is the subject channel ch's archive records are stored
// under; "*" for every channel.
func ArchiveSubject(feed, ch string) string { return "tickcast." + feed + ".archive." + ch }

// ArchiveKeysSubject is the subject channel ch's archive key records
// are stored under; "*" for every channel.
func ArchiveKeysSubject(feed, ch string) string { return "tickcast." + feed + ".archivekeys." + ch }

// archiveGrants returns what a feed handler of feed publishes to for its
// archive: the records, and the JetStream API requests that look up,
// create and update the stream.
func archiveGrants(feed string) []string {
	stream := ArchiveStream(feed)
	return []string{
		ArchiveSubject(feed, "*"),
		ArchiveKeysSubject(feed, "*"),
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.CREATE." + stream,
		"$JS.API.STREAM.UPDATE." + stream,
	}
}

// archiveReadGrants returns what a subscriber publishes to to read
// channel ch's archive (ch "*": every channel's): the stream's info, its
// last record of the channel, and an ordered consumer filtered to the
// channel's subject, which it reads and deletes.
func archiveReadGrants(feed, ch string) []string {
	stream := ArchiveStream(feed)
	subj, keys := ArchiveSubject(feed, ch), ArchiveKeysSubject(feed, ch)
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.DIRECT.GET." + stream + "." + subj,
		"$JS.API.DIRECT.GET." + stream + "." + keys,
		"$JS.API.CONSUMER.CREATE." + stream + ".*." + subj,
		"$JS.API.CONSUMER.CREATE." + stream + ".*." + keys,
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.API.CONSUMER.INFO." + stream + ".*",
	}
}

// permissions returns what u may do on feed's subjects.
func permissions(feed string, u User) *server.Permissions {
	p := "tickcast." + feed + "."
	switch u.Role {
	case RoleFeedHandler:
		return &server.Permissions{
			Publish: &server.SubjectPermission{Allow: slices.Concat([]string{p + "live.>", p + "repair.>", p + "session.*"}, sessionGrants(feed), archiveGrants(feed))},
			Subscribe: &server.SubjectPermission{Allow: []string{p + "retransmit.>", p + "snapshot.>", p + "session.>", p + "repair.>",
				p + "demand.*", p + "keys.*", UserInboxPrefix(u.Name) + ".>"}},
			// MaxMsgs -1: a multi-part reply has as many parts as it needs;
			// the window bounds it in time instead.
			Response: &server.ResponsePermission{MaxMsgs: -1, Expires: ReplyWindow},
		}
	case RoleSubscriber:
		if u.Channels != nil {
			// Entitled channels only. Key requests go to every channel:
			// the feed handler refuses them by name (natskeys), so that
			// the subscriber hears why.
			var pub, sub []string
			for _, c := range u.Channels {
				n := strconv.Itoa(c)
				pub = append(pub, p+"retransmit."+n, p+"snapshot."+n, p+"session."+n, p+"demand."+n)
				pub = append(pub, archiveReadGrants(feed, n)...)
				sub = append(sub, p+"live."+n, p+"live."+n+".>", p+"repair."+n)
			}
			return &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: append(pub, p+"keys.*")},
				Subscribe: &server.SubjectPermission{Allow: append(sub, UserInboxPrefix(u.Name)+".>")},
			}
		}
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: append([]string{p + "retransmit.*", p + "snapshot.*", p + "session.*", p + "demand.*", p + "keys.*"}, archiveReadGrants(feed, "*")...)},
			Subscribe: &server.SubjectPermission{Allow: []string{p + "live.>", p + "repair.>", UserInboxPrefix(u.Name) + ".>"}},
		}
	}
	// Unreachable after validation; deny everything rather than allow.
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{}},
		Subscribe: &server.SubjectPermission{Allow: []string{}},
	}
}

// ParseUsers parses a compact, comma-separated list of users:
//
//	fh:secret:feedhandler,alice:pw1:subscriber,bob:nkey=UABC...:subscriber
//
// Each entry is name:secret:role[:channels]. The channels, for a
// subscriber, are those it is entitled to ([ParseChannels]: "0-3;7");
// without them, every channel. The secret is a password, which may
// contain ':' but not ',', or "nkey=" followed by the user's public nkey.
// Spaces around entries are ignored. An empty spec gives no users. Errors
// name the entry by position and user name, never by its secret.
func ParseUsers(spec string) ([]User, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var users []User
	for i, entry := range strings.Split(spec, ",") {
		u, err := parseUser(strings.TrimSpace(entry))
		if err != nil {
			return nil, fmt.Errorf("natsconn: users entry %d%s", i+1, err)
		}
		users = append(users, u)
	}
	if err := checkUnique(users, func(i int) string { return fmt.Sprintf("entry %d", i+1) }); err != nil {
		return nil, err
	}
	return users, nil
}

// LoadUsersFile reads users from a file, one name:secret:role[:channels] entry (as in
// [ParseUsers]) a line. Blank lines and lines whose first non-space
// character is '#' are skipped; a '#' elsewhere belongs to the entry, since
// passwords may contain it. Passwords may contain ',' here. Errors name the
// file and line.
func LoadUsersFile(path string) ([]User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("natsconn: users file: %w", err)
	}
	defer f.Close()
	var users []User
	var lines []int
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		u, err := parseUser(line)
		if err != nil {
			return nil, fmt.Errorf("natsconn: %s:%d%s", path, n, err)
		}
		users = append(users, u)
		lines = append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("natsconn: users file %s: %w", path, err)
	}
	if err := checkUnique(users, func(i int) string { return fmt.Sprintf("%s:%d", path, lines[i]) }); err != nil {
		return nil, err
	}
	return users, nil
}

// parseUser parses one name:secret:role[:channels] entry. Its error starts
// with ": ", to follow the entry's position.
func parseUser(entry string) (User, error) {
	first := strings.IndexByte(entry, ':')
	last := strings.LastIndexByte(entry, ':')
	if entry == "" {
		return User{}, errors.New(": empty (want name:secret:role[:channels])")
	}
	if first < 0 || first == last {
		return User{}, errors.New(": want name:secret:role[:channels]")
	}
	u := User{Name: strings.TrimSpace(entry[:first])}
	role, chans := entry[last+1:], ""
	if _, err := ParseRole(role); err != nil {
		// name:secret:role:channels (a password may hold ':', so the
		// last field is a role or, failing that, the channels).
		if prev := strings.LastIndexByte(entry[:last], ':'); prev > first {
			role, chans, last = entry[prev+1:last], entry[last+1:], prev
		}
	}
	secret := entry[first+1 : last]
	if k, ok := strings.CutPrefix(secret, "nkey="); ok {
		u.NKey = k
	} else {
		u.Password = secret
	}
	var err error
	if u.Role, err = ParseRole(role); err != nil {
		return User{}, fmt.Errorf(": user %q: %w", u.Name, err)
	}
	if chans != "" {
		if u.Channels, err = ParseChannels(chans); err != nil {
			return User{}, fmt.Errorf(": user %q: %w", u.Name, err)
		}
	}
	if err := u.validate(); err != nil {
		return User{}, fmt.Errorf(": %w", err)
	}
	return u, nil
}

// checkUnique rejects a second user of the same name.
func checkUnique(users []User, where func(i int) string) error {
	seen := make(map[string]int, len(users))
	for i, u := range users {
		if j, dup := seen[u.Name]; dup {
			return fmt.Errorf("natsconn: users %s: user %q already defined at %s", where(i), u.Name, where(j))
		}
		seen[u.Name] = i
	}
	return nil
}
