package fh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/recovery"
	"github.com/tickcast/tickcast/seal"
	"github.com/tickcast/tickcast/seal/natskeys"
	"github.com/tickcast/tickcast/tickprom"
)

// FeedHandler is one feed handler: made by New, run once by Run, released by
// Close.
type FeedHandler struct {
	cfg     Config
	log     zerolog.Logger
	srv     *natsconn.Server // the embedded NATS server, or nil
	natsURL string
	nc      *nats.Conn
	natsMet *natsconn.Metrics // nc's connection state, for the metrics
	// archiveErrors counts records the archive could not store.
	archiveErrors atomic.Uint64
	// archiveFaults has bit archive.Fault set once that kind is logged.
	archiveFaults atomic.Uint32
	stores        []*recovery.Channel
	// stopApply stops each store's background state applier.
	stopApply []func()
	rsrv      *recovery.Server
	metrics   *metrics
	pub       *tickcast.Publisher
	closed    bool // pub is closed
	sink      packetSink
	health    healthState
	// aborted is done once Abort is called: it ends a linger after a
	// stop (Config.LingerOnStop).
	aborted context.Context
	abort   context.CancelFunc
	watch   *watcher // nil when not watching (Config.Watch, udp only)
	// sessions are the sessions of the session record (Config.
	// SessionRecord), nil without it; rejoin is set when they are a
	// running peer's, whose position Run catches up with first.
	sessions []mold.Session
	rejoin   bool
	// secrets are the record's session secrets, one per channel, or nil.
	secrets [][]byte
	// schedules seal each channel's data packets (unless Config.Unsealed);
	// keys serves their epoch keys.
	schedules []atomic.Pointer[seal.Schedule]
	keys      *natskeys.Server
	ent       entitlements
	audit     *auditLog
}

