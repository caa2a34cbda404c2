package subapp

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/ud"
)

// replayPlan is what --replay-from, --replay-to and --replay-speed ask
// for; nil without --replay-from.
func (s *Settings) replayPlan() (*archive.ReplayConfig, error) {
	if s.ReplayFrom == "" {
		if s.ReplayTo != "" {
			return nil, cliconf.Invalid("replay-to", "%q: needs --replay-from (a replay of the archive)", s.ReplayTo)
		}
		if s.ReplayFile != "" {
			return nil, cliconf.Invalid("replay-file", "%q: needs --replay-from (start, an RFC 3339 time or SESSION:SEQ)", s.ReplayFile)
		}
		return nil, nil
	}
	from, err := archive.ParsePosition(s.ReplayFrom)
	if err != nil {
		return nil, cliconf.Invalid("replay-from", "%v", err)
	}
	var to archive.Position
	follow := strings.TrimSpace(s.ReplayTo) == "live"
	if s.ReplayTo != "" && !follow {
		if to, err = archive.ParsePosition(s.ReplayTo); err != nil {
			return nil, cliconf.Invalid("replay-to", "%v", err)
		}
		if !from.Time.IsZero() && !to.Time.IsZero() && !to.Time.After(from.Time) {
			return nil, cliconf.Invalid("replay-to", "%s is not after --replay-from %s", to, from)
		}
		if from.Seq > 0 && to.Seq > 0 && from.Session == to.Session && to.Seq < from.Seq {
			return nil, cliconf.Invalid("replay-to", "%s is before --replay-from %s", to, from)
		}
	}
	speed, err := parseSpeed(s.ReplaySpeed)
	if err != nil {
		return nil, cliconf.Invalid("replay-speed", "%v", err)
	}
	if follow && s.ReplayFile != "" {
		return nil, cliconf.Invalid("replay-to", "live: a replay of the file %s has no live stream to join; use --replay-to live with the archive in JetStream", s.ReplayFile)
	}
	if follow && speed > 0 && speed <= 1 {
		return nil, cliconf.Invalid("replay-speed", "%q: a replay at the recorded pace or slower never catches up with the live stream (--replay-to live): use max or a factor above 1", s.ReplaySpeed)
	}
	switch s.Transport {
	case "", "udp":
	default:
		return nil, cliconf.Invalid("transport", "%q: a replay reads the archive (over NATS, or from --replay-file); --transport does not apply", s.Transport)
	}
	if s.GroupB != "" {
		return nil, cliconf.Invalid("group-b", "%q: the archive holds one copy of each packet; a replay has no B line", s.GroupB)
	}
	if s.ReplayFile != "" {
		if _, err := os.Stat(s.ReplayFile); err != nil {
			return nil, cliconf.Invalid("replay-file", "%v", err)
		}
	}
	return &archive.ReplayConfig{Feed: s.FeedName, File: s.ReplayFile, From: from, To: to, Follow: follow, Speed: speed, RingSlots: s.RingSlots, MaxDatagram: s.MaxDatagram}, nil
}

// parseSpeed reads --replay-speed: max (0), recorded (1), or a factor as
// N or Nx.
func parseSpeed(s string) (float64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "max":
		return 0, nil
	case "recorded":
		return 1, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "x"), "×"), 64)
	if err != nil || f <= 0 || f > 1e6 {
		return 0, fmt.Errorf("%q: want max, recorded, or a factor such as 10x", s)
	}
	return f, nil
}

// replays are the replay receivers the subscriber opened.
type replays struct {
	mu       sync.Mutex
	recv     []*archive.ReplayReceiver
	merges   []*archive.MergeReceiver // --replay-to live
	errors   uint64                   // errors the replays reported
	firstErr string
}

