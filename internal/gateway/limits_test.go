package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/ledger"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// gated is a simulated engine that starts no answer before its gate opens, so that a test
// holds requests in flight for as long as it needs.
type gated struct {
	*sim.Engine
	gate chan struct{}
	once sync.Once
}

func newGated(cfg sim.Config) *gated {
	return &gated{Engine: sim.New(cfg), gate: make(chan struct{})}
}

func (g *gated) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gated) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return engine.Result{}, ctx.Err()
	}
	return g.Engine.Run(ctx, req, out)
}

// limitedKey makes another API key of the network's buyer, with its own rate limits, and
// returns its secret.
func limitedKey(t *testing.T, env *testenv.Env, l store.RateLimits) string {
	t.Helper()
	ctx := context.Background()
	buyer, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	secret, k := store.NewKey(buyer.AccountID, store.KeyBuyer, "limited", time.Now())
	k.Limits = l
	if err := env.Store.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	return secret
}

// rateLimited checks err is the SDK's 429 of a limit of this type, and returns it.
func rateLimited(t *testing.T, err error, typ string) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("err = %v; want a 429", err)
	}
	if apiErr.Code != "rate_limit_exceeded" || apiErr.Type != typ {
		t.Errorf("429 code %q type %q; want rate_limit_exceeded, %s", apiErr.Code, apiErr.Type, typ)
	}
	return apiErr
}

// RPM 10 and 50 requests at once: exactly 10 are served, each seeing a different number of
// requests left, and the 40 others get a 429 that says when to retry.
func TestLimits_RequestsPerMinuteExactUnderConcurrency(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) { c.Coordinator.Gateway.Limits = store.RateLimits{RequestsPerMinute: 10} })
	client := env.Client() // no retries: the SDK would retry a 429 itself
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		remaining []int
		refused   []*openai.Error
	)
	start := make(chan struct{})
	for i := range 50 {
		wg.Go(func() {
			<-start
			var resp *http.Response
			_, err := client.Chat.Completions.New(context.Background(), chatParams("hi", int64(i)), option.WithResponseInto(&resp))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, rateLimited(t, err, "requests"))
				return
			}
			if resp.Header.Get("X-Ratelimit-Limit-Requests") != "10" {
				t.Errorf("x-ratelimit-limit-requests %q, want 10", resp.Header.Get("X-Ratelimit-Limit-Requests"))
			}
			n, err := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining-Requests"))
			if err != nil {
				t.Errorf("x-ratelimit-remaining-requests: %v", err)
			}
			remaining = append(remaining, n)
		})
	}
	close(start)
	wg.Wait()
	slices.Sort(remaining)
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(remaining, want) {
		t.Errorf("served requests saw remaining %v; want exactly 10 served, seeing %v", remaining, want)
	}
	if len(refused) != 40 {
		t.Fatalf("%d refused, want 40", len(refused))
	}
	for _, e := range refused {
		h := e.Response.Header
		ra, err := strconv.Atoi(h.Get("Retry-After"))
		ms, err2 := strconv.Atoi(h.Get("Retry-After-Ms"))
		if err != nil || err2 != nil || ra < 1 || ra > 60 || ms > ra*1000 || ms <= (ra-1)*1000 {
			t.Errorf("Retry-After %q, Retry-After-Ms %q; want whole seconds rounding up the milliseconds, within a minute", h.Get("Retry-After"), h.Get("Retry-After-Ms"))
		}
		if h.Get("X-Ratelimit-Limit-Requests") != "10" || h.Get("X-Ratelimit-Remaining-Requests") != "0" || h.Get("X-Ratelimit-Reset-Requests") == "" {
			t.Errorf("429 headers %v; want the request limit's, none left", h)
		}
		if !strings.HasPrefix(e.Message, "Rate limit reached for requests per min (RPM) on key sk-") ||
			!strings.Contains(e.Message, "Limit 10, Used 10, Requested 1. Please try again in ") {
			t.Errorf("message %q, want OpenAI's", e.Message)
		}
	}
}

