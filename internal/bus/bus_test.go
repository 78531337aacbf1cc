package bus_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bus"
)

// Three embedded servers form one cluster: a key-value bucket replicated on all three takes a
// write through one server and serves it through another.
func TestCluster_KeyValue(t *testing.T) {
	servers, err := bus.Cluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := bus.Connect(ctx, bus.Config{URL: servers[0].URL(), Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := bus.Connect(ctx, bus.Config{URL: servers[2].URL(), Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kvA, err := a.KeyValue(ctx, "test", time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvA.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	kvB, err := b.KeyValue(ctx, "test", time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kvB.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v" {
		t.Fatalf("get through another server: %v, %v", e, err)
	}
}

// The external server of the dev and CI machines (Debian's nats-server 2.9), when present:
// the oldest version the bus supports.
func TestExternal(t *testing.T) {
	url := os.Getenv("SHAREAI_TEST_NATS")
	if url == "" {
		t.Skip("SHAREAI_TEST_NATS is unset: no external NATS server to test against (e.g. nats://127.0.0.1:4222)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: url, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kv, err := b.KeyValue(ctx, fmt.Sprintf("shareai_test_%d", time.Now().UnixNano()), time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("get: %v, %v", e, err)
	}
	if err := b.JS.DeleteKeyValue(ctx, kv.Bucket()); err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s", b.Conn.ConnectedServerVersion())
}
