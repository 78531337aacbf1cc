package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/testenv"
)

const (
	model  = "sim/llama-3.1-8b"
	prompt = "Tell me about lighthouses."
)

// oneUsage is what one request of a run costs in tokens, asked with the OpenAI SDK.
func oneUsage(t *testing.T, env *testenv.Env, maxTokens int) openai.CompletionUsage {
	t.Helper()
	client := env.Client()
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens: openai.Int(int64(maxTokens)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Usage
}

func TestBench_Run(t *testing.T) {
	env := testenv.New(t)
	const n, maxTokens = 40, 12
	u := oneUsage(t, env, maxTokens)
	if u.CompletionTokens != maxTokens {
		t.Fatalf("one request: %d completion tokens, want %d (the sim's answer is longer)", u.CompletionTokens, maxTokens)
	}
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "json"}[stream], func(t *testing.T) {
			rep, err := bench.Run(context.Background(), bench.Config{
				BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Requests: n, Concurrency: 6,
				Stream: stream, MaxTokens: maxTokens, Prompt: prompt,
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK != n || rep.Failed != 0 || rep.Requests != n || rep.Interrupted || len(rep.Errors) != 0 {
				t.Fatalf("ok %d, failed %d, requests %d, interrupted %v, errors %+v; want %d ok and nothing else", rep.OK, rep.Failed, rep.Requests, rep.Interrupted, rep.Errors, n)
			}
			if got, want := rep.OutputTokens, n*u.CompletionTokens; got != want {
				t.Errorf("output tokens = %d, want %d (%d × usage.completion_tokens)", got, want, n)
			}
			if got, want := rep.InputTokens, n*u.PromptTokens; got != want {
				t.Errorf("input tokens = %d, want %d", got, want)
			}
			if rep.UsageMissing != 0 {
				t.Errorf("usage missing in %d answers", rep.UsageMissing)
			}
			if rep.Latency.N != n || rep.Latency.P50 <= 0 || rep.Latency.Max < rep.Latency.P99 || rep.Latency.P99 < rep.Latency.P50 {
				t.Errorf("latency %+v: want %d ordered samples", rep.Latency, n)
			}
			if rep.RequestsPerSecond <= 0 || rep.OutputTokensPerSecond <= 0 || rep.WallSeconds <= 0 {
				t.Errorf("rates %v req/s, %v tokens/s over %vs", rep.RequestsPerSecond, rep.OutputTokensPerSecond, rep.WallSeconds)
			}
			if stream {
				if rep.TTFT == nil || rep.TTFT.N != n || rep.TTFT.Max > rep.Latency.Max {
					t.Errorf("ttft %+v: want %d samples, none above the latency", rep.TTFT, n)
				}
			} else if rep.TTFT != nil || rep.StreamTokensPerSecond != nil {
				t.Errorf("not streamed, yet ttft %+v and stream rate %+v", rep.TTFT, rep.StreamTokensPerSecond)
			}
			if rep.Concurrency != 6 || rep.Planned != n || rep.Stream != stream || rep.Model != model {
				t.Errorf("report settings %+v", rep)
			}
		})
	}
}