// TPM: admission reserves each request's prompt estimate + max_tokens, so exactly the
// requests whose reservations fit run at once; when they end, the tokens actually billed
// replace their reservations and free the rest.
func TestLimits_TokensPerMinute(t *testing.T) {
	eng := newGated(sim.Config{})
	msgs := `[{"role":"user","content":"Tell me about GPUs."}]`
	const maxTokens = 1000
	reserve := ledger.EstimateTokens(len(msgs)) + maxTokens // per request
	limit := 4*reserve - 1                                  // three fit at once, not four
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Gateway.Limits = store.RateLimits{TokensPerMinute: limit}
		c.NewEngine = func(int) (engine.Engine, error) { return eng, nil }
	})
	t.Cleanup(eng.open) // before the network closes, whatever happens
	body := fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":%d,"seed":1}`, model, msgs, maxTokens)

	type answer struct {
		status int
		header http.Header
		body   []byte
	}
	answers := make(chan answer, 8)
	var refused atomic.Int64
	for range 8 {
		go func() {
			resp := env.Post("/chat/completions", body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				refused.Add(1)
			}
			answers <- answer{resp.StatusCode, resp.Header, b}
		}()
	}
	// Three are in flight, held at the gate: the five others were refused.
	env.WaitFor("5 refused and 3 running", func() bool { c, _ := env.Running(); return refused.Load() == 5 && c == 3 })
	eng.open()
	var served []answer
	for range 8 {
		a := <-answers
		switch a.status {
		case http.StatusOK:
			served = append(served, a)
		case http.StatusTooManyRequests:
			var e struct {
				Error struct{ Type, Code, Message string }
			}
			json.Unmarshal(a.body, &e)
			if e.Error.Type != "tokens" || e.Error.Code != "rate_limit_exceeded" || a.header.Get("Retry-After") == "" ||
				a.header.Get("X-Ratelimit-Limit-Tokens") != strconv.Itoa(limit) {
				t.Errorf("429 %s, headers %v; want type tokens with Retry-After and the token limit's headers", a.body, a.header)
			}
			if want := fmt.Sprintf("Limit %d, Used %d, Requested %d.", limit, 3*reserve, reserve); !strings.Contains(e.Error.Message, want) {
				t.Errorf("message %q, want it to say %q", e.Error.Message, want)
			}
		default:
			t.Fatalf("status %d: %s", a.status, a.body)
		}
	}
	if len(served) != 3 {
		t.Fatalf("%d served, want 3", len(served))
	}
	var got struct {
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(served[0].body, &got); err != nil || got.Usage.TotalTokens == 0 {
		t.Fatalf("usage of %s: %v", served[0].body, err)
	}
	billed := got.Usage.TotalTokens // the same answer each time: same prompt, same seed
	// A handler gives its reservation back just after its answer's last byte reaches the buyer.
	buyer, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	env.WaitFor("the three reservations given back", func() bool { return env.Coordinator().Gateway.RateLimitReserved(buyer.ID) == 0 })

	// Now the three count what they were billed, not what they reserved: more fit, one at a
	// time, until the billed tokens of the minute leave no room for another reservation.
	used, want := 3*billed, 0
	for used+reserve <= limit {
		used += billed
		want++
	}
	if want == 0 {
		t.Fatalf("billed %d tokens of %d reserved: the test needs short answers", billed, reserve)
	}
	client := env.Client()
	params := openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(1), MaxTokens: openai.Int(maxTokens),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about GPUs.")}}
	n := 0
	for ; n <= want; n++ {
		var resp *http.Response
		_, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp))
		if err != nil {
			rateLimited(t, err, "tokens")
			break
		}
		// At its admission: the minute's billed tokens and its own reservation.
		if left := limit - (3+n)*billed - reserve; resp.Header.Get("X-Ratelimit-Remaining-Tokens") != strconv.Itoa(left) {
			t.Errorf("request %d: x-ratelimit-remaining-tokens %q, want %d", n, resp.Header.Get("X-Ratelimit-Remaining-Tokens"), left)
		}
	}
	if n != want {
		t.Errorf("%d more served after the first three ended, want %d (limit %d, %d billed each, %d reserved)", n, want, limit, billed, reserve)
	}

	// A request larger than the whole limit can never run: a 429 that the SDK is told not to
	// retry, without Retry-After.
	params.MaxTokens = openai.Int(int64(limit))
	retrying := env.Client(option.WithMaxRetries(2))
	_, err = retrying.Chat.Completions.New(context.Background(), params)
	e := rateLimited(t, err, "tokens")
	if h := e.Response.Header; h.Get("Retry-After") != "" || h.Get("X-Should-Retry") != "false" || !strings.HasPrefix(e.Message, "Request too large") {
		t.Errorf("too large: %q, headers %v; want no Retry-After, x-should-retry false", e.Message, h)
	}
}

