package main

import (
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/ud/udp"
)

// TestBuildTickPackets: the packets tick-send sends carry every message
// once, in sequence, in one session; full packets are padded to one
// length so that GSO can send them in runs; the end of session follows.
func TestBuildTickPackets(t *testing.T) {
	const count = 50_000
	pkts, data, msgs, err := buildTickPackets(netip.MustParseAddrPort("239.77.1.1:30000"), count)
	if err != nil {
		t.Fatal(err)
	}
	if msgs != count || data < count/40 || len(pkts) <= data {
		t.Fatalf("%d messages in %d data packets of %d; want %d messages, about 20 a packet, and an end of session", msgs, data, len(pkts), count)
	}
	next, full := uint64(1), 0
	var session mold.Session
	for i, b := range pkts[:data] {
		p, err := mold.Parse(b)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if i == 0 {
			session = p.Session
		}
		if p.Session != session || p.Seq != next || p.Messages() == 0 {
			t.Fatalf("packet %d: session %s sequence %d with %d messages; want %s, %d", i, p.Session, p.Seq, p.Messages(), session, next)
		}
		next += uint64(p.Messages())
		if len(b) == udp.DefaultMaxDatagram {
			full++
		}
	}
	if next-1 != count {
		t.Errorf("the packets carry messages 1..%d, want 1..%d", next-1, count)
	}
	if full < data*9/10 {
		t.Errorf("%d of %d packets padded to %d bytes; want nearly all", full, data, udp.DefaultMaxDatagram)
	}
	eos, err := mold.Parse(pkts[data])
	if err != nil || eos.Session != session || !eos.IsEndOfSession() {
		t.Errorf("last packet: %+v, %v; want the end of session %s", eos, err, session)
	}
}

// TestTickSendArgs: bad tick-send arguments are refused naming the flag.
func TestTickSendArgs(t *testing.T) {
	for _, args := range [][]string{
		{"--group", "239.77.1.1", "--port", "30000", "--count", "0"},
		{"--group", "239.77.1.1", "--port", "30000", "--count", "10", "--gso", "65"},
		{"--group", "10.0.0.1", "--port", "30000", "--count", "10"},
	} {
		err := tickSend(args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%q: %v, want an error naming the flag", args, err)
		}
	}
}
