package fh

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/tickcast/tickcast/seal/natskeys"
)

// UsageHeader is the first line of UsageReport's CSV.
var UsageHeader = []string{"day", "user", "channel", "first_key", "last_key", "keys", "sessions", "replies", "refused"}

// anonymous names the requester of an open server (no users) in the report.
const anonymous = "(anonymous)"

// usageRow is one day, user and channel of the report.
type usageRow struct {
	day         string
	user        string
	channel     int
	first, last time.Time
	keys        map[string]bool
	sessions    map[string]bool
	replies     int
	refused     int
}

// UsageReport reads key audit files (Config.KeyAudit: JSON lines of
// natskeys.Grant) and writes, as CSV with UsageHeader, one line per UTC
// day, user and channel: the times of the first and last keys handed out,
// how many distinct keys (a session's epoch of a channel) and sessions, the
// replies with keys, and the refusals. It is what an operator reports to an
// exchange: who was given which channel's data, and when. A line that is
// not a grant fails the report, naming the file and line.
func UsageReport(w io.Writer, paths ...string) error {
	if len(paths) == 0 {
		return fmt.Errorf("usage report: no audit file")
	}
	rows := map[string]*usageRow{}
	for _, name := range paths {
		if err := readAudit(name, rows); err != nil {
			return err
		}
	}
	return writeUsage(w, rows)
}

// readAudit adds the grants of audit file name to rows.
func readAudit(name string, rows map[string]*usageRow) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("usage report: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var g natskeys.Grant
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			return fmt.Errorf("usage report: %s:%d: %w", name, n, err)
		}
		if g.Time.IsZero() || g.Channel < 0 {
			return fmt.Errorf("usage report: %s:%d: not a key grant (time %v, channel %d)", name, n, g.Time, g.Channel)
		}
		user := cmp.Or(g.User, anonymous)
		day := g.Time.UTC().Format(time.DateOnly)
		k := day + "\x00" + user + "\x00" + strconv.Itoa(g.Channel)
		r := rows[k]
		if r == nil {
			r = &usageRow{day: day, user: user, channel: g.Channel, keys: map[string]bool{}, sessions: map[string]bool{}}
			rows[k] = r
		}
		if g.Refused != "" {
			r.refused++
			continue
		}
		r.replies++
		if r.first.IsZero() || g.Time.Before(r.first) {
			r.first = g.Time
		}
		if g.Time.After(r.last) {
			r.last = g.Time
		}
		r.sessions[g.Session] = true
		for _, e := range g.Epochs {
			r.keys[natskeys.KeyID(g.Session, g.Channel, e)] = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("usage report: %s: %w", name, err)
	}
	return nil
}

// writeUsage writes rows as the report's CSV.
func writeUsage(w io.Writer, rows map[string]*usageRow) error {
	list := make([]*usageRow, 0, len(rows))
	for _, r := range rows {
		list = append(list, r)
	}
	slices.SortFunc(list, func(a, b *usageRow) int {
		return cmp.Or(cmp.Compare(a.day, b.day), cmp.Compare(a.user, b.user), cmp.Compare(a.channel, b.channel))
	})
	cw := csv.NewWriter(w)
	cw.Write(UsageHeader)
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, r := range list {
		cw.Write([]string{r.day, r.user, strconv.Itoa(r.channel), stamp(r.first), stamp(r.last),
			strconv.Itoa(len(r.keys)), strconv.Itoa(len(r.sessions)), strconv.Itoa(r.replies), strconv.Itoa(r.refused)})
	}
	cw.Flush()
	return cw.Error()
}
