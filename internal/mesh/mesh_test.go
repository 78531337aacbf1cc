package mesh_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/coordinator"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

const model = "sim/llama-3.1-8b"

// replicas is a network of two coordinators over one store and one embedded NATS server: B is
// testenv's, holding the providers; A holds none, and serves buyers from B's nodes.
type replicas struct {
	env  *testenv.Env
	a    *coordinator.Coordinator
	aURL string
}

func twoReplicas(t testing.TB, providers int, opts ...testenv.Option) *replicas {
	t.Helper()
	srv, err := bus.Embed(bus.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := func(name string) *bus.Bus {
		b, err := bus.Connect(ctx, bus.Config{URL: srv.URL(), Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	var cfg coordinator.Config
	opts = append([]testenv.Option{testenv.Providers(providers)}, opts...)
	opts = append(opts, func(c *testenv.Config) {
		c.Coordinator.Bus, c.Coordinator.Replica = connect("b"), "rep_b"
		cfg = c.Coordinator
	})
	env := testenv.New(t, opts...)
	cfg.Store, cfg.Bus, cfg.Replica = env.Store, connect("a"), "rep_a"
	a := coordinator.New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	r := &replicas{env: env, a: a, aURL: "http://" + ln.Addr().String()}
	env.WaitFor("replica A to see B's nodes", func() bool { return len(a.Fleet.Offers(model)) == providers })
	return r
}

func (r *replicas) clientA() openai.Client {
	return openai.NewClient(option.WithBaseURL(r.aURL+"/v1/"), option.WithAPIKey(r.env.APIKey), option.WithMaxRetries(0))
}

func simAnswer(prompt string, seed int64) string {
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": prompt}})
	return sim.New(sim.Config{}).Answer(&protocol.Request{Kind: protocol.KindChat, Model: model, Messages: msgs, Seed: &seed})
}

// A request to replica A is served by a node whose WebSocket replica B holds, streamed and
// not, through the official SDK: the same answer a local node gives, billed once, the node
// paid, the ledger balanced, and A's view lists B's node as B's.
func TestRemote_ServedByAnotherReplica(t *testing.T) {
	r := twoReplicas(t, 1)
	ctx := context.Background()
	node := r.env.Agents[0].NodeID()
	if n := r.a.Fleet.Node(node); n == nil || n.Owner() != "rep_b" {
		t.Fatalf("replica A lists node %s as %+v; want it owned by rep_b", node, n)
	}
	client := r.clientA()

	var resp *http.Response
	got, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(3),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello from replica A.")}}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if want := simAnswer("Hello from replica A.", 3); got.Choices[0].Message.Content != want {
		t.Errorf("answer %q; want %q", got.Choices[0].Message.Content, want)
	}
	if h := resp.Header.Get("X-Shareai-Node"); h != node {
		t.Errorf("served by %q; want B's node %s", h, node)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(4),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stream it across replicas, please.")}})
	text, err := streamText(stream)
	if err != nil {
		t.Fatal(err)
	}
	if want := simAnswer("Stream it across replicas, please.", 4); text != want {
		t.Errorf("streamed %q; want %q", text, want)
	}

	acct, err := r.env.Store.KeyByHash(ctx, store.HashSecret(r.env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	r.env.WaitFor("both requests settled", func() bool {
		b, err := r.env.Store.Balance(ctx, acct.AccountID)
		us, _ := r.env.Store.Usages(ctx, acct.AccountID, 10)
		return err == nil && b.Held == 0 && len(us) == 2
	})
	if sum, err := r.env.Store.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sum %d, %v; want 0", sum, err)
	}
	us, _ := r.env.Store.Usages(ctx, acct.AccountID, 10)
	for _, u := range us {
		if u.NodeID != node || u.Outcome != store.OutcomeOK || u.Cost <= 0 {
			t.Errorf("usage %+v; want served by %s, ok, billed", u, node)
		}
		if rs, err := r.env.Store.Receipts(ctx, u.RequestID); err != nil || len(rs) != 1 {
			t.Errorf("receipts of %s: %d, %v; want the node's, countersigned by replica A", u.RequestID, len(rs), err)
		}
	}
}

// Many requests racing through replica A for the few slots of B's node: B grants each slot
// once, so the node never runs more jobs than it has slots, and every request is answered
// (waiting in A's queue when the slots are busy).
func TestRemote_NoSlotGivenTwice(t *testing.T) {
	const slots = 2
	r := twoReplicas(t, 1, func(c *testenv.Config) {
		c.Agent.MaxConcurrent = slots
		c.Sim = sim.Config{TokensPerSecond: 400}
	})
	node := r.env.Coordinator().Fleet.Node(r.env.Agents[0].NodeID())
	raceForSlots(t, 30, slots, func(int) openai.Client { return r.clientA() }, func() int { return node.Offers[0].Running() })
}

// raceForSlots sends n requests at once, request i to client(i), watching the most jobs
// running() reports at once: no node may run more than its slots, and every request must be
// answered (waiting in the queue when the slots are busy).
func raceForSlots(t testing.TB, n, slots int, client func(i int) openai.Client, running func() int) {
	t.Helper()
	var most atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			if r := int64(running()); r > most.Load() {
				most.Store(r)
			}
		}
	})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Go(func() {
			c := client(i)
			if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(int64(i)),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("race")}}); err != nil {
				t.Logf("request %d: %v", i, err)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	if most.Load() > int64(slots) {
		t.Errorf("a node ran %d jobs at once; it has %d slots", most.Load(), slots)
	}
	if failed.Load() > 0 {
		t.Errorf("%d of %d requests failed; want every one answered", failed.Load(), n)
	}
}

// streamText reads a streamed chat to its end: its text, and the stream's error.
func streamText(stream *ssestream.Stream[openai.ChatCompletionChunk]) (string, error) {
	var text strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	return text.String(), stream.Err()
}