// Concurrent 3 and 20 slow streams: while three run the other seventeen are refused; as
// streams end their slots serve the others, never more than three at once.
func TestLimits_ConcurrentStreams(t *testing.T) {
	eng := newGated(sim.Config{TokensPerSecond: 200})
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Gateway.Limits = store.RateLimits{Concurrent: 3}
		c.NewEngine = func(int) (engine.Engine, error) { return eng, nil }
	})
	t.Cleanup(eng.open)
	client := env.Client()
	params := chatParams("Stream me a story.", 1)
	params.MaxTokens = openai.Int(20)

	buyer, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	gw := env.Coordinator().Gateway
	stream := func() error {
		s := client.Chat.Completions.NewStreaming(context.Background(), params)
		defer s.Close()
		for s.Next() {
		}
		return s.Err()
	}
	// The requests admitted and the jobs running, watched all along. (A client cannot tell:
	// its stream ends for it only after the server, having written the end, has freed the
	// slot for another.)
	stop := make(chan struct{})
	watched := make(chan [2]int)
	go func() {
		var most [2]int
		for {
			select {
			case <-stop:
				watched <- most
				return
			default:
			}
			c, _ := env.Running()
			most = [2]int{max(most[0], gw.RateLimitInFlight(buyer.ID)), max(most[1], c)}
			time.Sleep(time.Millisecond)
		}
	}()

	var (
		wg      sync.WaitGroup
		refused atomic.Int64
		retried atomic.Int64
	)
	for range 20 {
		wg.Go(func() {
			err := stream()
			if err == nil {
				return
			}
			e := rateLimited(t, err, "requests")
			if e.Response.Header.Get("Retry-After") != "1" || !strings.Contains(e.Message, "concurrent requests") {
				t.Errorf("429 %q, Retry-After %q; want the concurrent limit's, retry after 1 s", e.Message, e.Response.Header.Get("Retry-After"))
			}
			refused.Add(1)
			// The gate opens once all seventeen were refused; then retry until a slot frees.
			<-eng.gate
			for {
				retried.Add(1)
				if err := stream(); err == nil {
					return
				} else if e, ok := errors.AsType[*openai.Error](err); !ok || e.StatusCode != http.StatusTooManyRequests {
					t.Errorf("retry: %v", err)
					return
				}
				time.Sleep(5 * time.Millisecond) // a client's backoff
			}
		})
	}
	env.WaitFor("17 refused while 3 run", func() bool {
		c, _ := env.Running()
		return refused.Load() == 17 && c == 3 && gw.RateLimitInFlight(buyer.ID) == 3
	})
	eng.open()
	wg.Wait()
	close(stop)
	if most := <-watched; most[0] > 3 || most[1] > 3 {
		t.Errorf("up to %d requests admitted and %d jobs at once, want at most 3", most[0], most[1])
	}
	if retried.Load() < 17 {
		t.Errorf("%d retries, want every refused stream served on a retry", retried.Load())
	}
	// A handler gives its ticket back just after its answer's last byte reaches the buyer.
	env.WaitFor("no rate limit entry once every stream ended", func() bool { return env.Coordinator().Gateway.RateLimitEntries() == 0 })
}

// A key's own limits override the coordinator's defaults; a key whose limit is negative is
// not limited; a key with none takes the defaults.
func TestLimits_KeyOverridesDefaults(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Gateway.Limits = store.RateLimits{RequestsPerMinute: 2} })
	tests := []struct {
		name   string
		secret string
		served int // before the first 429; -1: never refused
	}{
		{"defaults", env.APIKey, 2},
		{"own limit", limitedKey(t, env, store.RateLimits{RequestsPerMinute: 4}), 4},
		{"no limit", limitedKey(t, env, store.RateLimits{RequestsPerMinute: -1}), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := env.Client(option.WithAPIKey(tt.secret))
			for i := range 8 {
				var resp *http.Response
				_, err := client.Chat.Completions.New(context.Background(), chatParams("hi", 1), option.WithResponseInto(&resp))
				switch {
				case i < tt.served || tt.served < 0:
					if err != nil {
						t.Fatalf("request %d: %v; want served", i, err)
					}
					if tt.served < 0 && resp.Header.Get("X-Ratelimit-Limit-Requests") != "" {
						t.Errorf("unlimited key got x-ratelimit headers: %v", resp.Header)
					}
				case i == tt.served:
					rateLimited(t, err, "requests")
					return
				}
			}
		})
	}
}

