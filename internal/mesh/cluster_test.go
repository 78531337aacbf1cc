package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/bus"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
	"github.com/shareai/shareai/internal/testenv"
)

// The network of the issue: three replicas on a cluster of three embedded NATS servers and
// real PostgreSQL, one simulated provider connected to each replica.
func cluster(t *testing.T, opts ...testenv.Option) *testenv.Env {
	t.Helper()
	if os.Getenv("SHAREAI_TEST_POSTGRES") == "" {
		t.Skip("SHAREAI_TEST_POSTGRES is unset: the replicas' tests need PostgreSQL (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	servers, err := bus.Cluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	dsn := sqlstoretest.DSN(t, "postgres")
	opts = append([]testenv.Option{testenv.Replicas(3), testenv.Providers(3), func(c *testenv.Config) {
		c.NATS, c.DB = bus.URLs(servers), dsn
		c.Coordinator.BusReplicas = 3
		c.Sim = sim.Config{TokensPerSecond: 200}
	}}, opts...)
	env := testenv.New(t, opts...)
	for i := range 3 {
		env.WaitFor(fmt.Sprintf("replica %d to see every node", i+1), func() bool {
			c := env.CoordinatorOf(i)
			return c != nil && len(c.Fleet.Offers(model)) == 3
		})
	}
	return env
}

// ownerOf is the replica whose agent's node is node.
func nodeOn(env *testenv.Env, replica int) string { return env.Agents[replica].NodeID() }

func only(node string) option.RequestOption {
	return option.WithJSONSet("provider", map[string]any{"only": []string{node}})
}

// Every replica serves a buyer from a node another replica holds, streamed and not, with the
// same answer a local node gives.
func TestCluster_EveryReplicaServesFromEveryOther(t *testing.T) {
	env := cluster(t)
	ctx := context.Background()
	for i := range 3 {
		remote := nodeOn(env, (i+1)%3)
		client := env.ClientOf(i)
		prompt := fmt.Sprintf("replica %d asks", i+1)
		var resp *http.Response
		got, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(int64(i)),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}, only(remote), option.WithResponseInto(&resp))
		if err != nil {
			t.Fatalf("replica %d: %v", i+1, err)
		}
		if resp.Header.Get("X-Shareai-Node") != remote || got.Choices[0].Message.Content != simAnswer(prompt, int64(i)) {
			t.Errorf("replica %d: served by %s, %q; want %s's node and the simulated answer", i+1, resp.Header.Get("X-Shareai-Node"), got.Choices[0].Message.Content, remote)
		}
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(int64(10 + i)),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt + ", streaming")}}, only(remote))
		if text, err := streamText(stream); err != nil || text != simAnswer(prompt+", streaming", int64(10+i)) {
			t.Errorf("replica %d streamed %q, %v; want the simulated answer", i+1, text, err)
		}
	}
	settledAndBalanced(t, env)
}

// settledAndBalanced waits until no hold is open, and checks the ledger balances.
func settledAndBalanced(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	env.WaitFor("every hold settled", func() bool {
		n, err := env.Store.OpenHolds(ctx)
		return err == nil && len(n) == 0
	})
	if sum, err := env.Store.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sum %d, %v; want 0", sum, err)
	}
}

// 100 requests spread over the three replicas race for the nodes' few slots: each owner
// grants a slot once, so no node runs more jobs than it has slots, and every request is
// answered.
func TestCluster_NoSlotDoubleBooked(t *testing.T) {
	const slots = 2
	env := cluster(t, func(c *testenv.Config) { c.Agent.MaxConcurrent = slots })
	raceForSlots(t, 100, slots, func(i int) openai.Client { return env.ClientOf(i % 3) }, func() int {
		most := 0
		for i := range 3 { // each node as its owner counts it
			if n := env.CoordinatorOf(i).Fleet.Node(nodeOn(env, i)); n != nil && n.Owner() == "" {
				most = max(most, n.Offers[0].Running())
			}
		}
		return most
	})
	settledAndBalanced(t, env)
}