// receivers returns the replay's receiver hook; a.nc is read when the
// subscriber opens its lines, after connect.
func (a *App) replayReceivers(cfg archive.ReplayConfig) ud.NewReceiverFunc {
	return func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
		c := cfg
		c.Conn = a.nc
		c.OnError = func(err error) {
			a.replay.mu.Lock()
			a.replay.errors++
			if a.replay.firstErr == "" {
				a.replay.firstErr = err.Error()
			}
			a.replay.mu.Unlock()
			a.log.Error().Err(err).Int("channel", id.Channel).Msg("replay")
		}
		r, err := archive.NewReplayReceiver(c, id.Channel, id.Line == ud.LineA, n)
		if err != nil {
			return nil, fmt.Errorf("replay of channel %d from %s: %w", id.Channel, cfg.From, err)
		}
		a.replay.mu.Lock()
		a.replay.recv = append(a.replay.recv, r)
		a.replay.mu.Unlock()
		return r, nil
	}
}

// mergeReceivers returns the hook of --replay-to live: each line's
// receiver replays the channel's archive and then joins its live stream,
// opened by live.
func (a *App) mergeReceivers(cfg archive.ReplayConfig, live ud.NewReceiverFunc) ud.NewReceiverFunc {
	replay := a.replayReceivers(cfg)
	return func(id ud.LineID, n *ud.Notifier) (ud.Receiver, error) {
		lr, err := live(id, n)
		if err != nil {
			return nil, err
		}
		rr, err := replay(id, n)
		if err != nil {
			lr.Close()
			return nil, err
		}
		m, err := archive.NewMergeReceiver(rr.(*archive.ReplayReceiver), lr)
		if err != nil {
			rr.Close()
			lr.Close()
			return nil, err
		}
		a.replay.mu.Lock()
		a.replay.merges = append(a.replay.merges, m)
		a.replay.mu.Unlock()
		return m, nil
	}
}

// replayDone reports whether every channel's replay has delivered all it
// will and the subscriber has taken it.
func (a *App) replayDone() bool {
	a.replay.mu.Lock()
	defer a.replay.mu.Unlock()
	if len(a.replay.recv) == 0 {
		return false
	}
	for _, r := range a.replay.recv {
		if !r.Done() || r.RingLen() > 0 {
			return false
		}
	}
	return true
}

// ReplaySummary is the replay's part of the summary.
type ReplaySummary struct {
	From         string `json:"from"`
	To           string `json:"to,omitempty"`
	Records      uint64 `json:"records"`
	LossRecords  uint64 `json:"loss_records"`
	LostMessages uint64 `json:"lost_messages"`
	Duplicates   uint64 `json:"duplicates"`
	Corrupt      uint64 `json:"corrupt"`
	Unverified   uint64 `json:"unverified"`
	Errors       uint64 `json:"errors"`
	FirstError   string `json:"first_error,omitempty"`
	// With --replay-to live: the channels that joined the live stream,
	// the messages neither stored nor live at a switch (recovered as a
	// gap), and the live packets let go before it (replayed instead).
	JoinedLive int    `json:"joined_live"`
	GapAtJoin  uint64 `json:"gap_at_join"`
	LiveLetGo  uint64 `json:"live_let_go"`
}

// replaySummary sums the replay receivers' counters; nil without a replay.
func (a *App) replaySummary() *ReplaySummary {
	if a.replayCfg == nil {
		return nil
	}
	rs := &ReplaySummary{From: a.replayCfg.From.String()}
	if !a.replayCfg.To.IsZero() {
		rs.To = a.replayCfg.To.String()
	}
	if a.replayCfg.Follow {
		rs.To = "live"
	}
	a.replay.mu.Lock()
	defer a.replay.mu.Unlock()
	rs.Errors, rs.FirstError = a.replay.errors, a.replay.firstErr
	for _, r := range a.replay.recv {
		st := r.ReplayStats()
		rs.Records += st.Records
		rs.LossRecords += st.LossRecords
		rs.LostMessages += st.LostMessages
		rs.Duplicates += st.Duplicates
		rs.Corrupt += st.Corrupt
		rs.Unverified += st.Unverified
	}
	for _, m := range a.replay.merges {
		ms := m.MergeStats()
		if ms.Switched {
			rs.JoinedLive++
		}
		rs.GapAtJoin += ms.GapAtTail
		rs.LiveLetGo += ms.LiveLetGo
	}
	return rs
}
