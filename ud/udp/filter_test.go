package udp

import (
	"bytes"
	"testing"
	"time"

	"github.com/tickcast/tickcast/internal/testenv"
)

// TestDropPrefix sends datagrams to a receiver with Config.DropPrefix over
// loopback multicast: those whose payload starts with the prefix never
// arrive; those that differ anywhere in it, or are longer or shorter than
// it after it, do.
func TestDropPrefix(t *testing.T) {
	g := testenv.MulticastGroups(t, 79)[0]
	for _, prefix := range [][]byte{[]byte("0ASESSION01"), []byte("ABCDEFGH"), []byte("x")} {
		r, err := NewReceiver(Config{Group: g.Addr(), Port: int(g.Port()), Mode: Blocking, RingSlots: 64, DropPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSender(Config{Group: g.Addr(), Port: int(g.Port())})
		if err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		var sent [][]byte
		for i := range len(prefix) {
			other := append([]byte(nil), prefix...)
			other[i] ^= 0x20 // differs at byte i only
			sent = append(sent, append(other, "tail"...))
			want = append(want, sent[len(sent)-1])
		}
		sent = append(sent, append(append([]byte(nil), prefix...), "tail"...), append([]byte(nil), prefix...)) // dropped
		sent = append(sent, []byte("?"+string(prefix)))
		want = append(want, sent[len(sent)-1])
		if err := s.Send(sent); err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		deadline := time.Now().Add(2 * time.Second)
		for len(got) < len(want) && time.Now().Before(deadline) {
			r.Wait(100 * time.Millisecond)
			n := 0
			for sl := r.Peek(0); sl != nil; sl = r.Peek(n) {
				got = append(got, append([]byte(nil), sl.Data()...))
				n++
			}
			r.Release(n)
		}
		// Anything dropped wrongly would have arrived by now; wait a
		// little for anything accepted wrongly.
		r.Wait(100 * time.Millisecond)
		for sl := r.Peek(0); sl != nil; sl = r.Peek(0) {
			got = append(got, append([]byte(nil), sl.Data()...))
			r.Release(1)
		}
		if len(got) != len(want) {
			t.Fatalf("prefix %q: received %q, want %q", prefix, got, want)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("prefix %q: datagram %d %q, want %q", prefix, i, got[i], want[i])
			}
		}
		r.Close()
		s.Close()
	}
	if _, err := NewReceiver(Config{Group: g.Addr(), Port: int(g.Port()), DropPrefix: make([]byte, MaxDropPrefix+1)}); err == nil {
		t.Fatal("a prefix longer than MaxDropPrefix was taken")
	}
}
