// Package bus connects a coordinator replica to the network's NATS (with JetStream): the
// live traffic between replicas and the fleet state they share. It also runs NATS servers
// embedded in the process, for 'shareai up --replicas N' and tests, from the nats-server
// library.
//
// The oldest external server supported is NATS 2.9 with JetStream enabled (Debian's): the
// bus uses core NATS request/reply and JetStream key-value buckets with a bucket-wide TTL,
// nothing newer (no per-message TTLs, which came with 2.11).
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config says how to reach NATS.
type Config struct {
	// URL is one server's URL or several, comma-separated (nats://host:4222,nats://…); the
	// client tries them in turn and reconnects to any.
	URL string
	// Name names the connection in the servers' monitoring: the replica's id.
	Name string
	Log  *slog.Logger
}

// Bus is a replica's connection to NATS, with its JetStream context.
type Bus struct {
	Conn *nats.Conn
	JS   jetstream.JetStream
	log  *slog.Logger
}

// Connect connects to NATS. It waits for the first connection up to ctx's deadline (or 10 s);
// once connected, the client reconnects by itself, forever, and buffers nothing while
// disconnected (publishes fail at once: a caller must know the bus is down).
func Connect(ctx context.Context, cfg Config) (*Bus, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	log := cfg.Log
	nc, err := nats.Connect(strings.TrimSpace(cfg.URL),
		nats.Name(cfg.Name),
		nats.Timeout(timeout),
		nats.RetryOnFailedConnect(false),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("bus: disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("bus: reconnected to NATS", "server", c.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact(cfg.URL), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	return &Bus{Conn: nc, JS: js, log: log}, nil
}

// Close drains the connection: what was published is sent, subscriptions end.
func (b *Bus) Close() error {
	if b == nil || b.Conn == nil {
		return nil
	}
	err := b.Conn.Drain()
	if errors.Is(err, nats.ErrConnectionClosed) {
		return nil
	}
	return err
}

// KeyValue returns the bucket name, made when missing with ttl as its keys' time to live
// (0: none) and replicas copies (1 on a single server; 3 on a cluster of three or more). It
// tries again until ctx is done: a cluster's JetStream answers once it has elected its
// metadata leader, a few seconds after its servers start.
func (b *Bus) KeyValue(ctx context.Context, name string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	for {
		kv, err := b.keyValue(ctx, name, ttl, replicas)
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return kv, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("key-value bucket %s: %w", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (b *Bus) keyValue(ctx context.Context, name string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	kv, err := b.JS.KeyValue(ctx, name)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("key-value bucket %s: %w", name, err)
	}
	kv, err = b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, TTL: ttl, Replicas: max(replicas, 1), History: 1})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = b.JS.KeyValue(ctx, name) // made by another replica meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("key-value bucket %s: %w", name, err)
	}
	return kv, nil
}

// retryable says whether a JetStream call may succeed if tried again: it timed out, or found
// JetStream not ready yet.
func retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || strings.Contains(err.Error(), "insufficient resources") ||
		strings.Contains(err.Error(), "no suitable peers")
}

// redact hides the credentials of URLs (nats://user:pass@host).
func redact(urls string) string {
	var out []string
	for u := range strings.SplitSeq(urls, ",") {
		u = strings.TrimSpace(u)
		if at := strings.LastIndexByte(u, '@'); at >= 0 {
			if i := strings.Index(u, "://"); i >= 0 && i < at {
				u = u[:i+3] + "***" + u[at:]
			}
		}
		out = append(out, u)
	}
	return strings.Join(out, ",")
}
