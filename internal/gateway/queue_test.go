package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
	"github.com/shareai/shareai/internal/tier"
)

// streamText reads a streamed chat answer whole.
func streamText(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (string, error) {
	stream := client.Chat.Completions.NewStreaming(ctx, params, opts...)
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return text.String(), stream.Err()
}

// 100 concurrent streams against a network of 16 slots all succeed, through the official SDK
// with its retries off: those that find every slot taken wait in the queue.
func TestQueue_BurstWaitsForSlots(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 8
		c.Sim = sim.Config{TokensPerSecond: 400}
	})
	client := env.Client()
	const n = 100
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	for i := range n {
		wg.Go(func() {
			prompt := fmt.Sprintf("burst %d", i)
			params := chatParams(prompt, int64(i))
			params.MaxTokens = openai.Int(24)
			text, err := streamText(context.Background(), client, params)
			if err == nil && text != wantN(t, prompt, int64(i), 24) {
				err = fmt.Errorf("request %d: answer differs from the undisturbed one", i)
			}
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d streams failed with a queue to wait in; first: %v", len(failed), n, failed[0])
	}
	env.WaitFor("every request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
}

// A request that waits past the queue's deadline gets 503 with Retry-After, and is charged
// nothing; a full queue answers the same at once.
func TestQueue_DeadlineAndFull(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 20}
		c.Coordinator.Core.Queue = queue.Config{Timeout: 300 * time.Millisecond, PerKey: 1}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	busy := make(chan error, 1)
	go func() { // takes the only slot for about 5 s
		_, err := streamText(ctx, env.Client(), chatParams("hold the slot", 1))
		busy <- err
	}()
	env.WaitFor("the slot to be taken", func() bool { _, agents := env.Running(); return agents == 1 })

	var wg sync.WaitGroup
	resps := make([]*http.Response, 2)
	for i := range resps {
		wg.Go(func() {
			if i == 1 {
				time.Sleep(50 * time.Millisecond) // the first is in the queue: the key's one place is taken
			}
			resps[i] = env.Post("/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"wait"}]}`)
		})
	}
	wg.Wait()
	for i, resp := range resps {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("request %d: %d, Retry-After %q: %s; want 503 with Retry-After", i, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		want := "within 300ms in the queue"
		if i == 1 {
			want = "queue is full"
		}
		if !strings.Contains(string(body), want) {
			t.Errorf("request %d says %s; want it to say %q", i, body, want)
		}
	}
	cancel()
	<-busy
	// The waits are counted by how they ended, and the queue is empty again.
	rec := httptest.NewRecorder()
	env.Coordinator().MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range []string{
		`shareai_queue_wait_seconds_count{result="timeout",tier="silver"} 1`,
		`shareai_queue_wait_seconds_count{result="full",tier="silver"} 1`,
		`shareai_queue_length{tier="silver"} 0`,
	} {
		if !strings.Contains(rec.Body.String(), line) {
			t.Errorf("metrics lack %q", line)
		}
	}
	env.WaitFor("every request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
}

// A gold request preempts a bronze stream on a full node: gold is served first, and the bronze
// answer pauses and then continues exactly, the same as an undisturbed run.
func TestQueue_GoldPreemptsBronze(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 100}
	})
	client := env.Client()
	const prompt = "a long bronze answer"
	bronze := chatParams(prompt, 3)
	bronze.ServiceTier = openai.ChatCompletionNewParamsServiceTierFlex
	var (
		bronzeText string
		bronzeErr  error
		bronzeTier string
		bronzeGap  time.Duration // the longest pause between chunks: the preemption's
		done       = make(chan struct{})
		progress   = make(chan struct{}, 1)
	)
	go func() {
		defer close(done)
		stream := client.Chat.Completions.NewStreaming(context.Background(), bronze)
		var text strings.Builder
		last := time.Now()
		for stream.Next() {
			if gap := time.Since(last); gap > bronzeGap {
				bronzeGap = gap
			}
			last = time.Now()
			c := stream.Current()
			bronzeTier = string(c.ServiceTier)
			if len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
			if text.Len() > 20 {
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}
		bronzeText, bronzeErr = text.String(), stream.Err()
	}()
	<-progress // the bronze answer is flowing on the only slot
	gold := chatParams("gold goes first", 4)
	gold.ServiceTier = openai.ChatCompletionNewParamsServiceTierPriority
	gold.MaxTokens = openai.Int(5)
	start := time.Now()
	got, err := client.Chat.Completions.New(context.Background(), gold)
	if err != nil {
		t.Fatalf("gold: %v", err)
	}
	if got.ServiceTier != "priority" {
		t.Errorf("gold answer's service_tier %q; want priority", got.ServiceTier)
	}
	select {
	case <-done:
		t.Fatal("the bronze answer ended before gold was served: gold waited for it instead of preempting it")
	default:
	}
	t.Logf("gold served in %v with the node full of bronze", time.Since(start))
	<-done
	if bronzeErr != nil {
		t.Fatalf("bronze: %v", bronzeErr)
	}
	if w := want(t, prompt, 3); bronzeText != w {
		t.Errorf("the preempted bronze answer differs from the undisturbed one:\n got %q\nwant %q", bronzeText, w)
	}
	t.Logf("the bronze stream paused at most %v (gold's answer: 5 tokens at 100/s)", bronzeGap)
	if bronzeTier != "flex" {
		t.Errorf("bronze chunks' service_tier %q; want flex", bronzeTier)
	}
	env.WaitFor("every request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
}

// Queue wait percentiles at 2× and 5× the slots in flight, for the closing figures: run with
// -run TestQueue_Waits -v.
func TestQueue_Waits(t *testing.T) {
	if testing.Short() {
		t.Skip("figures only")
	}
	for _, load := range []int{2, 5} {
		env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
			c.Agent.MaxConcurrent = 4
			c.Sim = sim.Config{TokensPerSecond: 500}
		})
		client := env.Client()
		n := 8 * load
		waits := make([]time.Duration, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				var resp *http.Response
				params := chatParams(fmt.Sprintf("load %d", i), int64(i))
				params.MaxTokens = openai.Int(20)
				if _, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp)); err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				waits[i], _ = time.ParseDuration(resp.Header.Get("X-Shareai-Queue-Time"))
			})
		}
		wg.Wait()
		sort.Slice(waits, func(a, b int) bool { return waits[a] < waits[b] })
		t.Logf("%d× the slots: queue wait p50 %v, p99 %v", load, waits[n/2], waits[n*99/100])
	}
}