// Without limits, however many requests come at once, none is refused, none carries rate
// limit headers, and nothing is kept.
func TestLimits_UnlimitedKey(t *testing.T) {
	env := testenv.New(t)
	client := env.Client()
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			var resp *http.Response
			if _, err := client.Chat.Completions.New(context.Background(), chatParams("hi", int64(i)), option.WithResponseInto(&resp)); err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			for h := range resp.Header {
				if strings.HasPrefix(strings.ToLower(h), "x-ratelimit") {
					t.Errorf("header %s on an unlimited key", h)
				}
			}
		})
	}
	wg.Wait()
	if n := env.Coordinator().Gateway.RateLimitEntries(); n != 0 {
		t.Errorf("%d rate limit entries, want 0", n)
	}
}

// max_tokens above the coordinator's ceiling, or above the model's context, is a 400 on the
// parameter, streaming or not, for chat and completions alike.
func TestLimits_MaxTokensCeiling(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Gateway.MaxTokensLimit = 9000 })
	const qwen = "sim/qwen-2.5-7b" // context 32768; the llama's is 8192
	tests := []struct {
		name    string
		path    string
		body    string
		param   string
		asked   int
		ceiling int // 0: accepted
	}{
		{"chat", "/chat/completions", `{"model":"` + qwen + `","messages":[{"role":"user","content":"hi"}],"max_tokens":9001}`, "max_tokens", 9001, 9000},
		{"chat stream", "/chat/completions", `{"model":"` + qwen + `","messages":[{"role":"user","content":"hi"}],"max_tokens":9001,"stream":true}`, "max_tokens", 9001, 9000},
		{"max_completion_tokens", "/chat/completions", `{"model":"` + qwen + `","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100000}`, "max_completion_tokens", 100000, 9000},
		{"completion stream", "/completions", `{"model":"` + qwen + `","prompt":"hi","max_tokens":9001,"stream":true}`, "max_tokens", 9001, 9000},
		{"model's context", "/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":8193}`, "max_tokens", 8193, 8192},
		{"at the ceiling", "/chat/completions", `{"model":"` + qwen + `","messages":[{"role":"user","content":"hi"}],"max_tokens":9000}`, "", 9000, 0},
		{"at the context", "/completions", `{"model":"` + model + `","prompt":"hi","max_tokens":8192}`, "", 8192, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := env.Post(tt.path, tt.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tt.ceiling == 0 {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s; want 200", resp.StatusCode, b)
				}
				return
			}
			var e struct {
				Error struct{ Type, Param, Message string }
			}
			json.Unmarshal(b, &e)
			want := fmt.Sprintf("%s is too large: %d. This model supports at most %d completion tokens, whereas you provided %d.", tt.param, tt.asked, tt.ceiling, tt.asked)
			if resp.StatusCode != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Param != tt.param || e.Error.Message != want {
				t.Errorf("%d %s; want 400 invalid_request_error on %s: %q", resp.StatusCode, b, tt.param, want)
			}
		})
	}
	// The SDK sees it too, and a stream fails before it starts.
	params := chatParamsFor(qwen, "hi", 1)
	params.MaxTokens = openai.Int(100_000)
	client := env.Client()
	s := client.Chat.Completions.NewStreaming(context.Background(), params)
	for s.Next() {
	}
	assertAPIError(t, s.Err(), http.StatusBadRequest, "invalid_value")
}

// A request without max_tokens reserves its prompt only: a key whose token limit is below the
// default completion bound (4096) is not refused outright, and what its answers were billed
// counts against the limit.
func TestLimits_TokensPerMinuteWithoutMaxTokens(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Gateway.Limits = store.RateLimits{TokensPerMinute: 1000} })
	resp := env.Post("/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"No max_tokens here."}]}`, model))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s; want the request served under a 1,000-token limit", resp.StatusCode, body)
	}
	var got struct {
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	json.Unmarshal(body, &got)
	buyer, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	env.WaitFor("its reservation given back", func() bool { return env.Coordinator().Gateway.RateLimitReserved(buyer.ID) == 0 })
	resp = env.Post("/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"No max_tokens here."}]}`, model))
	resp.Body.Close()
	if left, want := resp.Header.Get("X-Ratelimit-Remaining-Tokens"), 1000-got.Usage.TotalTokens-ledger.EstimateTokens(len(`[{"role":"user","content":"No max_tokens here."}]`)); left != strconv.Itoa(want) {
		t.Errorf("x-ratelimit-remaining-tokens %s after one answer of %d tokens; want %d", left, got.Usage.TotalTokens, want)
	}
}
