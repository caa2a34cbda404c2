package faults

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud"
)

// handRecv is a ud.Receiver backed by a real ud.Ring that the test fills by
// hand, so the arrival order and timing are exactly what the test says.
// Release poisons the slots it hands back, so a view the wrapper still lends
// after its slot went back shows up as corrupted bytes; and the Ring itself
// panics if more slots are released than were published.
type handRecv struct {
	ring     *ud.Ring
	pushed   uint64
	released uint64
}

const poison = 0xEE

func newHand(t testing.TB, capacity int) *handRecv {
	t.Helper()
	r, err := ud.NewRing(capacity, 256)
	if err != nil {
		t.Fatal(err)
	}
	return &handRecv{ring: r}
}

// push publishes one datagram received at recvNs; false if the ring is full.
func (h *handRecv) push(b []byte, recvNs int64) bool {
	s := h.ring.FreeSlot(0)
	if s == nil {
		return false
	}
	s.N = copy(s.Buf, b)
	s.RecvNs = recvNs
	h.ring.Publish(1)
	h.pushed++
	return true
}

func (h *handRecv) MaxDatagram() int           { return 256 }
func (h *handRecv) Peek(i int) *ud.Slot        { return h.ring.Peek(i) }
func (h *handRecv) Wait(d time.Duration) error { return h.ring.Wait(d) }
func (h *handRecv) Close() error               { h.ring.Close(); return nil }
func (h *handRecv) Stats() ud.RecvStats {
	return ud.RecvStats{Datagrams: h.pushed}
}
func (h *handRecv) Release(n int) {
	for i := 0; i < n; i++ {
		if s := h.ring.Peek(i); s != nil {
			b := s.Buf[:s.N]
			for j := range b {
				b[j] = poison
			}
		}
	}
	h.ring.Release(n)
	h.released += uint64(n)
}

// wrap is Wrap with the MoldUDP64 message count the subscriber supplies.
func wrap(r ud.Receiver, cfg Config) (*Receiver, error) {
	cfg.CountMessages = mold.MessageCount
	return Wrap(r, cfg)
}

// packets returns n MoldUDP64 datagrams. Datagram i carries i in its header's
// sequence field (so the test can tell them apart, heartbeats included) and
// a varying number of messages: some are heartbeats (count 0), a few end of
// session (0xFFFF), the rest carry 1 to 5 two-byte messages.
func packets(n int) [][]byte {
	out := make([][]byte, n)
	sess, _ := mold.ParseSession("FAULTS")
	for i := range out {
		h := mold.Header{Session: sess, Seq: uint64(i), Count: uint16(i % 6)}
		if i%97 == 96 {
			h.Count = mold.EndOfSession
		}
		b := h.Append(nil)
		for m := 0; m < h.Messages(); m++ {
			b = binary.BigEndian.AppendUint16(b, 2)
			b = binary.BigEndian.AppendUint16(b, uint16(i*7+m))
		}
		out[i] = b
	}
	return out
}

// id returns the datagram number of a shown slot and checks that its bytes
// are intact.
func id(t testing.TB, pk [][]byte, s *ud.Slot) uint64 {
	t.Helper()
	d := s.Data()
	if len(d) < mold.HeaderLen {
		t.Fatalf("shown datagram of %d bytes", len(d))
	}
	k := binary.BigEndian.Uint64(d[mold.SessionLen:])
	if k >= uint64(len(pk)) || !bytes.Equal(d, pk[k]) {
		t.Fatalf("shown datagram is not one that was sent (released too early?): % x", d[:min(len(d), 24)])
	}
	return k
}