// New checks cfg, starts NATS (embedded, unless cfg.NATSURL names a
// server), the retransmission stores, the recovery server and the metrics
// endpoint, and opens the publisher's senders; nothing is sent until Run. A
// bad cfg gives a *ConfigError; a part that cannot start gives an error
// saying which, and is also logged.
func New(cfg Config) (*FeedHandler, error) {
	cfg = cfg.withDefaults()
	if cfg.Source == nil {
		return nil, invalid("Source", nil, errNoSource)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &FeedHandler{cfg: cfg, log: cfg.Log}
	h.aborted, h.abort = context.WithCancel(context.Background())
	if err := h.start(); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// start starts the parts in the order they depend on each other.
func (h *FeedHandler) start() error {
	if err := h.startNATS(); err != nil {
		return err
	}
	if err := h.startRecord(); err != nil {
		h.log.Error().Err(err).Msg("cannot take part in the feed's session record")
		return err
	}
	if err := h.startRecovery(); err != nil {
		return err
	}
	if err := h.startArchive(); err != nil {
		return err
	}
	m, err := startMetrics(h.cfg.MetricsAddr, h.cfg.SourceName, h.log, h.rsrv, h.stores, h.natsMet)
	if err != nil {
		h.log.Error().Err(err).Str("metrics_addr", h.cfg.MetricsAddr).Msg("cannot serve metrics")
		return fmt.Errorf("fh: metrics on %s: %w", h.cfg.MetricsAddr, err)
	}
	h.metrics = m
	m.Registry.MustRegister(h.cfg.Collectors...)
	if h.sink.archive != nil {
		m.Registry.MustRegister(tickprom.NewArchiveCollector(h.sink.archive.Stats))
	}
	m.SetHealth(h.healthy)
	if err := h.startPublisher(); err != nil {
		return err
	}
	h.logChannels()
	return nil
}

// startNATS starts the embedded server, unless Config.NATSURL names one, and
// connects to it.
func (h *FeedHandler) startNATS() error {
	h.natsURL = h.cfg.NATSURL
	if h.natsURL == "" {
		host, port, _ := splitListen(h.cfg.NATSListen) // checked by Validate
		sc := natsconn.ServerConfig{Host: host, Port: port, Feed: h.cfg.FeedName, Users: h.cfg.NATSUsers}
		if h.cfg.Archive {
			// The archive's stream lives in the embedded server's
			// JetStream, in a file store of its own directory.
			dir, err := filepath.Abs(h.cfg.ArchiveDir)
			if err != nil {
				return invalid("ArchiveDir", h.cfg.ArchiveDir, "%v", err)
			}
			sc.JetStream, sc.StoreDir = true, dir
		}
		sc.Log = func(level, msg string) {
			if level != "info" {
				h.log.Warn().Str("nats", level).Msg(msg)
			}
		}
		srv, err := natsconn.StartServer(sc)
		if err != nil {
			h.log.Error().Err(err).Msg("cannot start the embedded NATS server")
			return fmt.Errorf("fh: embedded NATS server on %s: %w", h.cfg.NATSListen, err)
		}
		h.srv = srv
		h.natsURL = srv.ClientURL()
		h.log.Info().Str("url", h.natsURL).Int("users", len(h.cfg.NATSUsers)).Msg("embedded NATS server listening")
	}
	cc := h.cfg.NATS.ConnConfig(h.natsURL, "feedhandler", h.cfg.NATS.InboxPrefix())
	h.natsMet = natsconn.NewMetrics()
	cc.Metrics = h.natsMet
	nc, err := natsconn.Connect(cc, func(event string, err error) {
		e := h.log.Warn()
		if natsconn.Routine(event, err) {
			e = h.log.Info()
		}
		e.Str("event", event).Err(err).Msg("nats")
	})
	if err != nil {
		h.log.Error().Err(err).Str("url", h.natsURL).Msg("cannot connect to NATS")
		return fmt.Errorf("fh: connect to NATS: %w", err)
	}
	h.nc = nc
	return nil
}

// startRecord takes the sessions of the feed's session record, or writes
// them (Config.SessionRecord).
func (h *FeedHandler) startRecord() error {
	if h.cfg.SessionRecord == RecordOff || h.cfg.SessionRecord == RecordAuto && h.cfg.NATSURL == "" {
		return nil
	}
	err := h.joinRecord()
	if errors.Is(err, errNoJetStream) && h.cfg.SessionRecord == RecordAuto {
		h.log.Info().Str("url", h.natsURL).Msg("the NATS server has no JetStream: no session record, this feed handler's sessions are its own")
		return nil
	}
	if err != nil {
		return err
	}
	if h.cfg.RecoveryQueue == "" {
		h.cfg.RecoveryQueue = "tickcast-" + h.cfg.FeedName
	}
	return nil
}

// startKeys gives every channel's session a secret and serves the epoch
// keys over NATS (package seal, docs/security.md).
func (h *FeedHandler) startKeys() error {
	if h.sessions != nil && h.secrets == nil {
		h.log.Warn().Msg("the session record holds no secrets (written by an earlier version): this feed handler seals with its own, and a subscriber opens only the packets of the feed handler whose keys it holds")
	}
	for ch, session := range h.pub.Sessions() {
		secret := seal.NewSecret()
		if ch < len(h.secrets) {
			secret = h.secrets[ch]
		}
		s, err := seal.NewSchedule(session, ch, secret, h.cfg.KeyRotation)
		if err != nil {
			return fmt.Errorf("fh: channel %d: %w", ch, err)
		}
		if slices.Contains(h.cfg.Encrypt, ch) {
			s.Encrypt()
		}
		h.schedules[ch].Store(s)
		if err := h.archiveKeys(ch, session, secret); err != nil {
			return err
		}
	}
	users := h.cfg.NATSUsers
	h.ent.users.Store(&users)
	a, err := h.openAudit()
	if err != nil {
		h.log.Error().Err(err).Msg("cannot open the key audit")
		return err
	}
	h.audit = a
	ks, err := natskeys.Serve(h.nc, natskeys.ServerConfig{Feed: h.cfg.FeedName, Channels: h.cfg.Channels,
		Schedule: func(ch int) *seal.Schedule { return h.schedules[ch].Load() },
		Entitled: h.ent.entitled, Audit: a.record})
	if err != nil {
		h.log.Error().Err(err).Msg("cannot serve keys")
		return fmt.Errorf("fh: keys: %w", err)
	}
	h.keys = ks
	h.log.Info().Dur("key_rotation", h.cfg.KeyRotation).Str("subject", natskeys.Subject(h.cfg.FeedName, 0)+" (one per channel)").Ints("encrypted_channels", h.cfg.Encrypt).
		Msg("packets authenticated: data packets sealed, keys served over NATS")
	return nil
}

// pipelineSlots is the ring of Config.Pipeline, in messages (160 bytes
// each): about a millisecond of input at full speed.
const pipelineSlots = 4096

// startRecovery makes a store per channel and serves them over NATS.
func (h *FeedHandler) startRecovery() error {
	h.stores = make([]*recovery.Channel, h.cfg.Channels)
	for ch := range h.stores {
		var err error
		h.stores[ch], err = recovery.NewChannel(recovery.StoreConfig{MaxMessages: h.cfg.StoreMessages, MaxBytes: h.cfg.StoreBytes, Trim: feed.Trim})
		if err != nil {
			return fmt.Errorf("fh: channel %d: %w", ch, err)
		}
		// Unpaced (Config.Pipeline), the snapshot state's work (the
		// books of level deltas) runs beside the publisher, not in it
		// (docs/bench.md, "Where the time per packet goes"). A paced
		// feed keeps it in line: there the applier's hold of the lock
		// delayed the recovery server's reads under heavy loss.
		if h.cfg.Pipeline {
			h.stopApply = append(h.stopApply, h.stores[ch].ApplyInBackground())
		}
	}
	// The live feed goes to those who announce demand and, with the
	// embedded server, to those who subscribe.
	live := recovery.LiveOnDemand
	switch {
	case !h.cfg.NATSLive:
		live = recovery.LiveOff
	case h.cfg.NATSLiveAlways:
		live = recovery.LiveAlways
	}
	var liveInterest func(string) bool
	if h.srv != nil {
		liveInterest = h.srv.Interest
	}
	var sealPart func(ch int, p []byte) ([]byte, error)
	if !h.cfg.Unsealed {
		sealPart = func(ch int, p []byte) ([]byte, error) {
			sch := h.schedules[ch].Load()
			if sch == nil {
				return nil, fmt.Errorf("channel %d has no keys yet", ch)
			}
			return sch.SealShared(p, time.Now().UnixNano())
		}
	}
	var archived recovery.ArchiveReader
	if h.cfg.Archive {
		// A range evicted from the store is read back from the archive.
		r, err := archive.NewRetriever(h.nc, h.cfg.FeedName)
		if err != nil {
			return fmt.Errorf("fh: recovery from the archive: %w", err)
		}
		archived = r
	}
	rsrv, err := recovery.NewServer(h.nc, recovery.ServerConfig{Feed: h.cfg.FeedName, Channels: h.stores, Seal: sealPart,
		MaxRetransmit: h.cfg.MaxRetransmit, RateLimit: h.cfg.RateLimit, Live: live, LiveInterest: liveInterest,
		RepairWindow: h.cfg.RepairWindow, Queue: h.cfg.RecoveryQueue, Hold: h.rejoin, Archive: archived,
		Log: h.log.With().Str("role", "recovery").Logger()})
	if err != nil {
		h.log.Error().Err(err).Msg("cannot serve recovery")
		return fmt.Errorf("fh: recovery server: %w", err)
	}
	h.rsrv = rsrv
	h.sink = packetSink{stores: h.stores, rsrv: rsrv, live: h.cfg.NATSLive, log: h.log}
	return nil
}

// startPublisher opens the publisher's senders. Every packet it sends,
// heartbeats and end of session included, goes to the channel's store and,
// with Config.NATSLive, to the live feed.
func (h *FeedHandler) startPublisher() error {
	newSender, maxDatagram := senders(&h.cfg)
	if h.cfg.wrapSender != nil {
		newSender = h.cfg.wrapSender(newSender)
	}
	groupA, groupB := h.cfg.GroupA, h.cfg.GroupB
	switch h.cfg.Line {
	case "a":
		groupB = netip.AddrPort{}
	case "b":
		groupA = netip.AddrPort{}
	}
	var sealFn func(ch int, pkt []byte, nowNs int64) ([]byte, error)
	if !h.cfg.Unsealed {
		h.schedules = make([]atomic.Pointer[seal.Schedule], h.cfg.Channels)
		sealFn = func(ch int, pkt []byte, nowNs int64) ([]byte, error) {
			return h.schedules[ch].Load().Seal(pkt, nowNs)
		}
	}
	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{
		Seal: sealFn, SealOverhead: seal.Overhead,
		Channels: h.cfg.Channels, GroupA: groupA, GroupB: groupB, Sessions: h.sessions,
		NewSender:   newSender,
		MaxDatagram: maxDatagram, MaxDelay: h.cfg.MaxDelay, Heartbeat: h.cfg.Heartbeat, SendBatch: h.cfg.SendBatch,
		OnPacket: h.sink.store,
		OnSent:   h.sink.wire,
		Observer: h.metrics.observer,
		// Heartbeats and end of session go to the store too: one before
		// the first message starts its session (snapshots can be served
		// from the start), and the end tells probing subscribers that
		// nothing more will come.
		OnControl: h.sink.record,
	})
	if err != nil {
		h.log.Error().Err(err).Msg("cannot start publisher")
		return fmt.Errorf("fh: publisher: %w", err)
	}
	h.pub = pub
	if !h.cfg.Unsealed {
		if err := h.startKeys(); err != nil {
			return err
		}
	}
	h.metrics.addPublisher(pub)
	if h.cfg.Transport == "udp" && h.cfg.Watch {
		w, err := startWatch(&h.cfg, pub, h.log.With().Str("role", "watch").Logger())
		if err != nil {
			h.log.Error().Err(err).Msg("cannot watch the feed's groups")
			return err
		}
		h.watch = w
		h.metrics.addWatch(w.Counts)
	}
	return nil
}

// logChannels logs each channel's session and groups.
func (h *FeedHandler) logChannels() {
	sessions := h.pub.Sessions()
	for ch := 0; ch < h.cfg.Channels; ch++ {
		ev := h.log.Info().Int("channel", ch).Str("session", sessions[ch].String()).
			Int("instruments", channelInstruments(h.cfg.Source, ch))
		if h.cfg.Line != "b" {
			ga, _ := tickcast.ChannelGroup(h.cfg.GroupA, ch)
			ev = ev.Str("group", ga.String())
		}
		if h.cfg.GroupB.IsValid() && h.cfg.Line != "a" {
			gb, _ := tickcast.ChannelGroup(h.cfg.GroupB, ch)
			ev = ev.Str("group_b", gb.String())
		}
		ev.Msg("channel open")
	}
}

// channelInstruments returns how many instruments channel ch carries, or -1
// when the source learns its instruments only as it reads them (it has no
// ChannelInstruments method, as feed.Synthetic has).
func channelInstruments(src feed.Source, ch int) int {
	if s, ok := src.(interface{ ChannelInstruments(int) []uint32 }); ok {
		return len(s.ChannelInstruments(ch))
	}
	return -1
}

// NATSURL returns the URL of the NATS server recovery is served on: the
// embedded server's, or Config.NATSURL.
func (h *FeedHandler) NATSURL() string { return h.natsURL }

// MetricsAddr returns the address metrics are served on, or "" without
// Config.MetricsAddr.
func (h *FeedHandler) MetricsAddr() string { return h.metrics.Addr() }

// StoreErrors returns how many packets the retransmission stores refused.
func (h *FeedHandler) StoreErrors() uint64 { return h.sink.errors.Load() }

// Run publishes the source until it ends, Config.Duration passes or ctx is
// done, sends end of session on every channel, lingers (Config.Linger)
// unless ctx is done, and returns what was published. The error, if any,
// is what stopped or spoilt publishing; the Summary is valid with it. Run
// may be called once.
func (h *FeedHandler) Run(ctx context.Context) (Summary, error) {
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if h.cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, h.cfg.Duration)
	}
	defer cancel()
	start := time.Now()
	h.health.started = start
	h.health.phase.Store(phasePublishing)
	healthDone := make(chan struct{})
	go h.watchHealth(healthDone)
	defer func() {
		close(healthDone)
		h.health.phase.Store(phaseDone)
	}()
	unknown := 0
	var runErr error
	if h.rejoin {
		h.health.phase.Store(phaseRejoining)
		runErr = h.catchUp(runCtx)
		h.health.phase.Store(phasePublishing)
	}
	switch {
	case runErr == io.EOF:
		runErr = nil // the input ended while catching up
	case runErr == nil:
		src := h.cfg.Source
		if h.cfg.Pipeline {
			pf := feed.NewPrefetch(src, pipelineSlots)
			defer pf.Close() // before the caller reads the source's counters
			src = pf
		}
		runErr = h.pub.Run(runCtx, src, tickcast.RunConfig{Rate: h.cfg.Rate, Speed: h.cfg.Speed, Spin: h.cfg.PaceSpin, OnError: func(err error) {
			unknown++
			if unknown <= 10 || unknown%10000 == 0 {
				h.log.Warn().Err(err).Int("errors", unknown).Msg("publish error (the run goes on)")
			}
		}})
	}
	// Asked to stop while a peer publishes the same sessions: they go on
	// without this feed handler, so it leaves without ending them.
	left := ctx.Err() != nil && h.sessions != nil && h.peerCarriesOn()
	var endErr error
	if !left {
		endErr = h.pub.End()
	}
	elapsed := time.Since(start)
	switch {
	case left:
	case h.cfg.Linger <= 0:
	case ctx.Err() == nil:
		h.health.phase.Store(phaseLingering)
		h.linger(ctx)
	case h.cfg.LingerOnStop:
		// Asked to stop: the end of session is out; serve recovery for
		// the session's tail, unless aborted.
		h.health.phase.Store(phaseLingering)
		h.linger(h.aborted)
	}
	h.closed = true
	var closeErr error
	if left {
		closeErr = h.pub.Leave()
	} else {
		closeErr = h.pub.Close()
	}
	if closeErr == nil {
		closeErr = endErr
	}
	if !h.rsrv.FlushLive(liveFlushTimeout) {
		h.log.Warn().Dur("waited", liveFlushTimeout).Msg("live NATS feed: datagrams still queued at the end")
	}
	h.closeArchive()
	h.logEnds()
	sum := Summary{Publisher: h.pub.Stats(), Recovery: h.rsrv.Stats(), Elapsed: elapsed, ForeignPackets: h.ForeignPackets(),
		Interrupted: ctx.Err() != nil, DurationReached: ctx.Err() == nil && runCtx.Err() != nil, LeftToPeer: left}
	if h.sink.archive != nil {
		st := h.sink.archive.Stats()
		sum.Archive = &st
	}
	level := zerolog.InfoLevel
	for _, err := range []error{runErr, closeErr} {
		if err != nil {
			h.log.Error().Err(err).Msg("publishing failed")
			level = zerolog.ErrorLevel
		}
	}
	h.log.WithLevel(level).Fields(sum.Fields()).Msg("feed handler done")
	return sum, errors.Join(runErr, closeErr)
}

