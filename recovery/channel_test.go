package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
)

func newTestChannel(t testing.TB, cfg StoreConfig) *Channel {
	t.Helper()
	c, err := NewChannel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refState is the test's reference snapshot state: the last message per
// (instrument, type), and per (instrument, side) the levels by price, kept
// in maps and recomputed from the log of published messages.
type refState struct {
	session mold.Session
	seq     uint64
	last    map[[2]uint32][]byte
	levels  map[[2]uint32]map[int64][]byte // by instrument and side: the last delta per price, action N
}

func (r *refState) reset(session mold.Session) {
	r.session, r.seq, r.last, r.levels = session, 0, map[[2]uint32][]byte{}, map[[2]uint32]map[int64][]byte{}
}

// advance applies log[r.seq:to] (log[i] is message i+1).
func (r *refState) advance(log [][]byte, to uint64) {
	for ; r.seq < to; r.seq++ {
		msg := log[r.seq]
		if len(msg) < feed.HeaderLen {
			continue
		}
		id := uint32(msg[4]) | uint32(msg[5])<<8 | uint32(msg[6])<<16 | uint32(msg[7])<<24
		switch typ := feed.Type(msg[0]); typ {
		case feed.TypeDefinition, feed.TypeStatus, feed.TypeQuote, feed.TypeTrade:
			r.last[[2]uint32{id, uint32(typ)}] = msg
		case feed.TypeLevelDelta:
			var m feed.Msg
			if m.Decode(msg) != nil {
				continue
			}
			k := [2]uint32{id, uint32(m.Delta.Side)}
			if r.levels[k] == nil {
				r.levels[k] = map[int64][]byte{}
			}
			if m.Delta.Action == feed.ActionDelete {
				delete(r.levels[k], m.Delta.Px)
				continue
			}
			kept := clone(msg)
			kept[feed.HeaderLen+1] = feed.ActionNew
			r.levels[k][m.Delta.Px] = kept
		}
	}
}

// messages lists the reference state in snapshot order.
func (r *refState) messages() [][]byte {
	var ids []uint32
	seen := map[uint32]bool{}
	for k := range r.last {
		if !seen[k[0]] {
			seen[k[0]] = true
			ids = append(ids, k[0])
		}
	}
	for k, lv := range r.levels {
		if !seen[k[0]] && len(lv) > 0 {
			seen[k[0]] = true
			ids = append(ids, k[0])
		}
	}
	slices.Sort(ids)
	var out [][]byte
	for _, id := range ids {
		for _, typ := range []feed.Type{feed.TypeDefinition, feed.TypeStatus, feed.TypeQuote, feed.TypeTrade} {
			if m, ok := r.last[[2]uint32{id, uint32(typ)}]; ok {
				out = append(out, m)
			}
		}
		for _, side := range []feed.Side{feed.SideBuy, feed.SideSell} {
			lv := r.levels[[2]uint32{id, uint32(side)}]
			pxs := slices.Sorted(maps.Keys(lv))
			if side == feed.SideBuy {
				slices.Reverse(pxs)
			}
			for _, px := range pxs {
				out = append(out, lv[px])
			}
		}
	}
	return out
}

// TestSnapshotMatchesLogWhilePublishing checks the property: the snapshot
// served at channel sequence S equals the state obtained by applying
// messages 1..S, while publishing continues. One goroutine publishes a
// synthetic stream (with statuses, busts, level deltas, longer and short
// messages, and a session change) into a Channel and records every message
// it publishes; another takes snapshots and compares each with a map-based
// reference computed from the log up to S.
func TestSnapshotMatchesLogWhilePublishing(t *testing.T) {
	const (
		wantSnapshots = 400
		pktsPerSnap   = 50 // publisher runs at most this far ahead
	)
	c := newTestChannel(t, StoreConfig{MaxMessages: 5000, MaxBytes: 4 * mold.MaxMessageLen})
	var (
		logMu sync.Mutex
		logs  = map[mold.Session][][]byte{}
		snaps atomic.Int64 // snapshot attempts
		taken atomic.Int64 // snapshots of a started session
		stop  atomic.Bool
		pkts  int64
	)
	pubDone := make(chan error, 1)
	st := newStream(t, "PA00000001", 200, 21, true)
	go func() {
		switched := false
		record := func(seq uint64, msg []byte) {
			logMu.Lock()
			l := logs[st.session]
			if uint64(len(l))+1 != seq {
				panic("log out of order")
			}
			logs[st.session] = append(l, clone(msg))
			logMu.Unlock()
		}
		for !stop.Load() {
			if pkts > pktsPerSnap*(snaps.Load()+1) {
				runtime.Gosched()
				continue
			}
			// Switch once half the snapshots were taken of the first
			// session (attempts before the first packet do not count).
			if !switched && taken.Load() >= wantSnapshots/2 {
				st.newSession("PB00000002")
				switched = true
			}
			// The log holds every message before the channel sees it.
			first, pkt := st.packet(20, record)
			if err := c.OnPacket(st.session, first, pkt); err != nil {
				pubDone <- err
				return
			}
			pkts++
		}
		pubDone <- nil
	}()

	var ref refState
	type point struct {
		session mold.Session
		seq     uint64
	}
	distinct := map[point]bool{}
	sessions := map[mold.Session]bool{}
	deadline := time.Now().Add(20 * time.Second)
	n := 0
	// Go on until both sessions were seen: under load the publisher may
	// switch late.
	for (n < wantSnapshots || len(sessions) < 2) && time.Now().Before(deadline) {
		var got [][]byte
		session, seq, err := c.Snapshot(func(msg []byte) error {
			got = append(got, clone(msg))
			return nil
		})
		snaps.Add(1)
		if errors.Is(err, ErrUnknownSession) {
			runtime.Gosched()
			continue // nothing published yet
		}
		if err != nil {
			t.Fatal(err)
		}
		logMu.Lock()
		log := logs[session]
		logMu.Unlock()
		if uint64(len(log)) < seq {
			t.Fatalf("snapshot at %d of session %s, only %d messages published", seq, session, len(log))
		}
		if session != ref.session || ref.last == nil {
			ref.reset(session)
		}
		if seq < ref.seq {
			t.Fatalf("snapshot sequence went back from %d to %d", ref.seq, seq)
		}
		ref.advance(log, seq)
		if err := sameMessages(got, ref.messages()); err != nil {
			t.Fatalf("snapshot %d (session %s, sequence %d): %v", n, session, seq, err)
		}
		distinct[point{session, seq}] = true
		sessions[session] = true
		n++
		taken.Add(1)
	}
	stop.Store(true)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d snapshots at %d distinct sequences over %d sessions, %d packets published", n, len(distinct), len(sessions), pkts)
	if n < 200 || len(distinct) < 100 || len(sessions) != 2 {
		t.Errorf("too little concurrency exercised: %d snapshots, %d distinct, %d sessions", n, len(distinct), len(sessions))
	}
}

func TestChannel(t *testing.T) {
	c := newTestChannel(t, StoreConfig{MaxMessages: 300})
	if _, _, err := c.Snapshot(func([]byte) error { return nil }); err != ErrUnknownSession {
		t.Fatalf("snapshot of empty channel: %v", err)
	}
	if _, ok := c.Session(); ok {
		t.Fatal("empty channel has a session")
	}
	st := newStream(t, "CH00000001", 30, 22, true)
	var log [][]byte
	record := func(_ uint64, msg []byte) { log = append(log, clone(msg)) }
	for range 100 {
		first, pkt := st.packet(20, record)
		if err := c.OnPacket(st.session, first, pkt); err != nil {
			t.Fatal(err)
		}
	}
	session, seq, got := snapshotAll(t, c.Snapshot)
	var ref refState
	ref.reset(session)
	ref.advance(log, seq)
	if session != st.session || seq != uint64(len(log)) || seq+1 != c.Next() {
		t.Fatalf("snapshot session %s seq %d, channel next %d, %d published", session, seq, c.Next(), len(log))
	}
	if err := sameMessages(got, ref.messages()); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Len(); n != 300 || c.Oldest() != c.Next()-300 {
		t.Fatalf("Len %d oldest %d next %d", n, c.Oldest(), c.Next())
	}
	msgs, err := readAll(t, c, session, c.Oldest(), 300)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameMessages(msgs, log[c.Oldest()-1:]); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(session, c.Oldest()-1, 1, nil); !errors.Is(err, ErrTooOld) {
		t.Errorf("read too old: %v", err)
	}

	// Rejected packets change neither store nor state.
	next := c.Next()
	pkt := rawPacket(t, session, next+1, encodeMsg(t, feed.TypeQuote, 1, 99))
	var se *SequenceError
	if err := c.OnPacket(session, next+1, pkt); !errors.As(err, &se) || se.Expected != next {
		t.Fatalf("gap: %v", err)
	}
	if err := c.OnPacket(session, next, pkt); err == nil {
		t.Fatal("header mismatch accepted")
	}
	other := mustSession(t, "CH00000002")
	if err := c.OnPacket(other, 2, rawPacket(t, other, 2, []byte("x"))); !errors.As(err, &se) || se.Expected != 1 {
		t.Fatalf("new session at 2: %v", err)
	}
	if s2, seq2, got2 := snapshotAll(t, c.Snapshot); s2 != session || seq2 != seq || sameMessages(got2, got) != nil || c.Next() != next {
		t.Fatal("rejected packets changed the channel")
	}

	// A heartbeat of a new session resets store and state.
	if err := c.OnPacket(other, 1, mold.AppendHeartbeat(nil, other, 1)); err != nil {
		t.Fatal(err)
	}
	s2, seq2, got2 := snapshotAll(t, c.Snapshot)
	if s2 != other || seq2 != 0 || len(got2) != 0 || c.Next() != 1 || c.Oldest() != 1 {
		t.Fatalf("after new session: %s %d %d messages, next %d", s2, seq2, len(got2), c.Next())
	}
	if n, b := c.Len(); n != 0 || b != 0 {
		t.Fatalf("after new session: Len %d %d", n, b)
	}
	if err := c.Read(session, 1, 1, nil); err != ErrUnknownSession {
		t.Errorf("read of the old session: %v", err)
	}
	q := encodeMsg(t, feed.TypeQuote, 5, 1)
	if err := c.OnPacket(other, 1, rawPacket(t, other, 1, q, nil)); err != nil {
		t.Fatal(err)
	}
	if s3, seq3, got3 := snapshotAll(t, c.Snapshot); s3 != other || seq3 != 2 || sameMessages(got3, [][]byte{q}) != nil {
		t.Fatalf("new session: %s %d %d messages", s3, seq3, len(got3))
	}
}

// TestChannelAllocs: OnPacket, Read and Snapshot allocate nothing once the
// store is full, with the state applied in line and in the background.
func TestChannelAllocs(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			testChannelAllocs(t, background)
		})
	}
}

