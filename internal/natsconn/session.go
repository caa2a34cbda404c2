package natsconn

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxSessionReplicas is the most copies of the session bucket
// OpenSessionBucket makes (one per node of a three-node cluster).
const MaxSessionReplicas = 3

// OpenSessionBucket returns the session bucket ([SessionBucket]) of nc's
// JetStream, creating it, with replicas copies (1..MaxSessionReplicas) and
// a history of 1, when it does not exist yet. A feed handler user may call
// it, and read, create and update (by revision) the key named after its
// feed, and nothing else in the bucket.
func OpenSessionBucket(ctx context.Context, nc *nats.Conn, replicas int) (jetstream.KeyValue, error) {
	if replicas < 1 || replicas > MaxSessionReplicas {
		return nil, fmt.Errorf("natsconn: session bucket replicas %d: want 1..%d", replicas, MaxSessionReplicas)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natsconn: jetstream: %w", err)
	}
	kv, err := js.KeyValue(ctx, SessionBucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("natsconn: session bucket: %w", err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: SessionBucket, History: 1, Replicas: replicas})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Created meanwhile by the other feed handler, with other settings.
		kv, err = js.KeyValue(ctx, SessionBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("natsconn: create session bucket: %w", err)
	}
	return kv, nil
}
