package tickcast

import (
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/shm"
)

// TestSpinWait: with SpinWait, Run polls on after a message instead of
// sleeping, so packets that come closer together than SpinWait are taken
// without a single futex sleep; without it, the same feed puts the
// subscriber to sleep between packets. Over a shared-memory ring, whose
// receiver counts its futex sleeps.
func TestSpinWait(t *testing.T) {
	defs, data := shmTape(t, 2000, 1472)
	for _, tc := range []struct {
		spin  time.Duration
		sleep bool // the subscriber is expected to sleep
	}{{0, true}, {time.Second, false}} {
		t.Run("spin-wait="+tc.spin.String(), func(t *testing.T) {
			dir, err := os.MkdirTemp(shmBenchDir(), "tickcast-test-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			sc := shm.Config{Dir: dir, Feed: "test", MaxDatagram: 1472, Mode: ud.Direct, CPU: -1}
			id := ud.LineID{Channel: 0, Line: ud.LineA, Group: benchGroup(t)}
			w, err := shm.Senders(sc)(id)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var rx *shm.Receiver
			open := shm.Receivers(sc)
			sub, err := NewSubscriber(SubscriberConfig{Channels: 1, GroupA: id.Group, SpinWait: tc.spin,
				NewReceiver: func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
					r, err := open(id, n)
					if err == nil {
						rx = r.(*shm.Receiver)
					}
					return r, err
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var h countHandler
			want := uint64(0)
			for _, p := range append(defs, data...) {
				want += uint64(binary.BigEndian.Uint16(p[18:]))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- sub.Run(ctx, &h, func() bool { return h.messages >= want }) }()
			// One packet every 200 µs, well inside a second.
			if err := w.Send(defs); err != nil {
				t.Fatal(err)
			}
			for _, p := range data {
				time.Sleep(200 * time.Microsecond)
				if err := w.Send([][]byte{p}); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-ran; err != nil {
				t.Fatalf("Run: %v after %d of %d messages", err, h.messages, want)
			}
			sleeps := rx.Stats().Syscalls
			t.Logf("%d packets, %d futex sleeps", len(data), sleeps)
			if tc.sleep && sleeps == 0 {
				t.Errorf("no futex sleep with SpinWait 0 and 200 µs between packets")
			}
			if !tc.sleep && sleeps != 0 {
				t.Errorf("%d futex sleeps with SpinWait %v and 200 µs between packets", sleeps, tc.spin)
			}
		})
	}
}