// A key with a spend cap, hammered over every replica at once, never spends past its cap;
// and a key limited to 6 requests a minute gets 6 over the three replicas, not 18.
func TestCluster_CapsAndRateLimitsHoldAcrossReplicas(t *testing.T) {
	env := cluster(t)
	ctx := context.Background()
	buyer, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	capped := money.Nanos(20_000) // $0.00002: a few requests' worth
	secret, k, err := ops.CreateKey(ctx, env.Store, ops.NewKey{AccountID: buyer.AccountID, Kind: store.KeyBuyer, Name: "capped", At: time.Now(),
		Limits: store.RateLimits{RequestsPerMinute: -1, TokensPerMinute: -1, Concurrent: -1},
		Cap:    &store.Cap{Period: store.Daily, Limit: capped}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range 60 {
		wg.Go(func() {
			client := env.ClientOf(i%3, option.WithAPIKey(secret))
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
				MaxTokens: openai.Int(16), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("spend")}})
			var ae *openai.Error
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &ae) && ae.StatusCode == http.StatusPaymentRequired:
				refused.Add(1)
			default:
				t.Errorf("request %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	settledAndBalanced(t, env)
	spends, err := env.Store.Spending(ctx, time.Now(), store.KeyScope(k.ID))
	if err != nil || len(spends) != 1 {
		t.Fatalf("the capped key's spending: %+v, %v", spends, err)
	}
	spent := spends[0].Spent
	t.Logf("capped key: %d served, %d refused, spent %s of %s", ok.Load(), refused.Load(), spent, capped)
	if spent > capped || ok.Load() == 0 || refused.Load() == 0 {
		t.Errorf("spent %s of a %s cap (%d served, %d refused); want some served, the rest refused, never past the cap", spent, capped, ok.Load(), refused.Load())
	}

	secret, _, err = ops.CreateKey(ctx, env.Store, ops.NewKey{AccountID: buyer.AccountID, Kind: store.KeyBuyer, Name: "limited", At: time.Now(),
		Limits: store.RateLimits{RequestsPerMinute: 6, TokensPerMinute: -1, Concurrent: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var served, limited int
	for i := range 18 {
		client := env.ClientOf(i%3, option.WithAPIKey(secret))
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			MaxTokens: openai.Int(8), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("limit")}})
		var ae *openai.Error
		switch {
		case err == nil:
			served++
		case errors.As(err, &ae) && ae.StatusCode == http.StatusTooManyRequests:
			limited++
		default:
			t.Errorf("request %d: %v", i, err)
		}
	}
	if served != 6 || limited != 12 {
		t.Errorf("a key limited to 6 requests a minute: %d served, %d limited over 3 replicas; want 6 and 12", served, limited)
	}
}

// A replica dies mid-stream: the streams other replicas relay from its node continue on
// another node, each ending exactly as an undisturbed run; its agent reconnects to another
// replica; every hold is settled and the ledger balances.
func TestCluster_ReplicaDiesMidStream(t *testing.T) {
	env := cluster(t, func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 60} })
	ctx := context.Background()
	dead := 2
	victim := nodeOn(env, dead)
	type result struct {
		text string
		err  error
	}
	results := make([]result, 2)
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i := range 2 { // streams on replicas 1 and 2, each from the node replica 3 holds
		wg.Go(func() {
			prompt := fmt.Sprintf("A long story from replica %d about surviving failures.", i+1)
			client := env.ClientOf(i)
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(int64(i)),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}},
				option.WithJSONSet("provider", map[string]any{"order": []string{victim}}))
			var text strings.Builder
			n := 0
			for stream.Next() {
				if ch := stream.Current(); len(ch.Choices) > 0 {
					text.WriteString(ch.Choices[0].Delta.Content)
					if n++; n == 5 {
						started <- struct{}{}
					}
				}
			}
			err := stream.Err()
			if err == nil && text.String() != simAnswer(prompt, int64(i)) {
				err = fmt.Errorf("answer %q differs from the undisturbed %q", text.String(), simAnswer(prompt, int64(i)))
			}
			results[i] = result{text.String(), err}
		})
	}
	<-started
	<-started
	env.StopReplica(dead)
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Errorf("stream on replica %d through the dead replica's node: %v", i+1, r.err)
		}
	}
	env.WaitFor("the dead replica's agent on another replica", func() bool {
		c := env.Agents[dead].Status().Coordinator
		return c != "" && c != env.URLs[dead]
	})
	settledAndBalanced(t, env)
}

