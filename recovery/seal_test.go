package recovery

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// keysOf returns the subscriber's keys of schedule sch at this moment.
func keysOf(t *testing.T, sch *seal.Schedule) *seal.Keys {
	t.Helper()
	r, err := seal.ReplyFor(sch, time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	session, keys, _, err := seal.ParseReply(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	ks := &seal.Keys{}
	return ks.With(session, keys)
}

// TestSealedReplies: with ServerConfig.Seal, every retransmission and
// snapshot part is sealed with the channel's key; a client that opens
// them (ClientConfig.Open) gets exactly the unsealed parts, and one with
// keys of another secret drops every part (Unverified) and recovers
// nothing.
func TestSealedReplies(t *testing.T) {
	c, st, log := filledChannel(t, StoreConfig{}, "SL00000001", 30_000)
	sch, err := seal.NewSchedule(st.session, 0, seal.NewSecret(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := seal.NewSchedule(st.session, 0, seal.NewSecret(), time.Hour)
	sealer := func(ch int, p []byte) ([]byte, error) { return sch.SealShared(p, time.Now().UnixNano()) }
	good, bad := keysOf(t, sch), keysOf(t, other)
	e := newEnv(t, ServerConfig{Channels: []*Channel{c}, Seal: sealer},
		ClientConfig{Open: func(ch int, p []byte) ([]byte, error) { return good.Open(p) }})
	req := mold.Request{Session: st.session, Seq: 17_777, Count: 10_000}
	parts, err := e.cli.Retransmit(0, req)
	if err != nil {
		t.Fatal(err)
	}
	checkPackets(t, parts, st.session, req.Seq, int(req.Count), log)
	if len(parts) < 2 {
		t.Errorf("%d part(s), want several", len(parts))
	}
	// On the wire, each part carries the seal.
	for _, m := range rawRequest(t, e.cliConn, RetransmitSubject(DefaultFeed, 0), req.Append(nil)) {
		if len(m.Data) == 0 {
			continue
		}
		if _, err := good.Open(append([]byte(nil), m.Data...)); err != nil {
			t.Errorf("a part on the wire does not open: %v", err)
		}
		if _, err := bad.Open(append([]byte(nil), m.Data...)); err == nil {
			t.Error("a part opened under another secret's key")
		}
	}
	snap, err := e.cli.Snapshot(context.Background(), 0)
	if err != nil || len(snap.Messages) == 0 {
		t.Fatalf("snapshot: %v", err)
	}
	for i, m := range snap.Messages {
		if n := len(feed.Trim(m)); n != len(m) {
			t.Fatalf("snapshot message %d of %d bytes holds %d bytes after its end (a seal left in)", i, len(m), len(m)-n)
		}
	}
	if s := e.cli.Stats(); s.Unverified != 0 {
		t.Errorf("unverified %d with the right keys", s.Unverified)
	}

	forgedView := newClient(t, e.cliConn, ClientConfig{Open: func(ch int, p []byte) ([]byte, error) { return bad.Open(p) }})
	if _, err := forgedView.Retransmit(0, req); err == nil {
		t.Error("a client whose keys do not open the parts recovered them")
	}
	if s := forgedView.Stats(); s.Unverified != uint64(len(parts)) {
		t.Errorf("unverified %d, want the %d parts", s.Unverified, len(parts))
	}
}
