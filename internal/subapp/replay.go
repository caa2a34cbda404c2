package subapp

import (
	"fmt"
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
		return nil, nil
	}
	from, err := archive.ParsePosition(s.ReplayFrom)
	if err != nil {
		return nil, cliconf.Invalid("replay-from", "%v", err)
	}
	var to archive.Position
	if s.ReplayTo != "" {
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
	switch s.Transport {
	case "", "udp":
	default:
		return nil, cliconf.Invalid("transport", "%q: a replay reads the archive over NATS; --transport does not apply", s.Transport)
	}
	if s.GroupB != "" {
		return nil, cliconf.Invalid("group-b", "%q: the archive holds one copy of each packet; a replay has no B line", s.GroupB)
	}
	return &archive.ReplayConfig{Feed: s.FeedName, From: from, To: to, Speed: speed, RingSlots: s.RingSlots, MaxDatagram: s.MaxDatagram}, nil
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
	errors   uint64 // errors the replays reported
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
	return rs
}