func testChannelAllocs(t *testing.T, background bool) {
	c := newTestChannel(t, StoreConfig{MaxMessages: 4000, MaxBytes: 100_000})
	if background {
		defer c.ApplyInBackground()()
	}
	st := newStream(t, "CA00000001", 100, 23, true)
	for st.seq < 20_000 {
		first, pkt := st.packet(20, nil)
		if err := c.OnPacket(st.session, first, pkt); err != nil {
			t.Fatal(err)
		}
	}
	_, p := st.packet(20, nil)
	pkt := clone(p)
	const packets = 100
	testenv.NoAllocs(t, "OnPacket", 20, packets, func() {
		for range packets {
			next := c.Next()
			setPacketSeq(pkt, next)
			if err := c.OnPacket(st.session, next, pkt); err != nil {
				t.Fatal(err)
			}
		}
	})
	var sum int
	fn := func(_ uint64, msg []byte) error { sum += len(msg); return nil }
	const reads = 10
	testenv.NoAllocs(t, "Read of 100 messages", 100, reads, func() {
		for range reads {
			if err := c.Read(st.session, c.Next()-100, 100, fn); err != nil {
				t.Fatal(err)
			}
		}
	})
	sfn := func(msg []byte) error { sum += len(msg); return nil }
	testenv.NoAllocs(t, "Snapshot", 100, 1, func() {
		if _, _, err := c.Snapshot(sfn); err != nil {
			t.Fatal(err)
		}
	})
	if sum == 0 || !bytes.Equal(pkt[:mold.SessionLen], st.session[:]) {
		t.Error("nothing read")
	}
}