// liveFlushTimeout bounds how long Run waits for the live NATS feed's queue
// to drain after the end of session.
const liveFlushTimeout = 5 * time.Second

// Abort ends a linger after a stop at once (Config.LingerOnStop): a
// program's second interrupt.
func (h *FeedHandler) Abort() { h.abort() }

// linger keeps serving recovery for Config.Linger, and repeats the end of
// session every heartbeat interval so a subscriber that lost it still
// learns where the session ended. ctx being done ends it at once.
func (h *FeedHandler) linger(ctx context.Context) {
	h.log.Info().Dur("linger", h.cfg.Linger).Msg("session ended; serving recovery")
	tick := time.NewTicker(h.cfg.Heartbeat)
	defer tick.Stop()
	deadline := time.NewTimer(h.cfg.Linger)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
			h.pub.End()
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// logEnds logs where each channel's session ended.
func (h *FeedHandler) logEnds() {
	sessions := h.pub.Sessions()
	for ch := 0; ch < h.cfg.Channels; ch++ {
		h.log.Info().Int("channel", ch).Str("session", sessions[ch].String()).Uint64("next_seq", h.pub.NextSeq(ch)).
			Uint64("packets", h.pub.ChannelPackets(ch)).Msg("end of session sent")
	}
}

// ForeignPackets returns how many packets the feed handler received on its
// own groups that it did not send (see Config.Watch).
func (h *FeedHandler) ForeignPackets() uint64 {
	if h.watch == nil {
		return 0
	}
	return h.watch.total()
}

// Close stops what New started: the publisher (if Run did not close it),
// the metrics endpoint, the recovery server, the NATS connection and the
// embedded server. The source is the caller's to release.
func (h *FeedHandler) Close() {
	h.abort()
	if h.pub != nil && !h.closed {
		h.closed = true
		h.pub.Close()
	}
	if h.watch != nil {
		h.watch.close()
	}
	if h.metrics != nil {
		h.metrics.Close()
	}
	if h.rsrv != nil {
		h.rsrv.Close()
	}
	if h.keys != nil {
		h.keys.Close()
	}
	h.audit.close()
	h.closeArchive()
	for _, stop := range h.stopApply {
		stop()
	}
	h.stopApply = nil
	if h.nc != nil {
		h.nc.Close()
	}
	if h.srv != nil {
		h.srv.Shutdown()
	}
}

// packetSink takes every datagram the publisher sends into the channel's
// retransmission store and, if live, onto the live NATS feed.
type packetSink struct {
	stores []*recovery.Channel
	rsrv   *recovery.Server
	live   bool
	// archive, with Config.Archive, records every packet as sent.
	archive *archive.Recorder
	log     zerolog.Logger
	errors  atomic.Uint64 // packets a store refused
	sent    atomic.Uint64 // packets recorded (the health check's sign of life)
}

// record is PublisherConfig.OnControl: heartbeats and ends of session go
// to the store and the live subjects as they are.
func (k *packetSink) record(ch int, session mold.Session, firstSeq uint64, pkt []byte) {
	k.store(ch, session, firstSeq, pkt)
	k.wire(ch, pkt)
}

// store is PublisherConfig.OnPacket: data packets before their seal (the
// messages in the clear). A store refuses only what breaks the stream;
// that is counted and logged, the first ten times.
func (k *packetSink) store(ch int, session mold.Session, firstSeq uint64, pkt []byte) {
	k.sent.Add(1)
	if err := k.stores[ch].OnPacket(session, firstSeq, pkt); err != nil {
		if n := k.errors.Add(1); n <= 10 {
			k.log.Error().Err(err).Int("channel", ch).Msg("retransmission store")
		}
	}
}

// wire is PublisherConfig.OnSent: data packets as they go on the wire,
// sealed, for the live subjects and the archive.
func (k *packetSink) wire(ch int, pkt []byte) {
	if k.live {
		k.rsrv.Live(ch, pkt)
	}
	if k.archive != nil {
		k.archive.Record(ch, pkt)
	}
}

// Summary is what a Run published and served.
type Summary struct {
	Publisher       tickcast.PublisherStats
	Recovery        recovery.ServerStats
	Elapsed         time.Duration // from the start of publishing to end of session
	Interrupted     bool          // Run's context was done
	DurationReached bool          // Config.Duration ended publishing
	// ForeignPackets counts the packets received on the feed's own groups
	// that the feed handler did not send: another publisher is on them.
	ForeignPackets uint64
	// LeftToPeer: stopped while a peer feed handler published the same
	// sessions (Config.SessionRecord), the feed handler left them to it,
	// sending no end of session.
	LeftToPeer bool
	// Archive is the archive recorder's counters (Config.Archive), or nil.
	Archive *archive.RecorderStats
}

// Fields returns the summary as the feed handler's end-of-run summary
// object (the keys of its JSON summary line and its "feed handler done" log
// line).
func (s Summary) Fields() map[string]any {
	st, rst := s.Publisher, s.Recovery
	elapsed := s.Elapsed.Seconds()
	f := map[string]any{
		"role": "feedhandler", "messages": st.Messages, "packets": st.Packets, "packet_bytes": st.PacketBytes, "pad_bytes": st.PadBytes, "heartbeats": st.Heartbeats,
		"elapsed_s": elapsed, "msgs_per_s": float64(st.Messages) / elapsed,
		"msgs_per_packet": float64(st.Messages) / max(1, float64(st.Packets)),
		"flush_drain":     st.FlushDrain, "flush_full": st.FlushFull, "flush_deadline": st.FlushDeadline,
		"unknown_instrument": st.UnknownInstrument, "interrupted": s.Interrupted,
		"duration_reached":    s.DurationReached,
		"retransmit_requests": rst.Requests, "retransmitted": rst.MessagesServed, "snapshots": rst.Snapshots,
		"retransmit_answers": rst.Answers, "repairs": rst.Repairs, "requests_suppressed": rst.Suppressed,
		"recovery_rejected": rst.Rejected, "live_published": rst.LivePublished, "live_skipped": rst.LiveSkipped,
		"live_dropped": rst.LiveDropped, "live_demands": rst.LiveDemands, "foreign_packets": s.ForeignPackets, "session_queries": rst.SessionQueries,
		"caught_up": st.CaughtUp, "left_to_peer": s.LeftToPeer,
	}
	if a := s.Archive; a != nil {
		f["archive_records"], f["archive_packets"], f["archive_messages"], f["archive_bytes"] = a.Records, a.Packets, a.Messages, a.Bytes
		f["archive_lost_packets"], f["archive_lost_messages"], f["archive_loss_records"], f["archive_errors"] = a.LostPackets, a.LostMessages, a.LossRecords, a.Errors
		f["retransmit_archive_answers"], f["retransmitted_archive"], f["retransmit_archive_misses"] = rst.ArchiveAnswers, rst.ArchiveMessages, rst.ArchiveMisses
		f["archive_unwritten_loss_runs"] = a.UnwrittenLoss
		f["archive_retries"] = a.Retries
	}
	return f
}