// balancer is a load balancer in front of the replicas, as a deployment has one: it sends each
// request to the next replica whose /readyz says ready (checked every 50 ms), and answers 502
// when it cannot reach it, which buyers' SDKs retry.
type balancer struct {
	urls  []string
	mu    sync.Mutex
	ready []bool
	next  int
}

func newBalancer(t *testing.T, urls []string) *httptest.Server {
	lb := &balancer{urls: slices.Clone(urls), ready: make([]bool, len(urls))} // a restarted replica keeps its address
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		probe := &http.Client{Timeout: 200 * time.Millisecond}
		for ctx.Err() == nil {
			for i, u := range lb.urls {
				resp, err := probe.Get(u + "/readyz")
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					resp.Body.Close()
				}
				lb.mu.Lock()
				lb.ready[i] = ok
				lb.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lb.mu.Lock()
		pick := -1
		for range lb.urls {
			i := lb.next % len(lb.urls)
			lb.next++
			if lb.ready[i] {
				pick = i
				break
			}
		}
		lb.mu.Unlock()
		if pick < 0 {
			http.Error(w, "no replica ready", http.StatusBadGateway)
			return
		}
		target, _ := url.Parse(lb.urls[pick])
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A replica answers the moment it is up, before the others' nodes are in its view: a buyer
// that reaches it then (a load balancer's health check lags a restart) is served once the
// view is in, not told that the model does not exist.
func TestCluster_RestartedReplicaServesAtOnce(t *testing.T) {
	env := cluster(t)
	if err := env.DrainReplica(0); err != nil {
		t.Fatal(err)
	}
	env.WaitFor("the others to see replica 1's node again", func() bool {
		return len(env.CoordinatorOf(1).Fleet.Offers(model)) == 3 && len(env.CoordinatorOf(2).Fleet.Offers(model)) == 3
	})
	if err := env.StartReplica(0); err != nil {
		t.Fatal(err)
	}
	client := env.ClientOf(0, option.WithMaxRetries(0))
	const prompt = "right after a restart"
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(1),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
	if err != nil {
		t.Fatalf("the restarted replica's first request: %v; want it served", err)
	}
	if got, want := resp.Choices[0].Message.Content, simAnswer(prompt, 1); got != want {
		t.Errorf("answer %q; want %q", got, want)
	}
	settledAndBalanced(t, env)
}

// The replicas drain and restart one at a time under load, behind a load balancer: buyers
// whose SDK retries connection errors (as OpenAI's do by default) see no failed request, and
// the ledger balances.
func TestCluster_RollingRestart(t *testing.T) {
	env := cluster(t)
	lb := newBalancer(t, env.URLs)
	client := openai.NewClient(option.WithBaseURL(lb.URL+"/v1/"), option.WithAPIKey(env.APIKey), option.WithMaxRetries(4))
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() }) // a failed restart ends the test, not the load's logging
	var served, failed atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				prompt := fmt.Sprintf("worker %d, request %d", w, i)
				var err error
				if i%2 == 0 {
					_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
						Seed: openai.Int(int64(i)), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
				} else {
					stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: model,
						Seed: openai.Int(int64(i)), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
					var text string
					if text, err = streamText(stream); err == nil && text != simAnswer(prompt, int64(i)) {
						err = fmt.Errorf("answer %q differs from the undisturbed one", text)
					}
				}
				if err != nil {
					if ae, ok := errors.AsType[*openai.Error](err); ok {
						err = fmt.Errorf("%w: %s", err, ae.RawJSON())
					}
					t.Errorf("%s: %v", prompt, err)
					failed.Add(1)
				} else {
					served.Add(1)
				}
			}
		})
	}
	for i := range 3 {
		time.Sleep(300 * time.Millisecond)
		if err := env.DrainReplica(i); err != nil {
			t.Fatalf("drain replica %d: %v", i+1, err)
		}
		if err := env.StartReplica(i); err != nil {
			t.Fatalf("restart replica %d: %v", i+1, err)
		}
		env.WaitFor(fmt.Sprintf("replica %d back, seeing every node", i+1), func() bool {
			c := env.CoordinatorOf(i)
			return c != nil && len(c.Fleet.Offers(model)) == 3
		})
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	t.Logf("rolling restart of 3 replicas: %d requests served, %d failed", served.Load(), failed.Load())
	if served.Load() == 0 {
		t.Fatal("no request served")
	}
	settledAndBalanced(t, env)
}