func BenchmarkChannelOnPacket(b *testing.B) {
	c := newTestChannel(b, StoreConfig{MaxMessages: 1 << 16, MaxBytes: 4 << 20})
	st := newStream(b, "BC00000001", 1000, 24, false)
	const nPkts = 64
	pkts := make([][]byte, nPkts)
	for i := range pkts {
		_, p := st.packet(20, nil)
		pkts[i] = clone(p)
	}
	msgs := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pkt := pkts[i%nPkts]
		next := c.store.next
		setPacketSeq(pkt, next)
		if err := c.OnPacket(st.session, next, pkt); err != nil {
			b.Fatal(err)
		}
		msgs += int(c.store.next - next)
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}

// TestChannelBackgroundState: a channel whose state is applied in the
// background gives the same snapshots, with the same sequences, as one
// applied in line, fed the same packets: with a store small enough that
// messages are evicted before the applier reaches them, with snapshots and
// reads from another goroutine while packets arrive, and across a new
// session.
func TestChannelBackgroundState(t *testing.T) {
	cfg := StoreConfig{MaxMessages: 3000, MaxBytes: 64 << 10}
	inline, bg := newTestChannel(t, cfg), newTestChannel(t, cfg)
	stop := bg.ApplyInBackground()
	defer stop()
	for _, session := range []string{"BG00000001", "BG00000002"} {
		st := newStream(t, session, 300, 9, true)
		done := make(chan struct{})
		readerErr := make(chan error, 1)
		go func() { // a concurrent reader of the background channel
			defer close(readerErr)
			for {
				select {
				case <-done:
					return
				default:
				}
				sess, seq, err := bg.Snapshot(func([]byte) error { return nil })
				if err != nil && err != ErrUnknownSession {
					readerErr <- err
					return
				}
				// Next may have moved on since; a snapshot never reflects
				// more than was stored. (Next before Session: a new
				// session starting in between cannot pass for the old.)
				next := bg.Next()
				if now, _ := bg.Session(); err == nil && now == sess && seq >= next {
					readerErr <- errors.New("a snapshot reflects more than the store holds")
					return
				}
			}
		}()
		for i := 0; i < 3000; i++ {
			first, pkt := st.packet(1+i%20, nil)
			if err := inline.OnPacket(st.session, first, pkt); err != nil {
				t.Fatal(err)
			}
			if err := bg.OnPacket(st.session, first, pkt); err != nil {
				t.Fatal(err)
			}
			if i%500 != 499 {
				continue
			}
			ws, wseq, want := snapshotAll(t, inline.Snapshot)
			gs, gseq, got := snapshotAll(t, bg.Snapshot)
			if gs != ws || gseq != wseq {
				t.Fatalf("%s packet %d: background snapshot at %v %d, in line at %v %d", session, i, gs, gseq, ws, wseq)
			}
			if err := sameMessages(got, want); err != nil {
				t.Fatalf("%s packet %d: %v", session, i, err)
			}
		}
		close(done)
		if err := <-readerErr; err != nil {
			t.Fatal(err)
		}
		if o, n := bg.Oldest(), bg.Next(); o < 2 || n < 10000 {
			t.Fatalf("the store should have evicted: oldest %d, next %d", o, n)
		}
	}
}
