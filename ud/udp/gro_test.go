package udp

import (
	"testing"
	"time"
)

// groPair returns a GSO sender and a GRO receiver on a fresh group, or
// skips when the kernel has neither.
func groPair(t *testing.T, mode Mode, slots int) (*Sender, *Receiver) {
	t.Helper()
	cfg := testConfig(newGroup(), freePort(t), mode)
	cfg.MaxDatagram = 1700
	cfg.Batch = 200
	cfg.GSO, cfg.GRO = true, true
	cfg.RingSlots = slots
	r := newReceiver(t, cfg)
	s := newSender(t, cfg)
	if !s.Segments() {
		t.Skip("this kernel has no UDP GSO (getsockopt UDP_SEGMENT refused): nothing arrives coalesced")
	}
	if r.gro == nil {
		t.Skip("this kernel has no UDP GRO (setsockopt UDP_GRO refused): the receiver receives datagram by datagram")
	}
	return s, r
}

// TestGROReceive sends segmentation offload's runs to a GRO receiver in
// every mode: every datagram must come out whole, in order, each in a
// slot of its own, with the coalesced ones counted.
func TestGROReceive(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s, r := groPair(t, mode, DefaultRingSlots)
			want := segmentRuns(1700)
			for range 3 {
				sendAndCompare(t, s, r, want)
			}
			st := r.Stats()
			if st.Datagrams != uint64(3*len(want)) || st.Truncated != 0 || st.Errors != 0 {
				t.Errorf("stats %+v, want %d datagrams, none truncated, no errors", st, 3*len(want))
			}
			// 139 of the 141 go out segmented (TestSegmentedSend); of
			// those, runs of one datagram arrive as they are.
			if st.Coalesced < 3*100 || st.Coalesced > 3*139 {
				t.Errorf("Coalesced %d, want between 300 and %d", st.Coalesced, 3*139)
			}
		})
	}
}

// TestGROReceiveRingFull gives a GRO receiver a ring far smaller than a
// write: the datagrams of a buffer that do not fit wait for slots, and
// none is lost, reordered or duplicated.
func TestGROReceiveRingFull(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s, r := groPair(t, mode, 8)
			want := segmentRuns(1700)
			sendAndCompare(t, s, r, want)
			st := r.Stats()
			if st.Datagrams != uint64(len(want)) || st.Coalesced == 0 {
				t.Errorf("stats %+v, want %d datagrams, coalesced datagrams", st, len(want))
			}
			// A receive loop finds the ring full while the consumer
			// holds its 8 slots; without one the consumer fills the
			// ring only as it frees it, and the rest waits either way.
			if mode.Threaded() && st.RingFull == 0 {
				t.Errorf("stats %+v: no ring-full episode with 8 slots", st)
			}
		})
	}
}

// TestGROPlainSender has a GRO receiver take datagrams from a sender
// without GSO: they arrive one by one, each counted once, none coalesced.
func TestGROPlainSender(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), Blocking)
	cfg.MaxDatagram = 1700
	cfg.Batch = 200
	cfg.GRO = true
	r := newReceiver(t, cfg)
	if r.gro == nil {
		t.Skip("this kernel has no UDP GRO (setsockopt UDP_GRO refused)")
	}
	s := newSender(t, cfg)
	want := segmentRuns(1700)
	sendAndCompare(t, s, r, want)
	if st := r.Stats(); st.Datagrams != uint64(len(want)) || st.Coalesced != 0 {
		t.Errorf("stats %+v, want %d datagrams, none coalesced", st, len(want))
	}
}

// TestGROTruncated sends a GRO receiver runs of datagrams longer than
// its slots: each is dropped and counted as truncated, and the shorter
// datagrams around them arrive.
func TestGROTruncated(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), Blocking)
	cfg.MaxDatagram = 1700
	cfg.Batch = 200
	cfg.GSO = true
	s := newSender(t, cfg)
	if !s.Segments() {
		t.Skip("this kernel has no UDP GSO: nothing arrives coalesced")
	}
	rc := cfg
	rc.MaxDatagram, rc.GRO = 1000, true
	r := newReceiver(t, rc)
	if r.gro == nil {
		t.Skip("this kernel has no UDP GRO (setsockopt UDP_GRO refused)")
	}
	long := make([][]byte, 10)
	for i := range long {
		long[i] = make([]byte, 1500)
	}
	short := [][]byte{datagram(4, 1000), datagram(5, 1000), datagram(6, 1000)}
	if err := s.Send(append(append([][]byte{}, long...), short...)); err != nil {
		t.Fatal(err)
	}
	got := receive(t, r, len(short), 10*time.Second)
	for i := range short {
		if string(got[i]) != string(short[i]) {
			t.Fatalf("datagram %d: got %d bytes, want %d", i, len(got[i]), len(short[i]))
		}
	}
	if st := r.Stats(); st.Truncated != uint64(len(long)) {
		t.Errorf("Truncated %d, want %d", st.Truncated, len(long))
	}
}

func TestGROZeroAllocs(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s, r := groPair(t, mode, DefaultRingSlots)
			batch := make([][]byte, 40)
			for i := range batch {
				batch[i] = make([]byte, 1400)
			}
			checkExchangeAllocs(t, s, r, batch, "GSO send and GRO receive of a datagram")
			if st := r.Stats(); st.Coalesced == 0 {
				t.Errorf("nothing arrived coalesced: %+v", st)
			}
		})
	}
}
