package itch

import (
	"bytes"
	"io"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

// genReader is a MessageReader of a generated day, produced chunk by chunk:
// each chunk is generated in memory in NASDAQ's file format before the
// Reader splits it, so the generator's own work is not in the reading.
// pause and resume, if set, are called around the generation of a chunk.
type genReader struct {
	g             *itchgen.Generator
	chunk         int
	buf           []byte
	br            bytes.Reader
	rd            *Reader
	base          int64 // input offset of the current chunk
	pause, resume func()
}

func newGenReader(t testing.TB, cfg itchgen.Config, chunk int) *genReader {
	g, err := itchgen.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &genReader{g: g, chunk: chunk, rd: NewReader(bytes.NewReader(nil))}
	return r
}

// genDay returns the whole generated day of cfg (cfg.Messages messages)
// in NASDAQ's file format.
func genDay(t testing.TB, cfg itchgen.Config) []byte {
	g, err := itchgen.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	day, _ := g.AppendFile(nil, int(cfg.Messages))
	return day
}

// refill generates the next chunk; false at the end of the day.
func (r *genReader) refill() bool {
	if r.pause != nil {
		r.pause()
		defer r.resume()
	}
	r.base += r.rd.Offset()
	var n int
	r.buf, n = r.g.AppendFile(r.buf[:0], r.chunk)
	r.br.Reset(r.buf)
	r.rd.Reset(&r.br)
	return n > 0
}

func (r *genReader) Next() ([]byte, int64, error) {
	b, off, err := r.rd.Next()
	if err == io.EOF && r.refill() {
		b, off, err = r.rd.Next()
	}
	return b, r.base + off, err
}

func (r *genReader) Offset() int64 { return r.base + r.rd.Offset() }

// stableBytes: its messages are its Reader's, and a new chunk resets the
// Reader, which keeps them as a move of its buffers does.
func (r *genReader) stableBytes() int { return r.rd.stableBytes() }

// framed: its messages are its Reader's, at offsets base more.
func (r *genReader) framed() (*Reader, *int64) { return r.rd, &r.base }

// scaleDay is the day BenchmarkNormalizeScale reads: 8,000 stocks and a
// live population of a million orders. It is far longer than any run
// reads; its length sets the timestamps' pace (a full day's).
var scaleDay = itchgen.Config{Seed: 1, Stocks: 8000, Orders: 1_000_000, Messages: 400_000_000}

// warmSource returns a Source (depth 10, order table capacity capacity)
// reading the day cfg describes, after it has read until its books hold
// cfg.Orders live orders, then extra messages more, then to the end of the
// chunk.
func warmSource(t testing.TB, cfg itchgen.Config, capacity, chunk int, extra uint64) (*Source, *genReader) {
	r := newGenReader(t, cfg, chunk)
	src, err := NewMessageSource(r, Config{OrderCapacity: capacity, Depth: 10, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	var m feed.Msg
	for src.Books().Orders() < cfg.Orders {
		if err := src.Next(&m); err != nil {
			t.Fatalf("warming up: %v after %d messages", err, src.Stats().Messages)
		}
	}
	for end := src.Stats().Messages + extra; src.Stats().Messages < end; {
		if err := src.Next(&m); err != nil {
			t.Fatalf("warming up: %v after %d messages", err, src.Stats().Messages)
		}
	}
	// Read to the end of the chunk, so that the next one starts afresh.
	for r.br.Len() > 0 || r.rd.end > r.rd.start || src.head < src.tail {
		if err := src.Next(&m); err != nil {
			t.Fatal(err)
		}
	}
	return src, r
}

// BenchmarkNormalizeScale is BenchmarkNormalizeDepth on a full-size book:
// a generated day (itchgen) of 8,000 stocks with a million live orders,
// read through a Source with depth 10 and the default order table
// capacity (DefaultOrderCapacity, which the population's peak of about
// 1,010,000 fits; a full table fails the benchmark) after the population
// has built up.
// The input is generated in memory chunk by chunk with the timer stopped.
// Like BenchmarkNormalize, an op is a normalized message; itch_ns/msg is
// the time per ITCH message, and Mitch/s its rate. Run it with its
// neighbours for comparison:
//
//	go test -run XXX -bench 'Normalize(Depth|Scale)?$' -benchtime 3000000x ./feed/itch/
func BenchmarkNormalizeScale(b *testing.B) { benchScale(b, DefaultOrderCapacity) }

// BenchmarkNormalizeScaleTable2M is BenchmarkNormalizeScale with an order
// table of twice the capacity (2,097,152; 64 MB instead of 32 MB): the
// cost of a table larger than the population needs.
func BenchmarkNormalizeScaleTable2M(b *testing.B) { benchScale(b, 2*DefaultOrderCapacity) }

// BenchmarkNormalizeScaleSmall is BenchmarkNormalizeScale on the same
// kind of day with a live population of 20,000 orders instead of a
// million (and a table to match, 1 MB): state that stays in the caches,
// so that the difference to BenchmarkNormalizeScale is what the misses
// cost, and its own figure what the work costs.
func BenchmarkNormalizeScaleSmall(b *testing.B) {
	day := scaleDay
	day.Orders = 20_000
	benchDay(b, day, 32_768)
}

func benchScale(b *testing.B, capacity int) { benchDay(b, scaleDay, capacity) }

func benchDay(b *testing.B, day itchgen.Config, capacity int) {
	src, r := warmSource(b, day, capacity, 1<<20, 0)
	r.pause, r.resume = b.StopTimer, b.StartTimer
	start := src.Stats().Messages
	var m feed.Msg
	b.ReportAllocs()
	for b.Loop() {
		if err := src.Next(&m); err != nil {
			b.Fatal(err)
		}
	}
	itch := src.Stats().Messages - start
	ns := float64(b.Elapsed().Nanoseconds()) / float64(itch)
	b.ReportMetric(ns, "itch_ns/msg")
	b.ReportMetric(1e3/ns, "Mitch/s")
	b.ReportMetric(float64(src.Books().Orders()), "live_orders")
	if st := src.Stats(); st.TableFull+st.Duplicate+st.Excess+st.WrongStock > 0 || src.MidDay() {
		b.Fatalf("anomalies on a generated day: %+v", st)
	}
}

// TestNormalizeScaleAllocs: with a warm book of 100,000 live orders over
// 800 stocks and depth 10, normalizing 150,000 ITCH messages of a
// generated day allocates nothing at all. The books' level lists still
// grow (by doubling) when a stock's side first holds more levels than
// ever before, a few times in this window, but into the level arena.
func TestNormalizeScaleAllocs(t *testing.T) {
	cfg := itchgen.Config{Seed: 2, Stocks: 800, Orders: 100_000, Messages: 400_000_000}
	const window = 150_000
	src, r := warmSource(t, cfg, 2*cfg.Orders, 200_000, 0)
	r.refill() // the measured messages are in memory before the count starts
	var m feed.Msg
	first := true
	allocs := testing.AllocsPerRun(1, func() {
		if first { // AllocsPerRun's warm-up call
			first = false
			return
		}
		end := src.Stats().Messages + window
		for src.Stats().Messages < end {
			if err := src.Next(&m); err != nil {
				t.Fatal(err)
			}
		}
	})
	if got := src.Stats().Messages; got < window {
		t.Fatalf("read %d messages", got)
	}
	b := src.Books()
	t.Logf("%v allocations in %d ITCH messages; level arena: %d of %d levels used, %d blocks allocated outside it",
		allocs, window, b.levels.used, len(b.levels.mem), b.levels.allocated)
	if allocs != 0 || b.levels.allocated != 0 {
		t.Errorf("%v allocations in %d ITCH messages (%d level blocks outside the arena), want none", allocs, window, b.levels.allocated)
	}
}
