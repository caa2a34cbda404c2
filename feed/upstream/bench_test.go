package upstream

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
	"github.com/tickcast/tickcast/mold"
)

// clockOnly is a Feed without its RecvNs method: a Source over it stamps
// each ITCH message with its clock, as it did before it took the
// datagrams' arrival times.
type clockOnly struct{ f *Feed }

func (c clockOnly) Next() ([]byte, int64, error) { return c.f.Next() }
func (c clockOnly) Offset() int64                { return c.f.Offset() }
func (c clockOnly) Pending() bool                { return c.f.Pending() }

// BenchmarkSourceOverFeed normalizes a generated ITCH day (itchgen: 100
// stocks, 10,000 live orders, a million messages) that a Feed took from
// MoldUDP64 packets of up to 40 messages, as the feed handler's live source
// does; an op is an ITCH message. "arrival" stamps each message with its
// datagram's arrival (Feed.RecvNs); "clock" hides RecvNs, so that the
// Source reads its clock (feed.NewWallClock) for every ITCH message. The
// packets are given to the Feed (Feed.packet: the tracker, the copies)
// with the timer stopped, a day at a time.
func BenchmarkSourceOverFeed(b *testing.B) {
	g, err := itchgen.New(itchgen.Config{Seed: 5, Stocks: 100, Orders: 10_000, Messages: 1_000_000})
	if err != nil {
		b.Fatal(err)
	}
	day, _ := g.AppendFile(nil, 1_000_000)
	var pkts [][]byte
	bld, err := mold.NewBuilder(1400)
	if err != nil {
		b.Fatal(err)
	}
	rd := itch.NewReader(bytes.NewReader(day))
	seq := uint64(1)
	bld.Start(testSession, seq)
	for {
		msg, _, err := rd.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		if bld.Count() == 40 || !bld.Add(msg) {
			pkts = append(pkts, append([]byte(nil), bld.Finish()...))
			bld.Start(testSession, seq)
			bld.Add(msg)
		}
		seq++
	}
	pkts = append(pkts, append([]byte(nil), bld.Finish()...), mold.AppendEndOfSession(nil, testSession, seq))
	for _, name := range []string{"arrival", "clock"} {
		b.Run(name, func(b *testing.B) {
			var m feed.Msg
			b.ReportAllocs()
			b.StopTimer()
			for n := 0; n < b.N; {
				f := openTest(b, Config{IdleWait: time.Second})
				now := time.Now().UnixNano()
				for _, p := range pkts {
					f.packet(0, p, now)
				}
				var r itch.MessageReader = f
				if name == "clock" {
					r = clockOnly{f}
				}
				src, err := itch.NewMessageSource(r, itch.Config{OrderCapacity: 1 << 16, Depth: 10})
				if err != nil {
					b.Fatal(err)
				}
				start := n
				b.StartTimer()
				for n-start < int(seq-1) && n < b.N {
					if err := src.Next(&m); err != nil {
						b.Fatalf("after %d ITCH messages: %v", src.Stats().Messages, err)
					}
					n = start + int(src.Stats().Messages)
				}
				b.StopTimer()
				f.Close()
			}
		})
	}
}