// run pushes pk through a wrapper in chunks of chunk datagrams (as far as the
// ring takes them), receive time of datagram i being i*step, and drains it
// with Peek(0)/Release(1) after each chunk, like the subscriber. It returns
// the datagram numbers in the order shown.
func run(t testing.TB, cfg Config, pk [][]byte, ringCap, chunk int, step time.Duration) ([]uint64, *Receiver, *handRecv) {
	t.Helper()
	h := newHand(t, ringCap)
	w, err := wrap(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var shown []uint64
	for next := 0; next < len(pk); {
		for end := min(next+chunk, len(pk)); next < end && h.push(pk[next], int64(next+1)*int64(step)); next++ {
		}
		for s := w.Peek(0); s != nil; s = w.Peek(0) {
			shown = append(shown, id(t, pk, s))
			w.Release(1)
		}
	}
	if h.released != h.pushed {
		t.Fatalf("wrapped receiver: %d pushed, %d released after draining", h.pushed, h.released)
	}
	return shown, w, h
}

// missing returns the datagrams of pk not in shown, and the messages in them.
func missing(pk [][]byte, shown []uint64) (dgs []uint64, msgs uint64) {
	seen := make([]bool, len(pk))
	for _, k := range shown {
		seen[k] = true
	}
	for k, ok := range seen {
		if !ok {
			dgs = append(dgs, uint64(k))
			h, _ := mold.DecodeHeader(pk[k])
			msgs += uint64(h.Messages())
		}
	}
	return dgs, msgs
}

func TestLoss(t *testing.T) {
	const n = 10000
	pk := packets(n)
	shown, w, _ := run(t, Config{Seed: 7, Loss: 0.1}, pk, 64, 50, time.Microsecond)
	f := w.Faults()
	lost, lostMsgs := missing(pk, shown)
	if uint64(len(shown))+f.DroppedDatagrams != n {
		t.Fatalf("shown %d + dropped %d != sent %d", len(shown), f.DroppedDatagrams, n)
	}
	if !slices.IsSorted(shown) || len(slices.Compact(slices.Clone(shown))) != len(shown) {
		t.Fatal("loss alone reordered or duplicated datagrams")
	}
	if uint64(len(lost)) != f.DroppedDatagrams || lostMsgs != f.DroppedMessages {
		t.Fatalf("missing %d datagrams with %d messages; injector counts %+v", len(lost), lostMsgs, f)
	}
	if f.DroppedDatagrams < 900 || f.DroppedDatagrams > 1100 { // 10% ± 3σ
		t.Fatalf("dropped %d of %d, want about 10%%", f.DroppedDatagrams, n)
	}
	if f.DroppedMessages == 0 || f.Duplicated+f.Reordered+f.Bursts+f.SilencedDatagrams != 0 {
		t.Fatalf("faults %+v", f)
	}
	if got := w.Stats().Datagrams; got != n {
		t.Fatalf("Stats().Datagrams = %d, want the wrapped receiver's %d", got, n)
	}
}

// runs returns the lengths of the runs of consecutive datagram numbers in
// sorted dgs.
func runs(dgs []uint64) []int {
	var out []int
	for i := 0; i < len(dgs); {
		j := i + 1
		for j < len(dgs) && dgs[j] == dgs[j-1]+1 {
			j++
		}
		out = append(out, j-i)
		i = j
	}
	return out
}

func TestBurst(t *testing.T) {
	const n = 20000
	pk := packets(n)
	// Every drop starts a burst of 10: all losses come in runs of 10
	// (two bursts may follow each other), except one cut short at the end.
	shown, w, _ := run(t, Config{Seed: 3, Loss: 0.01, Burst: 1, BurstLen: 10}, pk, 128, 100, time.Microsecond)
	f := w.Faults()
	lost, lostMsgs := missing(pk, shown)
	if uint64(len(lost)) != f.DroppedDatagrams || lostMsgs != f.DroppedMessages || uint64(len(shown))+f.DroppedDatagrams != n {
		t.Fatalf("shown %d, missing %d (%d messages); faults %+v", len(shown), len(lost), lostMsgs, f)
	}
	if f.Bursts < 100 || f.DroppedDatagrams != f.Bursts*10-uint64(w.burstLeft) {
		t.Fatalf("faults %+v, burst left %d", f, w.burstLeft)
	}
	rs := runs(lost)
	for i, l := range rs {
		if l%10 != 0 && !(i == len(rs)-1 && lost[len(lost)-1] == n-1) {
			t.Fatalf("a run of %d lost datagrams; runs %v", l, rs)
		}
	}

	// Half the drops start bursts: single losses and runs of at least 5.
	shown, w, _ = run(t, Config{Seed: 4, Loss: 0.02, Burst: 0.5, BurstLen: 5}, pk, 128, 100, time.Microsecond)
	f = w.Faults()
	lost, _ = missing(pk, shown)
	singles, long := 0, 0
	for _, l := range runs(lost) {
		switch {
		case l == 1:
			singles++
		case l >= 5:
			long++
		}
	}
	if singles == 0 || long == 0 || f.Bursts == 0 || uint64(len(lost)) != f.DroppedDatagrams {
		t.Fatalf("singles %d, runs of 5+ %d, faults %+v", singles, long, f)
	}
	// Expected fraction L(1+B(N-1))/(1+LB(N-1)) = 0.06/1.04.
	if want := n * 0.06 / 1.04; float64(f.DroppedDatagrams) < want*0.8 || float64(f.DroppedDatagrams) > want*1.2 {
		t.Fatalf("dropped %d, want about %.0f", f.DroppedDatagrams, want)
	}
}

func TestDup(t *testing.T) {
	const n = 10000
	pk := packets(n)
	h := newHand(t, 64)
	w, err := wrap(h, Config{Seed: 11, Dup: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	var shown [][]byte
	var ids []uint64
	for next := 0; next < n; {
		for ; next < n && h.push(pk[next], 1); next++ {
		}
		for s := w.Peek(0); s != nil; s = w.Peek(0) {
			ids = append(ids, id(t, pk, s))
			shown = append(shown, append([]byte(nil), s.Data()...))
			w.Release(1)
		}
	}
	f := w.Faults()
	if uint64(len(shown)) != n+f.Duplicated || f.Duplicated < 1800 || f.Duplicated > 2200 {
		t.Fatalf("shown %d of %d sent; faults %+v", len(shown), n, f)
	}
	dups := uint64(0)
	for i := 1; i < len(shown); i++ {
		if ids[i] == ids[i-1] {
			dups++
			if !bytes.Equal(shown[i], shown[i-1]) {
				t.Fatalf("datagram %d: duplicate differs", ids[i])
			}
		} else if ids[i] != ids[i-1]+1 {
			t.Fatalf("datagram %d after %d", ids[i], ids[i-1])
		}
	}
	if dups != f.Duplicated {
		t.Fatalf("%d adjacent duplicates shown, injector counts %d", dups, f.Duplicated)
	}
}

func TestDupHoldsSlotUntilBothViewsReleased(t *testing.T) {
	pk := packets(4)
	h := newHand(t, 8)
	w, _ := wrap(h, Config{Dup: 1})
	for _, p := range pk {
		h.push(p, 1)
	}
	if a, b := w.Peek(0), w.Peek(1); a != b || id(t, pk, a) != 0 {
		t.Fatal("a duplicate is not the same slot twice")
	}
	w.Release(1)
	if h.released != 0 {
		t.Fatalf("released %d slots while the duplicate is lent", h.released)
	}
	id(t, pk, w.Peek(0))
	w.Release(1)
	if h.released != 1 {
		t.Fatalf("released %d slots after both views of the first", h.released)
	}
}

func TestReorder(t *testing.T) {
	const n = 4000
	pk := packets(n)
	// Everything has arrived before the consumer looks: every chosen swap
	// can be done, except for the last datagram.
	shown, w, _ := run(t, Config{Seed: 5, Reorder: 0.3}, pk, 4096, n, time.Microsecond)
	f := w.Faults()
	if len(shown) != n {
		t.Fatalf("shown %d of %d", len(shown), n)
	}
	swaps := uint64(0)
	for i := 0; i < n; {
		switch {
		case shown[i] == uint64(i):
			i++
		case i+1 < n && shown[i] == uint64(i+1) && shown[i+1] == uint64(i):
			swaps++
			i += 2
		default:
			t.Fatalf("position %d shows datagram %d", i, shown[i])
		}
	}
	if swaps != f.Reordered || swaps < 600 || f.DroppedDatagrams != 0 {
		t.Fatalf("%d adjacent swaps shown; faults %+v", swaps, f)
	}

	// Datagrams that arrive one at a time cannot be swapped: no waiting.
	shown, w, _ = run(t, Config{Seed: 5, Reorder: 1}, pk[:100], 8, 1, time.Microsecond)
	if f := w.Faults(); f.Reordered != 0 || len(shown) != 100 || !slices.IsSorted(shown) {
		t.Fatalf("one at a time: %d shown, sorted %v, faults %+v", len(shown), slices.IsSorted(shown), f)
	}
}

func TestSilence(t *testing.T) {
	const n = 1000
	pk := packets(n)
	msgsIn := func(lo, hi int) (m uint64) {
		for k := lo; k < hi; k++ {
			h, _ := mold.DecodeHeader(pk[k])
			m += uint64(h.Messages())
		}
		return m
	}
	// Datagram i arrives at (i+1) ms; the first at 1 ms. Silent from 100 ms
	// after it for 50 ms: datagrams 100..149.
	for _, c := range []struct {
		cfg    Config
		lo, hi int
	}{
		{Config{Silence: true, SilenceAfter: 100 * time.Millisecond, SilenceFor: 50 * time.Millisecond}, 100, 150},
		{Config{Silence: true, SilenceAfter: 900 * time.Millisecond}, 900, n},
		{Config{Silence: true}, 0, n},
		{Config{Silence: true, SilenceFor: 10 * time.Millisecond}, 0, 10},
	} {
		shown, w, _ := run(t, c.cfg, pk, 32, 20, time.Millisecond)
		f := w.Faults()
		lost, lostMsgs := missing(pk, shown)
		if len(lost) != c.hi-c.lo || (len(lost) > 0 && (lost[0] != uint64(c.lo) || lost[len(lost)-1] != uint64(c.hi-1))) {
			t.Fatalf("%+v: lost %d datagrams, want %d..%d", c.cfg, len(lost), c.lo, c.hi-1)
		}
		if f.SilencedDatagrams != uint64(len(lost)) || f.SilencedMessages != lostMsgs || lostMsgs != msgsIn(c.lo, c.hi) || f.DroppedDatagrams != 0 {
			t.Fatalf("%+v: faults %+v, lost %d datagrams with %d messages", c.cfg, f, len(lost), lostMsgs)
		}
	}
}

// consume drains w with a random mix of Peek(i) batches and partial
// releases, checking after every step that each lent view is intact.
func consume(t *testing.T, w *Receiver, h *handRecv, pk [][]byte, rng *rand.Rand) []uint64 {
	var shown []uint64
	lent := 0
	for {
		want := lent + rng.IntN(40)
		for lent < want && w.Peek(lent) != nil {
			lent++
		}
		for i := 0; i < lent; i++ {
			id(t, pk, w.Peek(i))
		}
		if lent == 0 {
			return shown
		}
		n := 1 + rng.IntN(lent)
		for i := 0; i < n; i++ {
			shown = append(shown, id(t, pk, w.Peek(i)))
		}
		w.Release(n)
		lent -= n
		if h.released > h.pushed {
			t.Fatal("released more than pushed")
		}
	}
}

func TestPeekAheadMatchesOneByOne(t *testing.T) {
	const n = 3000
	pk := packets(n)
	cfg := Config{Seed: 99, Loss: 0.05, Burst: 0.2, BurstLen: 4, Dup: 0.1, Reorder: 0.2,
		Silence: true, SilenceAfter: 1000 * time.Millisecond, SilenceFor: 100 * time.Millisecond}
	want, w1, _ := run(t, cfg, pk, 4096, n, time.Millisecond)

	h := newHand(t, 4096)
	w, _ := wrap(h, cfg)
	for i, p := range pk {
		h.push(p, int64(i+1)*int64(time.Millisecond))
	}
	got := consume(t, w, h, pk, rand.New(rand.NewPCG(1, 2)))
	if !slices.Equal(got, want) {
		t.Fatalf("Peek(i) batches showed %d datagrams, Peek(0) one by one %d; differ", len(got), len(want))
	}
	if w.Faults() != w1.Faults() || h.released != n {
		t.Fatalf("faults %+v vs %+v; released %d of %d", w.Faults(), w1.Faults(), h.released, n)
	}
	f := w.Faults()
	if f.DroppedDatagrams == 0 || f.Bursts == 0 || f.Duplicated == 0 || f.Reordered == 0 || f.SilencedDatagrams != 100 {
		t.Fatalf("faults %+v: want every kind", f)
	}
	lost, lostMsgs := missing(pk, got)
	if uint64(len(lost)) != f.DroppedDatagrams+f.SilencedDatagrams || lostMsgs != f.DroppedMessages+f.SilencedMessages {
		t.Fatalf("lost %d datagrams (%d messages); faults %+v", len(lost), lostMsgs, f)
	}
	if uint64(len(got)) != n-f.DroppedDatagrams-f.SilencedDatagrams+f.Duplicated {
		t.Fatalf("shown %d; faults %+v", len(got), f)
	}
}

func TestInterleavedArrivalsWithHeldViews(t *testing.T) {
	// Datagrams keep arriving while the consumer holds views: the wrapped
	// ring must only get back slots no view shows any more.
	const n = 20000
	pk := packets(n)
	h := newHand(t, 256)
	w, _ := wrap(h, Config{Seed: 1, Loss: 0.1, Burst: 0.1, Dup: 0.2, Reorder: 0.3})
	rng := rand.New(rand.NewPCG(3, 4))
	lent, next, shown := 0, 0, 0
	for next < n || lent > 0 || w.Peek(0) != nil {
		for k := rng.IntN(64); k > 0 && next < n && h.push(pk[next], 1); k-- {
			next++
		}
		for want := lent + rng.IntN(32); lent < want && w.Peek(lent) != nil; {
			lent++
		}
		for i := 0; i < lent; i++ {
			id(t, pk, w.Peek(i))
		}
		if lent > 0 {
			r := 1 + rng.IntN(lent)
			w.Release(r)
			lent -= r
			shown += r
		}
	}
	f := w.Faults()
	if h.released != n || uint64(shown) != n-f.DroppedDatagrams+f.Duplicated {
		t.Fatalf("released %d of %d; shown %d; faults %+v", h.released, n, shown, f)
	}
}

func TestSameSeedSameChoices(t *testing.T) {
	pk := packets(5000)
	cfg := Config{Seed: 42, Loss: 0.1, Burst: 0.3, Dup: 0.1, Reorder: 0.1}
	a, wa, _ := run(t, cfg, pk, 64, 64, time.Microsecond)
	b, wb, _ := run(t, cfg, pk, 64, 64, time.Microsecond)
	if !slices.Equal(a, b) || wa.Faults() != wb.Faults() {
		t.Fatal("same seed, same arrivals: different results")
	}
	// The loss choices do not depend on how the datagrams were batched.
	lossOnly := Config{Seed: 42, Loss: 0.1, Burst: 0.3}
	c, _, _ := run(t, lossOnly, pk, 64, 64, time.Microsecond)
	d, _, _ := run(t, lossOnly, pk, 8, 3, time.Microsecond)
	if !slices.Equal(c, d) {
		t.Fatal("same seed, different batching: different losses")
	}
	cfg.Seed = 43
	if e, _, _ := run(t, cfg, pk, 64, 64, time.Microsecond); slices.Equal(a, e) {
		t.Fatal("seeds 42 and 43 made the same choices")
	}
	if DeriveSeed(1, 2) == DeriveSeed(1, 3) || DeriveSeed(1, 2) == DeriveSeed(2, 2) {
		t.Fatal("DeriveSeed collides")
	}
}

func TestNoFaultsIsTransparent(t *testing.T) {
	pk := packets(500)
	shown, w, _ := run(t, Config{Seed: 1}, pk, 16, 7, time.Microsecond)
	if len(shown) != len(pk) || !slices.IsSorted(shown) || w.Faults() != (Stats{}) {
		t.Fatalf("shown %d of %d, faults %+v", len(shown), len(pk), w.Faults())
	}
}

func TestWait(t *testing.T) {
	pk := packets(10)
	h := newHand(t, 16)
	w, _ := wrap(h, Config{Dup: 1})
	h.push(pk[0], 1)
	// One view lent, the other ready: Wait must not block even though the
	// wrapped ring has nothing new.
	w.Peek(0)
	w.Release(1)
	start := time.Now()
	if err := w.Wait(time.Second); err != nil || time.Since(start) > 100*time.Millisecond || w.Peek(0) == nil {
		t.Fatalf("Wait with a view ready: %v after %v", err, time.Since(start))
	}
	w.Release(1)

	// Everything that arrives is silenced: Wait sleeps out its timeout.
	h2 := newHand(t, 16)
	s, _ := wrap(h2, Config{Silence: true})
	h2.push(pk[1], 1)
	start = time.Now()
	if err := s.Wait(30 * time.Millisecond); err != nil || time.Since(start) < 25*time.Millisecond || s.Peek(0) != nil {
		t.Fatalf("Wait with everything dropped: %v after %v", err, time.Since(start))
	}
	// And wakes for a datagram that survives.
	go func() {
		time.Sleep(10 * time.Millisecond)
		h.push(pk[2], 1)
	}()
	if err := w.Wait(time.Second); err != nil || w.Peek(0) == nil {
		t.Fatalf("Wait for a new datagram: %v", err)
	}
	w.Release(2)
	w.Close()
	if err := w.Wait(time.Second); !errors.Is(err, ud.ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
	s.Close()
	if err := s.Wait(time.Second); !errors.Is(err, ud.ErrClosed) {
		t.Fatalf("Wait after Close (silenced): %v", err)
	}
}

func TestReleasePanicsLikeTheRing(t *testing.T) {
	h := newHand(t, 8)
	w, _ := wrap(h, Config{Dup: 1})
	h.push(packets(1)[0], 1)
	w.Release(2) // both views, never peeked: allowed
	defer func() {
		if recover() == nil {
			t.Fatal("Release beyond the lent datagrams did not panic")
		}
	}()
	w.Release(1)
}

// TestZeroAllocs: the fault injector allocates nothing per datagram, with
// every fault enabled.
func TestZeroAllocs(t *testing.T) {
	pk := packets(64)
	pk = append(pk, []byte("short")) // not MoldUDP64: counted as 0 messages
	h := newHand(t, 64)
	w, err := wrap(h, Config{Seed: 1, Loss: 0.1, Burst: 0.2, Dup: 0.2, Reorder: 0.3,
		Silence: true, SilenceAfter: time.Second, SilenceFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := int64(0)
	testenv.NoAllocs(t, "datagram through the fault injector", 200, 32+1, func() {
		for _, p := range pk[:32] {
			now += int64(50 * time.Millisecond)
			h.push(p, now)
		}
		h.push(pk[64], now)
		for i := 0; w.Peek(i) != nil && i < 8; i++ {
		}
		for s := w.Peek(0); s != nil; s = w.Peek(0) {
			w.Release(1)
		}
	})
	if f := w.Faults(); f.SilencedDatagrams == 0 || f.DroppedDatagrams == 0 || f.Duplicated == 0 || f.Reordered == 0 {
		t.Fatalf("faults %+v: the run did not exercise every fault", f)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{Loss: -0.1}, "Loss"},
		{Config{Loss: 1.5}, "Loss"},
		{Config{Loss: 0.1, Burst: 2}, "Burst"},
		{Config{Burst: 0.5}, "Burst"},
		{Config{Dup: -1}, "Dup"},
		{Config{Reorder: 1.01}, "Reorder"},
		{Config{Loss: 0.1, BurstLen: -1}, "BurstLen"},
		{Config{Silence: true, SilenceAfter: -time.Second}, "SilenceAfter"},
		{Config{Silence: true, SilenceFor: -time.Second}, "SilenceFor"},
		{Config{SilenceAfter: time.Second}, "SilenceAfter"},
		{Config{SilenceFor: time.Second}, "SilenceFor"},
	}
	nan := Config{}
	nan.Dup = nan.Dup / nan.Dup // NaN without a constant expression
	cases = append(cases, struct {
		cfg   Config
		field string
	}{nan, "Dup"})
	for _, c := range cases {
		_, err := wrap(newHand(t, 1), c.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(err.Error(), "Config."+c.field+" ") {
			t.Errorf("%+v: error %v, want one naming %s", c.cfg, err, c.field)
		}
	}
	for _, c := range []Config{{}, {Loss: 1, Burst: 1, BurstLen: 1, Dup: 1, Reorder: 1}, {Silence: true, SilenceAfter: time.Second, SilenceFor: time.Second}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if (Config{}).Enabled() || (Config{Seed: 5, BurstLen: 3}).Enabled() || !(Config{Silence: true}).Enabled() || !(Config{Reorder: 0.1}).Enabled() {
		t.Error("Enabled")
	}
}

func TestParseSilence(t *testing.T) {
	type res struct {
		line       string
		after, dur time.Duration
	}
	good := map[string]res{
		"":           {},
		"A":          {"A", 0, 0},
		"b":          {"B", 0, 0},
		"A:1s":       {"A", time.Second, 0},
		"B:1s+2s":    {"B", time.Second, 2 * time.Second},
		"A:+500ms":   {"A", 0, 500 * time.Millisecond},
		"A:0s+1m":    {"A", 0, time.Minute},
		" a : 2s+1s": {"A", 2 * time.Second, time.Second},
	}
	for in, want := range good {
		line, after, dur, err := ParseSilence(in)
		if err != nil || (res{line, after, dur}) != want {
			t.Errorf("ParseSilence(%q) = %q %v %v %v, want %+v", in, line, after, dur, err, want)
		}
	}
	for _, in := range []string{"C", "A:", "A:x", "A:-1s", "A:1s+", "A:1s+0s", "A:1s+-2s", "AB", ":1s"} {
		if _, _, _, err := ParseSilence(in); err == nil || !strings.Contains(err.Error(), "A:1s+2s") {
			t.Errorf("ParseSilence(%q): error %v", in, err)
		}
	}
}

func TestStatsAdd(t *testing.T) {
	a := Stats{1, 2, 3, 4, 5, 6, 7}
	if got, want := a.Add(a), (Stats{2, 4, 6, 8, 10, 12, 14}); got != want {
		t.Fatalf("Add = %+v", got)
	}
	// Every field is summed: a new field that Add forgets fails here.
	v := reflect.ValueOf(a.Add(a))
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Uint() != 2*reflect.ValueOf(a).Field(i).Uint() {
			t.Fatalf("Add drops field %s", v.Type().Field(i).Name)
		}
	}
}

// TestCountMessagesIsTheCallers: the messages of dropped datagrams are
// counted by the function the caller supplies, and not at all without one.
func TestCountMessagesIsTheCallers(t *testing.T) {
	pk := packets(50)
	for _, c := range []struct {
		name  string
		count func([]byte) (int, bool)
		per   uint64
	}{
		{"nil", nil, 0},
		{"three", func([]byte) (int, bool) { return 3, true }, 3},
		{"unrecognized", func([]byte) (int, bool) { return 7, false }, 0},
	} {
		h := newHand(t, 64)
		w, err := Wrap(h, Config{Loss: 1, CountMessages: c.count})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pk {
			h.push(p, int64(i+1))
		}
		if s := w.Peek(0); s != nil {
			t.Fatalf("%s: Loss 1 showed a datagram", c.name)
		}
		f := w.Faults()
		if f.DroppedDatagrams != uint64(len(pk)) || f.DroppedMessages != c.per*uint64(len(pk)) {
			t.Fatalf("%s: faults %+v, want %d datagrams and %d messages", c.name, f, len(pk), c.per*uint64(len(pk)))
		}
	}
}