// cheapBrokenNode is a network of two nodes: the first cheap and failing every job before
// its first token (failed counts its jobs), the second healthy and dearer by a factor.
func cheapBrokenNode(t *testing.T, factor money.Price) (env *testenv.Env, failed *atomic.Int64) {
	failed = new(atomic.Int64)
	env = testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.NewEngine = func(i int) (engine.Engine, error) {
			if i == 0 {
				return broken{sim.New(sim.Config{}), failed}, nil
			}
			return sim.New(sim.Config{}), nil
		}
		c.EachAgent = func(i int, c *agent.Config) {
			if i == 1 {
				c.InputPrice, c.OutputPrice = factor*c.InputPrice, factor*c.OutputPrice
			}
		}
	})
	return env, failed
}

// A retry before the first token reaches an idle node dearer than the first choice: its hold
// is raised to that node's cost, within the buyer's balance and caps.
func TestQueue_RetryReachesDearerNode(t *testing.T) {
	env, failed := cheapBrokenNode(t, 3)
	dear := env.Agents[1].NodeID()
	var resp *http.Response
	params := chatParams("cheap first", 1)
	params.MaxTokens = openai.Int(50)
	client := env.Client()
	got, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatalf("the request failed with an idle dearer node: %v", err)
	}
	if node := resp.Header.Get("X-Shareai-Node"); node != dear || got.Choices[0].Message.Content == "" {
		t.Errorf("served by %s; want the dearer node %s", node, dear)
	}
	if failed.Load() != 1 {
		t.Errorf("the cheap node got %d jobs; want 1: the first choice, which failed", failed.Load())
	}
	env.WaitFor("the request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
}

