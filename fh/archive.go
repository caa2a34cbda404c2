package fh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
)

// DefaultArchiveDir is the default Config.ArchiveDir.
const DefaultArchiveDir = "tickcast-archive"

// archiveReplicas is the archive stream's copies: Config.ArchiveReplicas,
// or one per server the connection knows, up to 3.
func (h *FeedHandler) archiveReplicas() int {
	if h.cfg.ArchiveReplicas > 0 {
		return h.cfg.ArchiveReplicas
	}
	return min(natsconn.MaxSessionReplicas, max(1, len(h.nc.Servers())))
}

// startArchive starts recording every packet sent to the feed's archive
// stream (Config.Archive).
func (h *FeedHandler) startArchive() error {
	if !h.cfg.Archive {
		return nil
	}
	if js, _ := h.nc.ConnectedServerJetStream(); !js {
		err := fmt.Errorf("fh: archive: the NATS server %s has no JetStream", h.nc.ConnectedUrlRedacted())
		h.log.Error().Err(err).Msg("cannot archive")
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	replicas := h.archiveReplicas()
	rec, err := archive.NewRecorder(ctx, archive.RecorderConfig{Feed: h.cfg.FeedName, Channels: h.cfg.Channels, Conn: h.nc,
		Stream:  archive.StreamConfig{Replicas: replicas, MaxAge: h.cfg.ArchiveMaxAge, MaxBytes: h.cfg.ArchiveMaxBytes, Compress: h.cfg.ArchiveCompress},
		OnError: h.archiveError})
	if err != nil {
		h.log.Error().Err(err).Msg("cannot archive")
		return fmt.Errorf("fh: archive: %w", err)
	}
	h.sink.archive = rec
	ev := h.log.Info().Str("stream", archive.StreamName(h.cfg.FeedName)).Int("replicas", replicas).
		Str("subjects", archive.Subject(h.cfg.FeedName, 0)+" (one per channel)").Dur("max_age", h.cfg.ArchiveMaxAge).Int64("max_bytes", h.cfg.ArchiveMaxBytes)
	if h.srv != nil {
		ev = ev.Str("dir", h.cfg.ArchiveDir)
	}
	ev.Msg("archiving every packet sent")
	return nil
}

// archiveError logs a record the archive could not store: the first
// error of each kind (archive.Fault) in full, with what to do, then one
// in a thousand. Every one is counted (tickcast_archive_errors_total).
// Called from the recorder's goroutine.
func (h *FeedHandler) archiveError(err error) {
	n := h.archiveErrors.Add(1)
	var se *archive.StoreError
	if !errors.As(err, &se) {
		if n <= 10 || n%1000 == 0 {
			h.log.Error().Err(err).Uint64("errors", n).Msg("archive: a record was not stored; its messages are written as a loss record")
		}
		return
	}
	if h.archiveFaults.Load()&(1<<se.Fault) == 0 {
		h.archiveFaults.Or(1 << se.Fault)
		ev := h.log.Error().Err(err).Str("stream", se.Stream).Str("fault", se.Fault.String()).Uint64("errors", n)
		if se.Fault == archive.FaultStorageFull && h.srv != nil {
			ev = ev.Int64("server_max_store", h.srv.JetStreamMaxStore()).Str("dir", h.cfg.ArchiveDir)
		}
		ev.Str("what_to_do", se.Fault.Hint()).
			Msg("archive: a record was not stored; its messages are lost to the archive and written as a loss record when JetStream takes records again; multicast goes on")
		return
	}
	if n%1000 == 0 {
		h.log.Error().Err(err).Str("fault", se.Fault.String()).Uint64("errors", n).Msg("archive: records still not stored")
	}
}

// closeArchive stores what is recorded and stops recording.
func (h *FeedHandler) closeArchive() {
	if h.sink.archive != nil {
		h.sink.archive.Close()
	}
}

// archiveKeys stores channel ch's session secret in the archive
// (archive.KeyRecord), so that a replay can open its sealed packets.
func (h *FeedHandler) archiveKeys(ch int, session mold.Session, secret []byte) error {
	if h.sink.archive == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := h.sink.archive.RecordKeys(ctx, archive.KeyRecord{Session: session.String(), Channel: ch, Secret: secret,
		Rotation: h.cfg.KeyRotation, Encrypt: slices.Contains(h.cfg.Encrypt, ch)})
	if err != nil {
		h.log.Error().Err(err).Msg("cannot archive the keys")
		return fmt.Errorf("fh: %w", err)
	}
	return nil
}
