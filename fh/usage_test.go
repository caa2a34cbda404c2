package fh

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/seal/natskeys"
)

// TestUsageReport: grants of two files, over two days, make one line per
// day, user and channel, with distinct keys and sessions counted once; a
// line that is not a grant fails the report, naming file and line.
func TestUsageReport(t *testing.T) {
	dir := t.TempDir()
	d1 := time.Date(2026, 12, 3, 23, 30, 0, 0, time.UTC)
	d2 := d1.Add(time.Hour) // the next UTC day
	grants := func(gs ...natskeys.Grant) string {
		var b bytes.Buffer
		for _, g := range gs {
			j, _ := json.Marshal(g)
			b.Write(append(j, '\n'))
		}
		return b.String()
	}
	a := filepath.Join(dir, "a.jsonl")
	b := filepath.Join(dir, "b.jsonl")
	os.WriteFile(a, []byte(grants(
		natskeys.Grant{Time: d1, User: "alice", Channel: 0, Session: "S1", Epochs: []uint32{9, 10}, Answered: true},
		natskeys.Grant{Time: d1.Add(time.Minute), User: "alice", Channel: 0, Session: "S1", Epochs: []uint32{10, 11}, Answered: true},
		natskeys.Grant{Time: d1.Add(2 * time.Minute), User: "bob", Channel: 1, Refused: "user bob is not entitled to channel 1", Answered: true},
	)), 0o600)
	os.WriteFile(b, []byte(grants(
		natskeys.Grant{Time: d2, User: "alice", Channel: 0, Session: "S2", Epochs: []uint32{11}, Answered: true},
		natskeys.Grant{Time: d2.Add(time.Second), Channel: 2, Session: "S3", Epochs: []uint32{11, 12}, Answered: true},
	)+"\n"), 0o600)
	var out bytes.Buffer
	if err := UsageReport(&out, a, b); err != nil {
		t.Fatal(err)
	}
	want := `day,user,channel,first_key,last_key,keys,sessions,replies,refused
2026-12-03,alice,0,2026-12-03T23:30:00Z,2026-12-03T23:31:00Z,3,1,2,0
2026-12-03,bob,1,,,0,0,0,1
2026-12-04,(anonymous),2,2026-12-04T00:30:01Z,2026-12-04T00:30:01Z,2,1,1,0
2026-12-04,alice,0,2026-12-04T00:30:00Z,2026-12-04T00:30:00Z,1,1,1,0
`
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(grants(natskeys.Grant{Time: d1, User: "alice"})+"{\"user\":\"x\"}\n"), 0o600)
	for _, tc := range []struct {
		files []string
		err   string
	}{
		{[]string{a, bad}, "bad.jsonl:2: not a key grant"},
		{[]string{filepath.Join(dir, "none")}, "no such file"},
		{nil, "no audit file"},
	} {
		err := UsageReport(&bytes.Buffer{}, tc.files...)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("UsageReport(%v): %v, want %q", tc.files, err, tc.err)
		}
	}
}
