package subapp

import (
	"io"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/fh"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seqgap"
	"github.com/tickcast/tickcast/ud/faults"
	"github.com/tickcast/tickcast/ud/natslive"
	"github.com/tickcast/tickcast/ud/rdma"
	"github.com/tickcast/tickcast/ud/shm"
	"github.com/tickcast/tickcast/ud/udp"
)

// libDefaults are the libraries' defaults: each configuration as its
// package completes a zero one, written from the packages' Default
// constants (udp's interface from its documentation: "Zero means
// 127.0.0.1").
func libDefaults() libConfigs {
	return libConfigs{
		Subscriber: tickcast.SubscriberConfig{Tracker: seqgap.Config{
			Window: seqgap.DefaultWindow, SlotSize: seqgap.DefaultSlotSize, GapDelay: seqgap.DefaultGapDelay,
			LostAfter: seqgap.DefaultLostAfter, MaxGaps: seqgap.DefaultMaxGaps, StaleAfter: seqgap.DefaultStaleAfter,
		}, Conflate: tickcast.ConflateConfig{Threshold: tickcast.DefaultConflateThreshold,
			Interval: tickcast.DefaultConflateInterval}},
		Recovery: recovery.ClientConfig{Feed: recovery.DefaultFeed, Timeout: recovery.DefaultTimeout,
			MaxInflight: recovery.DefaultMaxInflight, QueueLen: recovery.DefaultQueueLen,
			MaxPerRequest: recovery.DefaultMaxPerRequest, SnapshotAbove: recovery.DefaultSnapshotAbove,
			RepairBackoff: recovery.DefaultRepairBackoff},
		UDP: udp.Config{Interface: netip.AddrFrom4([4]byte{127, 0, 0, 1}), Batch: udp.DefaultBatch,
			RingSlots: udp.DefaultRingSlots, MaxDatagram: udp.DefaultMaxDatagram},
		SHM: shm.Config{Dir: shm.DefaultDir, Slots: shm.DefaultSlots, MaxDatagram: shm.DefaultMaxDatagram, FileMode: shm.DefaultFileMode,
			RingSlots: shm.DefaultRingSlots, CheckInterval: shm.DefaultCheckInterval},
		RDMA: rdma.Config{RingSlots: rdma.DefaultRingSlots, SendSlots: rdma.DefaultSendSlots, Batch: rdma.DefaultBatch,
			MaxInline: rdma.DefaultMaxInline, JoinTimeout: rdma.DefaultJoinTimeout},
		NATSLive: natslive.Config{RingSlots: natslive.DefaultRingSlots, MaxDatagram: natslive.DefaultMaxDatagram,
			PendingMsgs: natslive.DefaultPendingMsgs, PendingBytes: natslive.DefaultPendingBytes,
			FlushTimeout: natslive.DefaultFlushTimeout},
		Faults: faults.Config{BurstLen: faults.DefaultBurstLen},
	}
}

// required are the fields their library requires: there is no library
// default to hold the flag's to (TestFlagDefaultsAsTheFeedHandler holds
// the subscriber's to the feed handler's instead).
var required = map[string]bool{
	"tickcast.SubscriberConfig.Channels": true,
	"tickcast.SubscriberConfig.GroupA":   true,
	"rdma.Config.Interface":              true,
}

// defaultConfigs returns the library configurations the default settings
// make.
func defaultConfigs(t *testing.T) libConfigs {
	t.Helper()
	var s Settings
	if err := cliconf.Defaults(&s); err != nil {
		t.Fatal(err)
	}
	p, err := s.plan(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return s.libConfigs(p)
}

// TestFlagDefaults holds every library configuration field that the
// default settings make equal to the library's default, except the
// overrides flagOverrides lists with their reasons, which must differ. A
// zero field counts as the default: the library completes it.
func TestFlagDefaults(t *testing.T) {
	got, lib := reflect.ValueOf(defaultConfigs(t)), reflect.ValueOf(libDefaults())
	seen := map[string]bool{}
	for i := range got.NumField() {
		compareDefaults(t, got.Field(i), lib.Field(i), seen)
	}
	for key := range flagOverrides {
		if !seen[key] {
			t.Errorf("flagOverrides names %s, which no configuration the settings make has", key)
		}
	}
	for key := range required {
		if !seen[key] {
			t.Errorf("required names %s, which no configuration the settings make has", key)
		}
	}
}

// compareDefaults compares the fields of the configurations got and lib,
// and of the module's structs inside them (SubscriberConfig.Tracker), and
// notes each field compared in seen as "package.Struct.Field".
func compareDefaults(t *testing.T, got, lib reflect.Value, seen map[string]bool) {
	t.Helper()
	typ := got.Type()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		g, l := got.Field(i), lib.Field(i)
		if f.Type.Kind() == reflect.Struct && strings.HasPrefix(f.Type.PkgPath(), "github.com/tickcast/tickcast") {
			compareDefaults(t, g, l, seen)
			continue
		}
		key := typ.String() + "." + f.Name
		seen[key] = true
		if required[key] {
			if !l.IsZero() {
				t.Errorf("%s is listed as required, but the library defaults it to %v", key, l)
			}
			continue
		}
		same := g.IsZero() || reflect.DeepEqual(g.Interface(), l.Interface())
		reason, override := flagOverrides[key]
		switch {
		case override && same:
			t.Errorf("%s is listed as overridden (%s), but the settings give the library default %v", key, reason, l)
		case !override && !same:
			t.Errorf("the default settings make %s %v, the library's default is %v: make the flag default equal or list the override in flagOverrides with its reason", key, g, l)
		}
	}
}

// TestFlagDefaultsAsTheFeedHandler: the settings that name the feed
// default to the feed handler's, so that both run together with their
// defaults.
func TestFlagDefaultsAsTheFeedHandler(t *testing.T) {
	lib, d := defaultConfigs(t), fh.Defaults()
	if lib.Subscriber.Channels != d.Channels {
		t.Errorf("--channels defaults to %d, the feed handler's to %d", lib.Subscriber.Channels, d.Channels)
	}
	if lib.Subscriber.GroupA != d.GroupA || lib.Subscriber.GroupB != d.GroupB {
		t.Errorf("--group and --group-b default to %v and %v, the feed handler's to %v and %v", lib.Subscriber.GroupA, lib.Subscriber.GroupB, d.GroupA, d.GroupB)
	}
	if lib.UDP.MaxDatagram != d.MaxDatagram {
		t.Errorf("--max-datagram defaults to %d, the feed handler's to %d", lib.UDP.MaxDatagram, d.MaxDatagram)
	}
	if lib.Recovery.Feed != d.FeedName {
		t.Errorf("--feed-name defaults to %q, the feed handler's to %q", lib.Recovery.Feed, d.FeedName)
	}
}
