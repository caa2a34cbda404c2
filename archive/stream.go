package archive

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/recovery"
)

// StreamConfig sets the archive stream's storage and retention.
type StreamConfig struct {
	// Replicas is the stream's copies: 1 on a single server (the embedded
	// one), 3 on a cluster of three or more. 0 means 1.
	Replicas int
	// MaxAge drops records older than this; 0 keeps them until MaxBytes.
	MaxAge time.Duration
	// MaxBytes drops the oldest records beyond this many bytes; 0 means no
	// limit but the server's.
	MaxBytes int64
	// Compress stores records compressed (S2) by JetStream.
	Compress bool
}

func (c StreamConfig) validate(feed string) error {
	switch {
	case !validFeed(feed):
		return recCheck.Invalid("Feed", feed, "want letters, digits, '-' or '_'")
	case c.Replicas < 0 || c.Replicas > 5:
		return recCheck.Invalid("Stream.Replicas", c.Replicas, "want 1..5 (0: 1)")
	case c.MaxAge < 0:
		return recCheck.Invalid("Stream.MaxAge", c.MaxAge, "want 0 (no limit) or more")
	case c.MaxBytes < 0:
		return recCheck.Invalid("Stream.MaxBytes", c.MaxBytes, "want 0 (no limit) or more")
	}
	return nil
}

// validFeed reports whether feed can name a stream and a subject token:
// a feed name as recovery.ValidateFeed takes it.
func validFeed(feed string) bool { return recovery.ValidateFeed(feed) == nil }

// StreamName is the JetStream stream that holds feed's archive.
func StreamName(feed string) string { return natsconn.ArchiveStream(feed) }

// Subject is the subject channel ch's records are stored under.
func Subject(feed string, ch int) string { return natsconn.ArchiveSubject(feed, strconv.Itoa(ch)) }

// duplicateWindow is how long JetStream remembers a record's id: a record
// published twice within it (a retry) is stored once.
const duplicateWindow = 2 * time.Minute

// ensureStream creates the feed's archive stream, or updates an existing
// one's limits to c.
func ensureStream(ctx context.Context, js jetstream.JetStream, feed string, c StreamConfig) error {
	sc := jetstream.StreamConfig{
		Name:        StreamName(feed),
		Description: "tickcast archive of feed " + feed + ": every channel's packets as sent",
		Subjects:    []string{natsconn.ArchiveSubject(feed, "*"), natsconn.ArchiveKeysSubject(feed, "*")},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Replicas:    max(1, c.Replicas),
		MaxAge:      c.MaxAge,
		MaxBytes:    c.MaxBytes,
		Duplicates:  duplicateWindow,
		AllowDirect: true,
	}
	if sc.MaxBytes == 0 {
		sc.MaxBytes = -1
	}
	if c.Compress {
		sc.Compression = jetstream.S2Compression
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(cctx, sc); err != nil {
		return fmt.Errorf("archive: stream %s (replicas %d): %w", sc.Name, sc.Replicas, err)
	}
	return nil
}