func TestBench_Errors(t *testing.T) {
	env := testenv.New(t)
	tests := []struct {
		name, key, model string
		status           int
		code             string
	}{
		{"unknown model", env.APIKey, "no/such-model", 404, "model_not_found"},
		{"bad key", "sk-not-a-key", model, 401, "invalid_api_key"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{true, false} {
			t.Run(tt.name+map[bool]string{true: "/stream", false: "/json"}[stream], func(t *testing.T) {
				rep, err := bench.Run(context.Background(), bench.Config{
					BaseURL: env.BaseURL(), APIKey: tt.key, Model: tt.model, Requests: 9, Concurrency: 3,
					Stream: stream, MaxTokens: 4, Prompt: prompt,
				})
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK != 0 || rep.Failed != 9 {
					t.Errorf("ok %d, failed %d; want 0 and 9", rep.OK, rep.Failed)
				}
				if len(rep.Errors) != 1 {
					t.Fatalf("errors %+v; want one group", rep.Errors)
				}
				if g := rep.Errors[0]; g.Status != tt.status || g.Code != tt.code || g.Count != 9 || g.Message == "" {
					t.Errorf("error group %+v; want 9× %d %s with a message", g, tt.status, tt.code)
				}
				if rep.Latency.N != 0 || rep.TTFT != nil {
					t.Errorf("failed requests timed: latency %+v, ttft %+v", rep.Latency, rep.TTFT)
				}
			})
		}
	}
}

// TestBench_Busy runs more requests at once than the network has slots and its queue places:
// the rest get 503s, counted beside the answers.
func TestBench_Busy(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 100}
		c.Coordinator.Core.Queue = queue.Config{Length: 1}
	})
	rep, err := bench.Run(context.Background(), bench.Config{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Requests: 12, Concurrency: 4,
		Stream: true, MaxTokens: 5, Prompt: prompt,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK == 0 || rep.Failed == 0 || rep.OK+rep.Failed != 12 || rep.Requests != 12 {
		t.Fatalf("ok %d, failed %d, requests %d; want both, 12 in all", rep.OK, rep.Failed, rep.Requests)
	}
	if len(rep.Errors) != 1 || rep.Errors[0].Status != 503 || rep.Errors[0].Code != "no_provider_available" || rep.Errors[0].Count != rep.Failed {
		t.Errorf("errors %+v; want %d× 503 no_provider_available", rep.Errors, rep.Failed)
	}
	if rep.Latency.N != rep.OK || rep.TTFT.N != rep.OK {
		t.Errorf("%d latencies and %d ttfts for %d answers", rep.Latency.N, rep.TTFT.N, rep.OK)
	}
}

// TestBench_NoServer counts requests that get no answer at all.
func TestBench_NoServer(t *testing.T) {
	rep, err := bench.Run(context.Background(), bench.Config{
		BaseURL: "http://127.0.0.1:1/v1", APIKey: "sk-x", Model: model, Requests: 5, Concurrency: 2, MaxTokens: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 5 || len(rep.Errors) != 1 || rep.Errors[0].Code != bench.CodeNetwork || rep.Errors[0].Status != 0 {
		t.Errorf("failed %d, errors %+v; want 5 network errors", rep.Failed, rep.Errors)
	}
}

func TestBench_Duration(t *testing.T) {
	env := testenv.New(t)
	rep, err := bench.Run(context.Background(), bench.Config{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Duration: 200 * time.Millisecond, Concurrency: 4,
		Stream: true, MaxTokens: 4, Prompt: prompt,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK == 0 || rep.Failed != 0 || rep.Planned != 0 || rep.Interrupted || rep.WallSeconds < 0.2 {
		t.Errorf("ok %d, failed %d, planned %d, interrupted %v, wall %vs; want some requests in at least 0.2s", rep.OK, rep.Failed, rep.Planned, rep.Interrupted, rep.WallSeconds)
	}
}

// cancelAfter cancels a run once n requests are done.
type cancelAfter struct {
	n       int64
	cancel  context.CancelFunc
	updates int
	last    bench.Snapshot
}

func (c *cancelAfter) Update(s bench.Snapshot) {
	c.updates++
	if s.Done >= c.n {
		c.cancel()
	}
}
func (c *cancelAfter) Done(s bench.Snapshot) { c.last = s }

func TestBench_Interrupted(t *testing.T) {
	// 40 tokens a second, 8 tokens each: a request takes 0.2s, 1000 of them 100s.
	env := testenv.New(t, func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 40} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &cancelAfter{n: 3, cancel: cancel}
	rep, err := bench.Run(ctx, bench.Config{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Requests: 1000, Concurrency: 2,
		Stream: true, MaxTokens: 8, Prompt: prompt, Progress: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.OK < 3 || rep.Requests >= 1000 || rep.Failed != 0 || rep.Cancelled > 2 {
		t.Errorf("interrupted %v, ok %d, requests %d, failed %d, cancelled %d; want an interrupted run with at least 3 ok, no failure and at most 2 cancelled",
			rep.Interrupted, rep.OK, rep.Requests, rep.Failed, rep.Cancelled)
	}
	if p.last.Done != int64(rep.Requests) || p.updates == 0 {
		t.Errorf("progress: %d updates, last %+v; report has %d requests", p.updates, p.last, rep.Requests)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "INTERRUPTED") {
		t.Errorf("text report does not say it was interrupted:\n%s", text.String())
	}
}

func TestBench_FirstModel(t *testing.T) {
	env := testenv.New(t)
	got, err := bench.FirstModel(context.Background(), bench.NewClient(1), env.BaseURL(), env.APIKey)
	if err != nil || !strings.HasPrefix(got, "sim/") {
		t.Errorf("FirstModel = %q, %v; want a sim/ model", got, err)
	}
	if _, err := bench.FirstModel(context.Background(), bench.NewClient(1), env.BaseURL(), "sk-bad"); err == nil || !strings.Contains(err.Error(), "invalid_api_key") {
		t.Errorf("FirstModel with a bad key: %v; want invalid_api_key", err)
	}
}

func TestBench_BaseURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1"},
		{"https://api.example.com/proxy/v1", "https://api.example.com/proxy/v1"},
		{" https://api.example.com ", "https://api.example.com/v1"},
	}
	for _, tt := range tests {
		if got, err := bench.BaseURL(tt.in); err != nil || got != tt.want {
			t.Errorf("BaseURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://x/v1", "http://"} {
		if got, err := bench.BaseURL(bad); err == nil {
			t.Errorf("BaseURL(%q) = %q; want an error", bad, got)
		}
	}
}

func TestBench_Percentiles(t *testing.T) {
	var hundred []float64
	for i := 100; i >= 1; i-- { // not sorted
		hundred = append(hundred, float64(i))
	}
	tests := []struct {
		name    string
		samples []float64
		want    bench.Percentiles
	}{
		{"1..100", hundred, bench.Percentiles{N: 100, Mean: 50.5, P50: 50, P90: 90, P99: 99, Max: 100}},
		{"ten", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, bench.Percentiles{N: 10, Mean: 5.5, P50: 5, P90: 9, P99: 10, Max: 10}},
		{"one", []float64{7}, bench.Percentiles{N: 1, Mean: 7, P50: 7, P90: 7, P99: 7, Max: 7}},
		{"skewed", []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1000}, bench.Percentiles{N: 10, Mean: 100.9, P50: 1, P90: 1, P99: 1000, Max: 1000}},
		{"none", nil, bench.Percentiles{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bench.NewPercentiles(tt.samples); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBench_Report(t *testing.T) {
	env := testenv.New(t)
	rep, err := bench.Run(context.Background(), bench.Config{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Requests: 10, Concurrency: 2,
		Stream: true, MaxTokens: 8, Prompt: prompt,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep.Errors = append(rep.Errors, bench.ErrorGroup{Status: 503, Code: "no_provider_available", Type: "service_unavailable_error", Message: "All 2 nodes are busy.", Count: 3})
	t.Run("json", func(t *testing.T) {
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var got bench.Report
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, rep) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, *rep)
		}
		for _, field := range []string{`"ok":10`, `"latency_ms":{`, `"ttft_ms":{`, `"p99":`, `"output_tokens_per_second":`, `"requests_per_second":`, `"concurrency":2`, `"errors":[{"status":503`} {
			if !bytes.Contains(b, []byte(field)) {
				t.Errorf("JSON has no %s: %s", field, b)
			}
		}
	})
	t.Run("text", func(t *testing.T) {
		var b strings.Builder
		if err := rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		text := b.String()
		for _, want := range []string{model, "10 ok, 0 failed", "req/s", "80 out", "tokens/s", "latency", "ttft", "p50", "p99", "concurrency 2",
			"503 no_provider_available: All 2 nodes are busy."} {
			if !strings.Contains(text, want) {
				t.Errorf("text report has no %q:\n%s", want, text)
			}
		}
	})
}

func TestBench_Line(t *testing.T) {
	tests := []struct {
		s    bench.Snapshot
		want string
	}{
		{bench.Snapshot{Done: 500, Failed: 3, Total: 1000, Elapsed: time.Second},
			"[===============>              ] 500/1000   50%  500 req/s  3 errors  eta 1s"},
		{bench.Snapshot{Done: 1000, Failed: 1, Total: 1000, Elapsed: 2 * time.Second},
			"[==============================] 1000/1000  100%  500 req/s  1 error  eta 0s"},
		{bench.Snapshot{Done: 90, Elapsed: 3 * time.Second, Duration: 10 * time.Second},
			"[=========>                    ] 3s/10s  90 done  30 req/s  0 errors  eta 7s"},
		{bench.Snapshot{Holding: true, Done: 12, Failed: 2, Total: 40, Elapsed: time.Second},
			"[=========>                    ] 10/40 streams opened  2 errors"},
	}
	for _, tt := range tests {
		if got := bench.Line(tt.s); got != tt.want {
			t.Errorf("Line(%+v)\n got %q\nwant %q", tt.s, got, tt.want)
		}
	}
	var b strings.Builder
	bar := bench.NewBar(&b, true)
	bar.Update(tests[0].s)
	bar.Done(tests[1].s)
	if want := "\r" + tests[0].want + "\033[K\r" + tests[1].want + "\033[K\n"; b.String() != want {
		t.Errorf("terminal bar wrote %q, want %q", b.String(), want)
	}
	b.Reset()
	bar = bench.NewBar(&b, false)
	for i := range 12 {
		bar.Update(bench.Snapshot{Done: int64(i), Total: 100, Elapsed: time.Duration(i) * time.Second})
	}
	bar.Done(bench.Snapshot{Done: 100, Total: 100, Elapsed: 12 * time.Second})
	if lines := strings.Count(b.String(), "\n"); lines != 2 || strings.Contains(b.String(), "\r") {
		t.Errorf("off a terminal, 12s of updates wrote %d lines (want 2, one each 5s, no \\r):\n%s", lines, b.String())
	}
}
