package natskeys

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

func server(t *testing.T) *nats.Conn {
	t.Helper()
	srv, err := natsconn.StartServer(natsconn.ServerConfig{Host: "127.0.0.1", Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func schedule(t *testing.T, session string, ch int, rot time.Duration) *seal.Schedule {
	t.Helper()
	s, _ := mold.ParseSession(session)
	sch, err := seal.NewSchedule(s, ch, seal.NewSecret(), rot)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// sealed returns a packet of session sealed by sch now.
func sealed(t *testing.T, sch *seal.Schedule) []byte {
	t.Helper()
	b, _ := mold.NewBuilder(1400)
	b.SetTail(seal.Overhead)
	b.Start(sch.Session(), 1)
	b.Add([]byte("message"))
	p, err := sch.Seal(b.Finish(), time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFetchAndRotate: a fetcher gets the keys of its channels before it
// returns, holds the next epoch's key before the epoch starts (rotation of
// a second), refuses a channel the feed does not have, and keeps a second
// session's keys beside the first's when asked for them by name.
func TestFetchAndRotate(t *testing.T) {
	nc := server(t)
	var scheds [2]atomic.Pointer[seal.Schedule]
	scheds[0].Store(schedule(t, "002SEAR4RH", 0, time.Second))
	scheds[1].Store(schedule(t, "012SEAR4RH", 1, time.Second))
	srv, err := Serve(nc, ServerConfig{Feed: "feed", Channels: 2, Schedule: func(ch int) *seal.Schedule { return scheds[ch].Load() }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	f, err := NewFetcher(nc, "feed", 2, []int{0, 1}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for ch := range 2 {
		if _, err := f.Keys(ch).Open(sealed(t, scheds[ch].Load())); err != nil {
			t.Fatalf("channel %d: %v", ch, err)
		}
	}
	// Over three rotations, every packet sealed opens with the keys held
	// at that moment: the next key always came first.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := f.Keys(0).Open(sealed(t, scheds[0].Load())); err != nil {
			t.Fatalf("during rotations: %v", err)
		}
	}
	// A second session of channel 1 (a restarted feed handler), asked for
	// by name, is held beside the first.
	old := scheds[1].Load()
	scheds[1].Store(schedule(t, "012SEAR4RZ", 1, time.Second))
	f.Miss(1, scheds[1].Load().Session())
	deadline := time.Now().Add(2 * time.Second)
	for !f.Keys(1).HasSession(scheds[1].Load().Session()) {
		if time.Now().After(deadline) {
			t.Fatal("the new session's keys were not fetched")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !f.Keys(1).HasSession(old.Session()) {
		t.Error("the first session's keys were dropped")
	}
	// A session nobody publishes gets no answer, and changes nothing.
	forged, _ := mold.ParseSession("01ZZZZZZZZ")
	f.Miss(0, forged)
	time.Sleep(300 * time.Millisecond)
	if f.Keys(0).HasSession(forged) {
		t.Error("keys appeared for a session nobody publishes")
	}
	if _, err := NewFetcher(nc, "feed", 3, []int{2}, time.Second); !errors.Is(err, seal.ErrRefused) {
		t.Errorf("a channel the feed handler does not have: %v, want a refusal", err)
	}
	served, refused := srv.Served()
	if served < 3 || refused != 1 {
		t.Errorf("served %d, refused %d", served, refused)
	}
}

// TestFetchWithoutFeedHandler: with nobody answering, NewFetcher returns a
// working fetcher and the error, and fetches the keys once a feed handler
// serves them.
func TestFetchWithoutFeedHandler(t *testing.T) {
	nc := server(t)
	f, err := NewFetcher(nc, "feed", 1, []int{0}, 200*time.Millisecond)
	if f == nil || !errors.Is(err, ErrNoResponders) {
		t.Fatalf("NewFetcher: %v, %v: want a fetcher and ErrNoResponders", f, err)
	}
	defer f.Close()
	if f.Keys(0) != nil {
		t.Fatal("keys without a feed handler")
	}
	sch := schedule(t, "002SEAR4RH", 0, time.Hour)
	srv, err := Serve(nc, ServerConfig{Feed: "feed", Channels: 1, Schedule: func(int) *seal.Schedule { return sch }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	deadline := time.Now().Add(2 * time.Second)
	for f.Keys(0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("no keys 2s after the feed handler started serving them")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.Keys(0).Open(sealed(t, sch)); err != nil {
		t.Fatal(err)
	}
}

// TestEntitlements: the key server hands a channel's keys only to the
// users its Entitled function allows, knows them by their reply inbox,
// refuses the others with a reason that names user and channel (or, for a
// reply subject that is nobody's inbox, not at all), and audits every
// reply.
func TestEntitlements(t *testing.T) {
	users, err := natsconn.ParseUsers("fh:fh:feedhandler,alice:pw:subscriber:0,mallory:pw:subscriber:1")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsconn.StartServer(natsconn.ServerConfig{Host: "127.0.0.1", Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	conn := func(user string) *nats.Conn {
		opts := []nats.Option{nats.UserInfo(user, map[bool]string{true: "fh", false: "pw"}[user == "fh"])}
		if user != "fh" {
			opts = append(opts, nats.CustomInboxPrefix(natsconn.UserInboxPrefix(user)))
		}
		nc, err := nats.Connect(srv.ClientURL(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	sch := [2]*seal.Schedule{schedule(t, "002SEAR4RH", 0, time.Hour), schedule(t, "012SEAR4RH", 1, time.Hour)}
	var mu sync.Mutex
	var grants []Grant
	entitled := func(user string, ch int) error {
		for _, u := range users {
			if u.Name == user && u.Entitled(ch) {
				return nil
			}
		}
		return fmt.Errorf("user %s is not entitled to channel %d", user, ch)
	}
	ks, err := Serve(conn("fh"), ServerConfig{Feed: "tickcast", Channels: 2, Schedule: func(ch int) *seal.Schedule { return sch[ch] },
		Entitled: entitled, Audit: func(g Grant) { mu.Lock(); grants = append(grants, g); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()

	alice, mallory := conn("alice"), conn("mallory")
	f, err := NewFetcher(alice, "tickcast", 2, []int{0}, time.Second)
	if err != nil {
		t.Fatalf("alice, entitled to channel 0: %v", err)
	}
	f.Close()
	_, err = NewFetcher(alice, "tickcast", 2, []int{0, 1}, time.Second)
	if !errors.Is(err, seal.ErrRefused) || !strings.Contains(err.Error(), "user alice is not entitled to channel 1") {
		t.Errorf("alice asking for channel 1: %v, want a refusal naming her and the channel", err)
	}
	// Mallory sends the request with a reply subject she can read that is
	// not her inbox (a live subject of her channel): no answer goes there.
	live := subscribe(t, mallory, "tickcast.tickcast.live.1")
	if err := mallory.PublishRequest(Subject("tickcast", 0), "tickcast.tickcast.live.1", nil); err != nil {
		t.Fatal(err)
	}
	if m, err := live.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("a key reply went to a subject that is not mallory's inbox: %s", m.Data)
	}
	mu.Lock()
	defer mu.Unlock()
	// alice's two fetchers asked for channel 0 twice (given) and channel 1
	// once (refused, answered); mallory's request was refused unanswered.
	if len(grants) != 4 {
		t.Fatalf("%d grants audited, want 4: %+v", len(grants), grants)
	}
	var given, refusedAnswered, refusedSilent int
	for _, g := range grants {
		switch {
		case g.User == "alice" && g.Channel == 0 && g.Session == "002SEAR4RH" && len(g.Epochs) >= 2 && g.Refused == "" && g.Answered:
			given++
		case g.User == "alice" && g.Channel == 1 && g.Refused != "" && g.Epochs == nil && g.Answered:
			refusedAnswered++
		case g.User == "" && g.Channel == 0 && g.Refused != "" && !g.Answered:
			refusedSilent++
		default:
			t.Errorf("unexpected grant %+v", g)
		}
	}
	if given != 2 || refusedAnswered != 1 || refusedSilent != 1 {
		t.Errorf("grants: %d given, %d refused with an answer, %d without; want 2, 1, 1", given, refusedAnswered, refusedSilent)
	}
	if served, refused := ks.Served(); served != 2 || refused != 2 {
		t.Errorf("served %d, refused %d", served, refused)
	}
}

func subscribe(t *testing.T, nc *nats.Conn, subj string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestPermissionRefusal: a NATS server whose permissions do not let the
// user ask for a channel's keys makes NewFetcher fail with a refusal, not
// wait as for a feed handler that is not up.
func TestPermissionRefusal(t *testing.T) {
	users, err := natsconn.ParseUsers("fh:fh:feedhandler,alice:pw:subscriber")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsconn.StartServer(natsconn.ServerConfig{Host: "127.0.0.1", Users: users, Feed: "other"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("alice", "pw"), nats.CustomInboxPrefix("_INBOX_alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Feed "tickcast" is not the server's feed: alice may not publish there.
	_, err = NewFetcher(nc, "tickcast", 1, []int{0}, 500*time.Millisecond)
	if !errors.Is(err, seal.ErrRefused) || !strings.Contains(err.Error(), "refused the request") {
		t.Errorf("NewFetcher: %v, want the server's refusal", err)
	}
}

// TestNextKeyOnlyNearRotation: a reply holds the next epoch's key only
// within seal.Lead of it, so a user no longer entitled holds no key past
// the next rotation; the fetcher still holds each key before its epoch.
func TestNextKeyOnlyNearRotation(t *testing.T) {
	const rot = time.Hour
	sch := schedule(t, "002SEAR4RH", 0, rot)
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).UnixNano() // an epoch's start
	e := seal.Epoch(start, rot)
	for _, tc := range []struct {
		at   time.Duration // into the epoch
		next bool
	}{{0, false}, {rot - seal.Lead(rot) - time.Second, false}, {rot - seal.Lead(rot), true}, {rot - time.Second, true}} {
		r, err := seal.ReplyFor(sch, start+int64(tc.at))
		if err != nil {
			t.Fatal(err)
		}
		var epochs []uint32
		for _, k := range r.Keys {
			epochs = append(epochs, k.Epoch)
		}
		want := []uint32{e - 1, e}
		if tc.next {
			want = append(want, e+1)
		}
		if !slices.Equal(epochs, want) {
			t.Errorf("%v into the epoch: epochs %v, want %v", tc.at, epochs, want)
		}
	}
	if seal.FetchAhead(rot) >= seal.Lead(rot) || seal.FetchAhead(rot) <= 0 {
		t.Errorf("FetchAhead %v, Lead %v: a subscriber must ask after the key is given", seal.FetchAhead(rot), seal.Lead(rot))
	}
}
