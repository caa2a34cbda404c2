package seqgap

import (
	"fmt"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// abStream builds n packets of 4 messages ("m<seq>") as an A/B pair of lines
// delivers them, taken alternately from A and B: each packet twice, and of
// every three packets the third before the second (held, then drained). It
// brings 2 new messages per packet.
func abStream(tb testing.TB, n int) []mold.Packet {
	sess, _ := mold.ParseSession("AB")
	b, _ := mold.NewBuilder(1500)
	mk := func(seq uint64) mold.Packet {
		b.Start(sess, seq)
		for i := uint64(0); i < 4; i++ {
			b.Add([]byte(fmt.Sprintf("m%d", seq+i)))
		}
		p, err := mold.Parse(append([]byte{}, b.Finish()...))
		if err != nil {
			tb.Fatal(err)
		}
		return p
	}
	pkts := make([]mold.Packet, 0, n+5)
	for seq := uint64(1); len(pkts) < n; seq += 12 {
		p1, p2, p3 := mk(seq), mk(seq+4), mk(seq+8)
		pkts = append(pkts, p1, p1, p3, p3, p2, p2)
	}
	return pkts[:n]
}

// BenchmarkTrackerPacket measures Tracker.Packet on an A/B stream with
// duplicates and reordering (abStream), with a Tick every 64 packets; one op
// is one packet.
func BenchmarkTrackerPacket(b *testing.B) {
	pkts := abStream(b, 1<<16)
	out := &countOut{}
	tr, _ := New(Config{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(pkts) {
			// Start over with a new tracker state: the stream restarts.
			b.StopTimer()
			tr, _ = New(Config{})
			i = 0
			b.StartTimer()
		}
		tr.Packet(i&1, pkts[i], 0, 0, out)
		i++
		if i&63 == 0 {
			tr.Tick(0, out)
		}
	}
	b.ReportMetric(float64(out.released)/b.Elapsed().Seconds(), "msgs/s")
}
