package udp

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickcast/tickcast/internal/testenv"
)

// segmentRuns returns numbered datagrams in runs that segmentation offload
// meets in a feed: full packets of one length, a run ended by a shorter
// one, runs longer than a write's 64 segments, single datagrams of other
// lengths, empty ones, and a run whose bytes pass a UDP payload's limit.
func segmentRuns(max int) [][]byte {
	var lens []int
	run := func(n, l int) {
		for i := 0; i < n; i++ {
			lens = append(lens, l)
		}
	}
	run(16, max)
	lens = append(lens, 300)
	run(70, max) // more than one write's segments
	run(1, 17)
	lens = append(lens, 0, 0)
	run(5, 200)
	run(3, max)
	lens = append(lens, max-1, max, 5) // a shorter one ends a run; a longer one starts the next
	run(40, 1700)                      // 40 × 1,700 bytes pass 65,507 (max is 1,700 in the tests)
	out := make([][]byte, len(lens))
	for i, l := range lens {
		b := make([]byte, l)
		for j := range b {
			b[j] = byte(i*13 + j)
		}
		if l >= 4 {
			binary.BigEndian.PutUint32(b, uint32(i))
		}
		out[i] = b
	}
	return out
}

// sendAndCompare sends want in one Send and fails unless r receives exactly
// those datagrams, in order.
func sendAndCompare(t *testing.T, s *Sender, r *Receiver, want [][]byte) {
	t.Helper()
	if err := s.Send(want); err != nil {
		t.Fatal(err)
	}
	got := receive(t, r, len(want), 10*time.Second)
	for i := range want {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("datagram %d: got %d bytes, want %d", i, len(got[i]), len(want[i]))
		}
	}
}

func TestSegmentedSend(t *testing.T) {
	for _, gso := range []bool{true, false} {
		t.Run(fmt.Sprintf("GSO=%v", gso), func(t *testing.T) {
			cfg := testConfig(newGroup(), freePort(t), Blocking)
			cfg.MaxDatagram = 1700
			cfg.Batch = 200
			cfg.GSO = gso
			r := newReceiver(t, cfg)
			s := newSender(t, cfg)
			if gso && !s.Segments() {
				t.Skip("this kernel has no UDP GSO (getsockopt UDP_SEGMENT refused): the segmented path cannot run here")
			}
			if !gso && s.Segments() {
				t.Fatal("Segments() is true without Config.GSO")
			}
			want := segmentRuns(cfg.MaxDatagram)
			sendAndCompare(t, s, r, want)
			ss := s.Stats()
			if ss.Datagrams != uint64(len(want)) || ss.Errors != 0 {
				t.Errorf("sender stats %+v, want %d datagrams, no errors", ss, len(want))
			}
			if !gso {
				if ss.Segmented != 0 {
					t.Errorf("Segmented %d without Config.GSO", ss.Segmented)
				}
				return
			}
			// Runs: 17 (16 full and the 300), 64, 7 (the 70-run's other 6
			// and the 17), 5 of 200 bytes, 4 (3 full, max-1), 2 (max, 5),
			// and the 1,700-byte run cut at 38 and 2: 139 datagrams of
			// 141; the two empty ones go alone.
			if ss.Segmented != 139 {
				t.Errorf("Segmented %d, want 139 of %d", ss.Segmented, len(want))
			}
			if r.Stats().Datagrams != uint64(len(want)) {
				t.Errorf("receiver got %d datagrams, want %d", r.Stats().Datagrams, len(want))
			}
		})
	}
}

// TestSegmentsRefused has the kernel refuse segmentation offload for real:
// a socket sending without UDP checksums (SO_NO_CHECK) cannot segment. The
// sender must send everything one by one and stop trying.
func TestSegmentsRefused(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), Blocking)
	cfg.MaxDatagram = 1700
	cfg.Batch = 200
	cfg.GSO = true
	r := newReceiver(t, cfg)
	s := newSender(t, cfg)
	if !s.Segments() {
		t.Skip("this kernel has no UDP GSO (getsockopt UDP_SEGMENT refused): nothing to refuse")
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
		t.Fatalf("SO_NO_CHECK: %v", err)
	}
	// Two single datagrams first, so the refused write is not the call's first.
	want := append([][]byte{{1, 2, 3, 4, 5}, {6}}, segmentRuns(cfg.MaxDatagram)...)
	sendAndCompare(t, s, r, want)
	ss := s.Stats()
	if s.Segments() || ss.Segmented != 0 || ss.Errors != 0 || ss.Datagrams != uint64(len(want)) {
		t.Errorf("after a refusal: Segments %v, stats %+v; want false, %d datagrams, none segmented, no errors", s.Segments(), ss, len(want))
	}
}

func TestSegmentedSendZeroAllocs(t *testing.T) {
	cfg := testConfig(newGroup(), freePort(t), Blocking)
	cfg.GSO = true
	s := newSender(t, cfg)
	if !s.Segments() {
		t.Skip("this kernel has no UDP GSO: TestSendZeroAllocs covers the path used")
	}
	batch := make([][]byte, 20)
	for i := range batch {
		batch[i] = make([]byte, 1472)
	}
	batch[19] = batch[19][:700]
	testenv.NoAllocs(t, "segmented Send of a datagram", 200, len(batch), func() {
		if err := s.Send(batch); err != nil {
			panic(err)
		}
	})
	if s.Stats().Segmented == 0 {
		t.Error("no datagram went out segmented")
	}
}
