package itch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/feed/itch/itchgen"
)

// timedMessages has a live feed's shape: it yields a day's messages, tells
// when each arrived (RecvNs, a time made from the message's own ITCH
// timestamp, so that every normalized message can be checked against the
// ITCH message it came from), and holds only some of them pending at a
// time (a Source reads ahead only what is pending).
type timedMessages struct {
	rd    *Reader
	recv  int64
	calls int
}

// arrival is the RecvNs timedMessages gives a message of ITCH timestamp ns.
func arrival(ns int64) int64 { return 1<<60 + ns }

func (r *timedMessages) Next() ([]byte, int64, error) {
	b, off, err := r.rd.Next()
	if err == nil && len(b) >= 11 {
		r.recv = arrival(Message(b).Timestamp())
	}
	return b, off, err
}

func (r *timedMessages) Offset() int64 { return r.rd.Offset() }

func (r *timedMessages) RecvNs() int64 { return r.recv }

func (r *timedMessages) Pending() bool {
	r.calls++
	return r.calls%7 != 0
}

// TestRecvNsFromTheReader: from a MessageReader that tells when each
// message arrived, every normalized message carries its ITCH message's
// arrival as RecvNs, not the clock's time, with the look-ahead reading
// ahead (a large order table) and without it.
func TestRecvNsFromTheReader(t *testing.T) {
	day := genDay(t, itchgen.Config{Seed: 3, Stocks: 100, Orders: 10_000, Messages: 200_000})
	for _, capacity := range []int{1 << 14, 1 << 19} {
		t.Run(fmt.Sprint("capacity ", capacity), func(t *testing.T) {
			r := &timedMessages{rd: NewReader(bytes.NewReader(day))}
			src, err := NewMessageSource(r, Config{OrderCapacity: capacity, Depth: 10, Clock: func() int64 { return -1 }})
			if err != nil {
				t.Fatal(err)
			}
			if src.timed == nil {
				t.Fatal("the reader's RecvNs was not found")
			}
			var m feed.Msg
			n := 0
			for src.Next(&m) == nil {
				if want := arrival(m.ExchangeNs); m.RecvNs != want {
					t.Fatalf("normalized message %d (%v of instrument %d, ITCH timestamp %d): RecvNs %d, want %d",
						n, m.Type, m.Instrument, m.ExchangeNs, m.RecvNs, want)
				}
				n++
			}
			if src.Stats().Messages != 200_000 || n < 200_000 {
				t.Fatalf("%d ITCH messages read, %d normalized", src.Stats().Messages, n)
			}
			if on := src.ahead.on; on != (capacity == 1<<19) {
				t.Errorf("look-ahead on: %v", on)
			}
		})
	}
}
