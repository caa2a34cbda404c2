package fh

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/internal/subapp"
	"github.com/tickcast/tickcast/internal/testenv"
)

// TestSymbolsTheFeedLacks: a subscriber whose --symbols name instruments
// the feed does not define (the default synthetic feed: seed 1, 100
// instruments, AAAB to AADW) says so by name when the run ends, in a
// warning and in the summary's symbols_not_found, and still receives the
// symbols that exist.
func TestSymbolsTheFeedLacks(t *testing.T) {
	const channels, instruments, count, seed = 4, 100, 4000, 1
	syn, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: channels})
	if err != nil {
		t.Fatal(err)
	}
	first := syn.Symbol(1).String()
	if first != "AAAB" {
		t.Fatalf("the default synthetic feed's first symbol is %s; the README says AAAB", first)
	}
	for _, tc := range []struct {
		symbols  []string
		missing  []string
		received bool
	}{
		{[]string{"AAPL", "QQQ"}, []string{"AAPL", "QQQ"}, false},
		{[]string{"AAPL", first}, []string{"AAPL"}, true},
		{[]string{first}, nil, true},
	} {
		t.Run(strings.Join(tc.symbols, ","), func(t *testing.T) {
			group := testGroup(t)
			src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: seed, Instruments: instruments, Channels: channels, Count: count})
			if err != nil {
				t.Fatal(err)
			}
			var logs testenv.SyncBuffer
			h, err := New(Config{Source: src, Channels: channels, GroupA: group, Rate: 20000, NATSListen: "127.0.0.1:0",
				Linger: 200 * time.Millisecond, Log: zerolog.New(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()

			var s subapp.Settings
			if err := cliconf.Defaults(&s); err != nil {
				t.Fatal(err)
			}
			s.Channels, s.Group, s.Verify, s.Seed, s.Instruments, s.Symbols = channels, group.String(), true, seed, instruments, tc.symbols
			s.NATSURL, s.Format, s.MetricsAddr = h.NATSURL(), "none", ""
			var out bytes.Buffer
			var subLogs testenv.SyncBuffer
			sub, err := subapp.New(s, zerolog.New(&subLogs), &out)
			if err != nil {
				t.Fatal(err)
			}
			subDone := make(chan int, 1)
			go func() { subDone <- sub.Run(context.Background()) }()
			if _, err := h.Run(context.Background()); err != nil {
				t.Fatalf("feed handler: %v\n%s", err, logs.String())
			}
			code := <-subDone
			var got struct {
				Received        uint64
				Filtered        uint64
				Channels        []int
				SymbolsNotFound []string `json:"symbols_not_found"`
				ExitReason      string   `json:"exit_reason"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("summary %q: %v", out.String(), err)
			}
			joined, err := tickcast.ChannelsOf(tc.symbols, channels)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Channels, joined) || got.ExitReason != "end-of-session" {
				t.Fatalf("summary %s: want channels %v and the end of session", out.String(), joined)
			}
			if !slices.Equal(got.SymbolsNotFound, tc.missing) {
				t.Errorf("symbols_not_found %q, want %q (summary %s)", got.SymbolsNotFound, tc.missing, out.String())
			}
			if (got.Received > 0) != tc.received || got.Filtered == 0 {
				t.Errorf("received %d, filtered %d: want received > 0 %v, and the other instruments filtered", got.Received, got.Filtered, tc.received)
			}
			if tc.received != (code == 0) {
				t.Errorf("exit %d with received %d", code, got.Received)
			}
			warning := ""
			for _, line := range strings.Split(subLogs.String(), "\n") {
				if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "no instrument named") {
					warning = line
				}
			}
			if len(tc.missing) == 0 {
				if warning != "" {
					t.Errorf("every symbol exists, yet the subscriber warned: %s", warning)
				}
				return
			}
			want := "no instrument named " + strings.Join(tc.missing, ", ") + " on channel"
			if !strings.Contains(warning, want) || !strings.Contains(warning, "instruments there, such as") {
				t.Errorf("want a warning %q... naming the instruments defined; the subscriber logged:\n%s", want, subLogs.String())
			}
			t.Logf("%s", warning)
		})
	}
}
