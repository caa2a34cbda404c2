package natskeys

import (
	"errors"
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
	srv, err := Serve(nc, "feed", 2, func(ch int) *seal.Schedule { return scheds[ch].Load() })
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
	srv, err := Serve(nc, "feed", 1, func(int) *seal.Schedule { return sch })
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
