package seqgap

import (
	"fmt"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// benchPackets builds packets of 4 messages: in order, each packet's copy on
// line B, and every third pair swapped (held, then drained).
func benchPackets(b *testing.B, n int) []mold.Packet {
	sess, _ := mold.ParseSession("BENCH")
	bl, _ := mold.NewBuilder(1500)
	mk := func(seq uint64) mold.Packet {
		bl.Start(sess, seq)
		for i := uint64(0); i < 4; i++ {
			bl.Add([]byte(fmt.Sprintf("message %d of the bench stream", seq+i)))
		}
		p, err := mold.Parse(append([]byte{}, bl.Finish()...))
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	pkts := make([]mold.Packet, 0, n)
	for seq := uint64(1); len(pkts) < n; seq += 12 {
		p1, p2, p3 := mk(seq), mk(seq+4), mk(seq+8)
		pkts = append(pkts, p1, p1, p3, p3, p2, p2)
	}
	return pkts
}

// BenchmarkTrackerPacket measures Tracker.Packet on an A/B stream with
// duplicates and reordering; one op is one packet (4 messages).
func BenchmarkTrackerPacket(b *testing.B) {
	pkts := benchPackets(b, 1<<16)
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