// Chaos as `shareai up --chaos drop=0.3` runs it: every node drops its connection mid-answer
// on 30% of its jobs, and 60 concurrent streams over 2 or 4 nodes of 8 slots each all end
// whole, each the same as undisturbed: continuations wait for a slot, or for a node to come
// back, instead of failing. (Scores are not recomputed: nodes failing this often would be
// quarantined by their reputation, by design, after 200 jobs.)
func TestQueue_ChaosEveryStreamCompletes(t *testing.T) {
	for _, nodes := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			env := testenv.New(t, testenv.Providers(nodes), func(c *testenv.Config) {
				c.Agent.MaxConcurrent = 8
				c.Coordinator.Core.StallTimeout = 2 * time.Second
				c.Coordinator.Prober.ScoreEvery = time.Hour
				c.Agent.Chaos = agent.Chaos{Drop: 0.3}
				c.Sim = sim.Config{TokensPerSecond: 1000}
			})
			client := env.Client()
			var (
				wg     sync.WaitGroup
				failed atomic.Int64
			)
			for i := range 60 {
				wg.Go(func() {
					prompt := fmt.Sprintf("chaos %d", i)
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					text, err := streamText(ctx, client, chatParams(prompt, int64(i)))
					if err != nil {
						failed.Add(1)
						t.Errorf("stream %d failed: %v", i, apiMessage(err))
						return
					}
					if w := want(t, prompt, int64(i)); text != w {
						t.Errorf("stream %d differs from the undisturbed answer:\n got %q\nwant %q", i, text, w)
					}
				})
			}
			wg.Wait()
			if n := failed.Load(); n > 0 {
				t.Errorf("%d of 60 streams failed", n)
			}
			env.WaitFor("every request to be settled", func() bool { return balance(t, env).Held == 0 })
			ledgerSumIsZero(t, env)
		})
	}
}

// apiMessage is an SDK error with the API's message, which its Error leaves out.
func apiMessage(err error) string {
	if e, ok := errors.AsType[*openai.Error](err); ok {
		return fmt.Sprintf("%d %s", e.StatusCode, e.RawJSON())
	}
	return err.Error()
}

// A key's default tier serves its requests that name none: the answer, its usage record and
// its price say so; a request's own service_tier wins.
func TestQueue_KeyDefaultTier(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	secret, flex := store.NewKey(k.AccountID, store.KeyBuyer, "flex", time.Now())
	flex.ServiceTier = tier.Bronze.String()
	if err := env.Store.CreateKey(ctx, flex); err != nil {
		t.Fatal(err)
	}
	client := env.Client(option.WithAPIKey(secret))
	costOf := func(resp *http.Response) money.Nanos {
		c, err := money.ParseUSD(resp.Header.Get("X-Shareai-Cost"))
		if err != nil {
			t.Fatalf("cost header %q: %v", resp.Header.Get("X-Shareai-Cost"), err)
		}
		return c
	}
	var resp *http.Response
	params := chatParams("same words", 1)
	got, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got.ServiceTier != "flex" {
		t.Errorf("service_tier %q for a key whose default is bronze; want flex", got.ServiceTier)
	}
	bronze := costOf(resp)
	params.ServiceTier = openai.ChatCompletionNewParamsServiceTierDefault
	if got, err = client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp)); err != nil || got.ServiceTier != "default" {
		t.Fatalf("the request's own tier: %v, %q; want default", err, got.ServiceTier)
	}
	if silver := costOf(resp); bronze*2 > silver+2 || bronze*2 < silver-2 {
		t.Errorf("bronze cost %s, silver %s; want half (×0.5), within rounding", bronze, silver)
	}
	id := strings.TrimPrefix(got.ID, "chatcmpl-")
	env.WaitFor("the usage to be recorded", func() bool {
		u, err := env.Store.UsageByRequest(ctx, "req_"+id)
		return err == nil && u.ServiceTier == "silver"
	})
}

// A freed slot goes to the highest tier waiting, then to the longest waiting of its tier.
func TestQueue_FreedSlotOrder(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 50}
	})
	client := env.Client()
	ctx := context.Background()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		order []string
	)
	send := func(name string, tr openai.ChatCompletionNewParamsServiceTier, tokens int64) {
		wg.Go(func() {
			params := chatParams(name, 1)
			params.MaxTokens, params.ServiceTier = openai.Int(tokens), tr
			if _, err := client.Chat.Completions.New(ctx, params); err != nil {
				t.Errorf("%s: %v", name, apiMessage(err))
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		})
	}
	send("first", openai.ChatCompletionNewParamsServiceTierDefault, 25) // holds the slot for half a second
	env.WaitFor("the slot to be taken", func() bool { _, agents := env.Running(); return agents == 1 })
	for _, w := range []struct {
		name string
		tier openai.ChatCompletionNewParamsServiceTier
	}{{"silver-1", openai.ChatCompletionNewParamsServiceTierDefault}, {"flex", openai.ChatCompletionNewParamsServiceTierFlex},
		{"silver-2", openai.ChatCompletionNewParamsServiceTierAuto}, {"gold", openai.ChatCompletionNewParamsServiceTierPriority}} {
		send(w.name, w.tier, 2)
		time.Sleep(50 * time.Millisecond) // joins the queue in this order
	}
	wg.Wait()
	if got, want := strings.Join(order, " "), "first gold silver-1 silver-2 flex"; got != want {
		t.Errorf("served in the order %q; want %q", got, want)
	}
}

