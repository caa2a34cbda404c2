package subapp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/faults"
	"github.com/tickcast/tickcast/ud/natslive"
)

// nullRecv is a receiver that never receives.
type nullRecv struct{}

func (nullRecv) MaxDatagram() int         { return 1 }
func (nullRecv) Peek(int) *ud.Slot        { return nil }
func (nullRecv) Release(int)              {}
func (nullRecv) Wait(time.Duration) error { return nil }
func (nullRecv) Stats() ud.RecvStats      { return ud.RecvStats{} }
func (nullRecv) Close() error             { return nil }

// TestSilenceLineFollowsTheLineIdentity: --silence-line silences the
// receivers opened for that line and no other, even when one group serves
// as A of one channel and B of another (which the group alone cannot tell).
func TestSilenceLineFollowsTheLineIdentity(t *testing.T) {
	a := &App{s: Settings{Channels: 4, SilenceLine: "B", InjectBurstLen: 10, InjectSeed: 1}, log: zerolog.Nop()}
	groupB := netip.MustParseAddrPort("239.1.0.2:31001") // channel 0's B is channel 1's A
	hook, err := a.injectFaults(func(ud.LineID, *ud.Notifier) (ud.Receiver, error) { return nullRecv{}, nil }, groupB)
	if err != nil {
		t.Fatal(err)
	}
	shared := netip.MustParseAddrPort("239.1.0.2:31001")
	ids := []ud.LineID{
		{Channel: 0, Line: ud.LineA, Group: netip.MustParseAddrPort("239.1.0.1:31001")},
		{Channel: 0, Line: ud.LineB, Group: shared},
		{Channel: 1, Line: ud.LineA, Group: shared},
		{Channel: 1, Line: ud.LineB, Group: netip.MustParseAddrPort("239.1.0.3:31001")},
	}
	var seeds []uint64
	for _, id := range ids {
		r, err := hook(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := r.(*faults.Receiver).Config()
		if cfg.Silence != (id.Line == ud.LineB) {
			t.Errorf("%s: silenced %v", id, cfg.Silence)
		}
		if cfg.CountMessages == nil {
			t.Errorf("%s: no message count for the summary's injected messages", id)
		}
		seeds = append(seeds, cfg.Seed)
	}
	if seeds[1] == seeds[2] {
		t.Error("two receivers on one group got the same seed")
	}
}

func TestNATSReceiversRefuseLineB(t *testing.T) {
	a := &App{s: Settings{FeedName: "tickcast"}}
	if _, err := a.natsReceivers(natslive.Config{RingSlots: 8, MaxDatagram: 1472})(ud.LineID{Channel: 0, Line: ud.LineB, Group: netip.MustParseAddrPort("239.1.0.1:1")}, nil); err == nil {
		t.Fatal("a B line opened over NATS")
	}
}
