package subapp

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestWarnNoFeed checks the line a run that heard nothing ends with: the
// groups per line, or the live subjects with --transport nats; and that a
// run that heard a packet, or ended otherwise, logs none.
func TestWarnNoFeed(t *testing.T) {
	udp := Settings{Group: "239.77.0.1:31001", Iface: "127.0.0.1", IdleTimeout: 5 * time.Second}
	withB := udp
	withB.GroupB = "239.78.0.1:31001"
	nats := Settings{Transport: "nats", FeedName: "f", NATSURL: "nats://10.0.0.1:4222", IdleTimeout: 2 * time.Second}
	idle := Summary{ExitReason: "idle-timeout", Channels: []int{0, 1, 2, 3}}
	tests := []struct {
		name string
		s    Settings
		sum  Summary
		want string // "" for no line
	}{
		{"udp", udp, idle,
			"no packet on 239.77.0.1:31001..239.77.0.4:31001 (interface 127.0.0.1) in 5s — is a feed handler publishing there?"},
		{"some channels", udp, Summary{ExitReason: "idle-timeout", Channels: []int{0, 1, 3, 5, 6}},
			"no packet on 239.77.0.1:31001..239.77.0.2:31001, 239.77.0.4:31001, 239.77.0.6:31001..239.77.0.7:31001 (interface 127.0.0.1) in 5s"},
		{"two lines", withB, idle,
			"no packet on line A 239.77.0.1:31001..239.77.0.4:31001 and line B 239.78.0.1:31001..239.78.0.4:31001 (interface 127.0.0.1) in 5s"},
		{"nats", nats, Summary{ExitReason: "idle-timeout", Channels: []int{2}},
			"no packet on NATS tickcast.f.live.2 at nats://10.0.0.1:4222 in 2s — is a feed handler publishing there?"},
		{"heard a packet", udp, Summary{ExitReason: "idle-timeout", Channels: []int{0}, Packets: 1}, ""},
		{"ended", udp, Summary{ExitReason: "end-of-session", Channels: []int{0}}, ""},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		a := &App{s: tt.s, log: zerolog.New(&buf)}
		a.warnNoFeed(tt.sum)
		got := buf.String()
		switch {
		case tt.want == "" && got != "":
			t.Errorf("%s: logged %s", tt.name, got)
		case tt.want != "" && (!strings.Contains(got, tt.want) || strings.Count(got, "\n") != 1 || !strings.Contains(got, `"level":"warn"`)):
			t.Errorf("%s: logged %q, want one warning with %q", tt.name, got, tt.want)
		}
	}
}