// A preempted non-streamed bronze request simply takes longer: gold is answered while it waits,
// and its answer is the undisturbed one.
func TestQueue_GoldPreemptsNonStreamedBronze(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 100}
	})
	client := env.Client()
	const prompt = "a long bronze answer, not streamed"
	bronze := chatParams(prompt, 5)
	bronze.ServiceTier = openai.ChatCompletionNewParamsServiceTierFlex
	type answer struct {
		text string
		err  error
		at   time.Time
	}
	done := make(chan answer, 1)
	go func() {
		got, err := client.Chat.Completions.New(context.Background(), bronze)
		a := answer{err: err, at: time.Now()}
		if err == nil {
			a.text = got.Choices[0].Message.Content
		}
		done <- a
	}()
	env.WaitFor("the bronze job to run", func() bool { _, agents := env.Running(); return agents == 1 })
	time.Sleep(100 * time.Millisecond) // part of its answer is generated
	gold := chatParams("gold goes first", 6)
	gold.ServiceTier = openai.ChatCompletionNewParamsServiceTierPriority
	gold.MaxTokens = openai.Int(3)
	if _, err := client.Chat.Completions.New(context.Background(), gold); err != nil {
		t.Fatalf("gold: %v", err)
	}
	goldAt := time.Now()
	a := <-done
	if a.err != nil {
		t.Fatalf("bronze: %v", apiMessage(a.err))
	}
	if !a.at.After(goldAt) {
		t.Error("bronze was answered before gold: gold did not preempt it")
	}
	if w := want(t, prompt, 5); a.text != w {
		t.Errorf("the preempted answer differs from the undisturbed one:\n got %q\nwant %q", a.text, w)
	}
	env.WaitFor("every request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
}

// A provider's gold share is kept for gold: with one of two slots kept, a second silver
// request waits (here until its deadline) while a gold one is served at once.
func TestQueue_GoldShare(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 2
		c.Sim = sim.Config{TokensPerSecond: 20}
		c.Coordinator.Core.Queue = queue.Config{Timeout: 300 * time.Millisecond}
		c.EachAgent = func(_ int, c *agent.Config) { c.GoldShare = 0.5 }
	})
	client := env.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go streamText(ctx, client, chatParams("a slow silver answer", 1))
	env.WaitFor("the silver slot to be taken", func() bool { _, agents := env.Running(); return agents == 1 })
	_, err := client.Chat.Completions.New(context.Background(), chatParams("another silver", 2))
	if e, ok := errors.AsType[*openai.Error](err); !ok || e.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a second silver request took the gold slot: %v", err)
	}
	gold := chatParams("gold", 3)
	gold.ServiceTier, gold.MaxTokens = openai.ChatCompletionNewParamsServiceTierPriority, openai.Int(2)
	if _, err := client.Chat.Completions.New(context.Background(), gold); err != nil {
		t.Errorf("gold did not get the slot kept for it: %v", apiMessage(err))
	}
}

// A retry's raise is refused past the key's spend cap: the request fails as before, charged
// nothing, and the dearer node gets no job.
func TestQueue_RetryRaiseWithinCaps(t *testing.T) {
	env, failed := cheapBrokenNode(t, 1000) // the healthy node's hold does not fit the cap
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.SetCap(ctx, store.Cap{Scope: store.KeyScope(k.ID), Period: store.Daily, Limit: money.USD / 1000}); err != nil {
		t.Fatal(err)
	}
	before := balance(t, env)
	params := chatParams("cheap first", 1)
	params.MaxTokens = openai.Int(50)
	client := env.Client()
	_, err = client.Chat.Completions.New(ctx, params)
	if e, ok := errors.AsType[*openai.Error](err); !ok || e.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a retry past the cap: %v; want 503", err)
	}
	env.WaitFor("the request to be closed", func() bool { return balance(t, env).Held == 0 })
	if after := balance(t, env); after.Spent != before.Spent {
		t.Errorf("spent %s → %s for a request no node answered", before.Spent, after.Spent)
	}
	if _, agents := env.Running(); agents != 0 || failed.Load() != 1 {
		t.Errorf("the cheap node got %d jobs; want 1", failed.Load())
	}
	ledgerSumIsZero(t, env)
}
