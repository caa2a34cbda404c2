package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Fault says why JetStream did not store a record.
type Fault uint8

// The faults of a StoreError.
const (
	// FaultOther is any failure not named below.
	FaultOther Fault = iota
	// FaultStorageFull: JetStream refused the record because its storage
	// is exhausted: the server's or the account's store limit, or the
	// disk. The stream's own limits never refuse a record: at them it
	// discards its oldest records.
	FaultStorageFull
	// FaultNoStream: no stream took the record: it was deleted, or
	// JetStream is off on the server (a server turns it off when it
	// cannot write to its disk).
	FaultNoStream
	// FaultNoAck: JetStream did not acknowledge the record in time (a
	// cluster electing a stream leader, a server overloaded). It may be
	// stored all the same; the archive says it is lost.
	FaultNoAck
	faultKinds
)

// String names the fault as logs and metrics do.
func (f Fault) String() string {
	switch f {
	case FaultStorageFull:
		return "storage-full"
	case FaultNoStream:
		return "no-stream"
	case FaultNoAck:
		return "no-ack"
	}
	return "other"
}

// Hint says what an operator can do about the fault.
func (f Fault) Hint() string {
	switch f {
	case FaultStorageFull:
		return "free or add JetStream storage (the server's jetstream max_file_store, or its disk), " +
			"or limit the stream under the server's limit (feedhandler --archive-max-bytes or --archive-max-age) so that it discards its oldest records instead"
	case FaultNoStream:
		return "check that the stream exists (nats stream info) and that JetStream runs on the server: a server turns JetStream off when its disk fails or fills; its log says so"
	case FaultNoAck:
		return "check the JetStream cluster's health (a stream leader election, a node down or overloaded) and tickcast_archive_lag_seconds"
	}
	return "the error is JetStream's"
}

// StoreError is a record that JetStream did not store. The recorder
// passes each one to RecorderConfig.OnError.
type StoreError struct {
	Stream string
	// Record names the record: its kind, channel, session and messages.
	Record string
	Fault  Fault
	// Usage, with FaultStorageFull, is what the stream and the account
	// held when the fault was first met (empty later, or if JetStream did
	// not say).
	Usage string
	Err   error // JetStream's error
}

func (e *StoreError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "archive: stream %s: %s not stored (%s): %v", e.Stream, e.Record, e.Fault, e.Err)
	if e.Usage != "" {
		b.WriteString("; ")
		b.WriteString(e.Usage)
	}
	return b.String()
}

// Unwrap returns JetStream's error.
func (e *StoreError) Unwrap() error { return e.Err }

// errNoAck is the error of a record not acknowledged within ackWait.
var errNoAck = errors.New("no acknowledgement within 5s")

// JetStream's error codes (nats-server's errors.json) that say its
// storage is exhausted.
const (
	jsInsufficientResources    = 10023 // the server's store limit, or the disk
	jsAccountResourcesExceeded = 10002 // the account's store limit
	jsStorageResourcesExceeded = 10047 // no room to reserve the stream's bytes
)

// classify says what kind of failure err is.
func classify(err error) Fault {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode {
		case jsInsufficientResources, jsAccountResourcesExceeded, jsStorageResourcesExceeded:
			return FaultStorageFull
		case jetstream.JSErrCodeStreamNotFound, jetstream.JSErrCodeJetStreamNotEnabled, jetstream.JSErrCodeJetStreamNotEnabledForAccount:
			return FaultNoStream
		}
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrStreamNotFound):
		return FaultNoStream
	case errors.Is(err, errNoAck), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return FaultNoAck
	}
	return FaultOther
}

// storeError describes o's failure to store. At the first failure of its
// kind that says the storage is full, it asks JetStream (for at most a
// second, on the recorder's goroutine) what the stream and the account
// hold, to name the limit reached.
func (r *Recorder) storeError(o *outRecord, err error) *StoreError {
	e := &StoreError{Stream: r.stream, Record: o.describe(), Fault: classify(err), Err: err}
	if r.faultSeen[e.Fault] {
		return e
	}
	r.faultSeen[e.Fault] = true
	if e.Fault == FaultStorageFull {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Usage = r.usage(ctx)
	}
	return e
}

// usage says what the stream and the account hold, and their limits.
func (r *Recorder) usage(ctx context.Context) string {
	var parts []string
	if st, err := r.js.Stream(ctx, r.stream); err == nil {
		info := st.CachedInfo()
		limit := "no max bytes of its own"
		if info.Config.MaxBytes > 0 {
			limit = "max bytes " + mib(info.Config.MaxBytes)
		}
		parts = append(parts, fmt.Sprintf("the stream holds %s in %d messages (%s, %d replicas)", mib(int64(info.State.Bytes)), info.State.Msgs, limit, info.Config.Replicas))
	}
	if ai, err := r.js.AccountInfo(ctx); err == nil {
		limit := "no store limit of its own: the server's limit or its disk is reached"
		if ai.Limits.MaxStore > 0 {
			limit = "store limit " + mib(ai.Limits.MaxStore)
		}
		parts = append(parts, fmt.Sprintf("the account stores %s (%s)", mib(int64(ai.Store)), limit))
	}
	return strings.Join(parts, "; ")
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
