package feed

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
)

// TestPrefetchSameMessages: a Prefetch of the synthetic feed gives every
// message the feed gives, in order, with a ring small enough that both
// sides wait for each other, then io.EOF, and again io.EOF.
func TestPrefetchSameMessages(t *testing.T) {
	const count = 200_000
	cfg := SyntheticConfig{Seed: 3, Instruments: 50, Channels: 2, Count: count}
	direct, err := NewSynthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSynthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPrefetch(src, 64)
	defer p.Close()
	var want, got Msg
	var gbuf, wbuf [256]byte
	n := 0
	for {
		werr := direct.Next(&want)
		gerr := p.Next(&got)
		for gerr == ErrIdle { // the producer did not keep up within a millisecond
			gerr = p.Next(&got)
		}
		if werr != gerr {
			t.Fatalf("message %d: error %v, want %v", n+1, gerr, werr)
		}
		if werr != nil {
			break
		}
		n++
		// Compared as encoded: a source sets only the fields of the
		// message's type, and the rest hold what the slot held before.
		got.RecvNs, want.RecvNs = 0, 0 // stamped when each was read
		gn, gerr := got.Encode(gbuf[:])
		wn, werr := want.Encode(wbuf[:])
		if gerr != nil || werr != nil || !bytes.Equal(gbuf[:gn], wbuf[:wn]) {
			t.Fatalf("message %d: %x (%v), want %x (%v)", n, gbuf[:gn], gerr, wbuf[:wn], werr)
		}
	}
	if n != count {
		t.Fatalf("%d messages, want %d", n, count)
	}
	if err := p.Next(&got); err != io.EOF {
		t.Errorf("Next after the end: %v, want io.EOF", err)
	}
}

// errSource gives n messages, then err.
type errSource struct {
	n   int
	err error
}

func (s *errSource) Next(m *Msg) error {
	if s.n == 0 {
		return s.err
	}
	s.n--
	*m = Msg{}
	m.Type, m.Instrument = TypeQuote, uint32(s.n)
	return nil
}

// TestPrefetchError: the source's error comes after the messages before
// it, not before.
func TestPrefetchError(t *testing.T) {
	boom := errors.New("disk on fire")
	p := NewPrefetch(&errSource{n: 1000, err: boom}, 64)
	defer p.Close()
	var m Msg
	n := 0
	var err error
	for err = p.Next(&m); err == nil || err == ErrIdle; err = p.Next(&m) {
		if err == nil {
			n++
		}
	}
	if n != 1000 || err != boom {
		t.Errorf("%d messages, then %v; want 1000, then %v", n, err, boom)
	}
}

// idleSource is a live source with nothing to say: every Next waits a
// little and returns ErrIdle.
type idleSource struct{ calls atomic.Int64 }

func (s *idleSource) Next(*Msg) error {
	s.calls.Add(1)
	time.Sleep(100 * time.Microsecond)
	return ErrIdle
}

// TestPrefetchIdle: a source with nothing gives ErrIdle, so a publisher's
// heartbeats go on, and Close stops the producer, after which Next ends
// with io.EOF.
func TestPrefetchIdle(t *testing.T) {
	src := &idleSource{}
	p := NewPrefetch(src, 64)
	var m Msg
	for i := 0; i < 3; i++ {
		if err := p.Next(&m); err != ErrIdle {
			t.Fatalf("Next %d: %v, want ErrIdle", i, err)
		}
	}
	p.Close()
	calls := src.calls.Load()
	if calls == 0 {
		t.Fatal("the producer never called the source")
	}
	if err := p.Next(&m); err != io.EOF {
		t.Errorf("Next after Close: %v, want io.EOF", err)
	}
	time.Sleep(5 * time.Millisecond)
	if c := src.calls.Load(); c != calls {
		t.Errorf("the source was called %d times after Close", c-calls)
	}
	p.Close() // idempotent
}

// TestPrefetchCloseWhileFull: Close stops a producer waiting for room in
// a full ring.
func TestPrefetchCloseWhileFull(t *testing.T) {
	p := NewPrefetch(&errSource{n: 1 << 30, err: io.EOF}, 64)
	for p.head.Load() < 64 {
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while the producer waited for room")
	}
}

// TestPrefetchNoAllocs: taking messages allocates nothing, on either side.
func TestPrefetchNoAllocs(t *testing.T) {
	src, err := NewSynthetic(SyntheticConfig{Seed: 3, Instruments: 50, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPrefetch(src, 4096)
	defer p.Close()
	var m Msg
	for range 10_000 { // past the definitions
		if err := p.Next(&m); err != nil && err != ErrIdle {
			t.Fatal(err)
		}
	}
	const perRound = 10_000
	testenv.NoAllocs(t, "Prefetch.Next", 20, perRound, func() {
		for i := 0; i < perRound; {
			switch err := p.Next(&m); err {
			case nil:
				i++
			case ErrIdle:
			default:
				t.Fatal(err)
			}
		}
	})
}
