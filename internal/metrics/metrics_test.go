package metrics_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// families scrapes a metrics handler as Prometheus does and parses what it serves.
func families(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// sample is the sum of the series of a family whose labels include want: a counter's or
// gauge's value, a histogram's count. A family that is absent sums to 0.
func sample(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// delta is how much a sample grew between two scrapes.
func delta(before, after map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	return sample(after, name, labels...) - sample(before, name, labels...)
}

func TestCoordinatorMetrics_PresentAndMovingAfterTraffic(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Regions = []string{"de", "us"}
		c.Sim = sim.Config{TokensPerSecond: 2000}
	})
	coord := env.Coordinator()
	before := families(t, coord.MetricsHandler())
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines", "go_memstats_heap_inuse_bytes", "shareai_nodes", "shareai_jobs_running",
		"shareai_requests_in_flight", "shareai_streams_active", "shareai_holds_open", "shareai_spend_usd_total"} {
		if before[name] == nil {
			t.Errorf("%s is not served before any traffic", name)
		}
	}
	if got := sample(before, "shareai_nodes", "state", "available", "level", "verified"); got != 2 {
		t.Errorf("shareai_nodes{state=available,level=verified} = %v, want the 2 connected nodes", got)
	}
	if got := sample(before, "shareai_nodes", "region", "de"); got != 1 {
		t.Errorf("shareai_nodes{region=de} = %v, want 1", got)
	}

	ctx := context.Background()
	client := env.Client()
	const model = "sim/llama-3.1-8b"
	var prompt, completion int64
	for range 3 {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count the metrics.")},
		})
		if err != nil {
			t.Fatal(err)
		}
		prompt, completion = prompt+resp.Usage.PromptTokens, completion+resp.Usage.CompletionTokens
	}
	for range 2 {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stream the metrics.")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		for stream.Next() {
			if u := stream.Current().Usage; u.TotalTokens > 0 {
				prompt, completion = prompt+u.PromptTokens, completion+u.CompletionTokens
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "no/such-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}); err == nil {
		t.Fatal("a model no node serves was served")
	}
	resp := env.Post("/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"provider":{"regions":["jp"]}}`, model))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a region no node is in: %d, want 503", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL()+"/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer sk-not-a-key")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Bills settle after the answers end: wait for the holds to close.
	var after map[string]*dto.MetricFamily
	testenv.WaitFor(t, "every hold settled", func() bool {
		after = families(t, coord.MetricsHandler())
		return sample(after, "shareai_holds_open") == 0 && delta(before, after, "shareai_settlements_total", "result", "settled") == 5
	})

	counts := []struct {
		labels []string
		want   float64
	}{
		{[]string{"endpoint", "chat", "model", model, "outcome", "ok"}, 5},
		{[]string{"outcome", "not_found", "model", ""}, 1},
		{[]string{"outcome", "no_provider"}, 1},
		{[]string{"outcome", "unauthorized"}, 1},
	}
	for _, c := range counts {
		if got := delta(before, after, "shareai_requests_total", c.labels...); got != c.want {
			t.Errorf("shareai_requests_total%v grew by %v, want %v", c.labels, got, c.want)
		}
	}
	if got := delta(before, after, "shareai_request_duration_seconds", "model", model); got != 5 {
		t.Errorf("duration histogram counted %v requests, want 5", got)
	}
	if got := delta(before, after, "shareai_time_to_first_token_seconds", "model", model); got != 5 {
		t.Errorf("time-to-first-token histogram counted %v requests, want 5", got)
	}
	if got := delta(before, after, "shareai_tokens_total", "model", model, "direction", "input"); got != float64(prompt) {
		t.Errorf("input tokens grew by %v, want the %d the answers' usage reported", got, prompt)
	}
	if got := delta(before, after, "shareai_tokens_total", "model", model, "direction", "output"); got != float64(completion) {
		t.Errorf("output tokens grew by %v, want the %d the answers' usage reported", got, completion)
	}
	if got := delta(before, after, "shareai_match_decisions_total", "result", "matched"); got != 5 {
		t.Errorf("matched decisions grew by %v, want 5", got)
	}
	if got := delta(before, after, "shareai_no_provider_nodes_total", "reason", "outside region"); got != 2 {
		t.Errorf("nodes refused as outside the region grew by %v, want the 2 nodes", got)
	}
	if got := delta(before, after, "shareai_holds_total", "result", "placed"); got != 5 {
		t.Errorf("holds placed grew by %v, want 5", got)
	}
	spend, fees, earned := delta(before, after, "shareai_spend_usd_total"), delta(before, after, "shareai_fees_usd_total"), delta(before, after, "shareai_provider_earnings_usd_total")
	if spend <= 0 || math.Abs(spend-fees-earned) > 1e-12 || math.Abs(fees/spend-0.05/1.05) > 1e-2 {
		t.Errorf("spend %v, fees %v, earnings %v: want spend = fees + earnings, fees 5%% over the asks (rounded per request)", spend, fees, earned)
	}
	if got := sample(after, "shareai_streams_active") + sample(after, "shareai_requests_in_flight"); got != 0 {
		t.Errorf("%v requests still counted in flight after every answer ended", got)
	}

	// The agents count the jobs they ran.
	var jobs, engineTTFT float64
	for _, a := range env.Agents {
		fams := families(t, a.MetricsHandler())
		jobs += sample(fams, "shareai_agent_jobs_total", "model", model, "outcome", "ok")
		engineTTFT += sample(fams, "shareai_engine_time_to_first_token_seconds", "model", model)
		if got := sample(fams, "shareai_agent_connected"); got != 1 {
			t.Errorf("agent %s: shareai_agent_connected = %v, want 1", a.NodeID(), got)
		}
	}
	if jobs != 5 || engineTTFT != 5 {
		t.Errorf("the agents counted %v jobs and %v first tokens, want 5 each", jobs, engineTTFT)
	}
}

func TestCoordinatorMetrics_CountFailovers(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Healthy = 1
		c.Agent.Chaos = agent.Chaos{Drop: 1}
		c.Sim = sim.Config{TokensPerSecond: 500}
	})
	coord := env.Coordinator()
	dropper := env.Agents[0].NodeID() // all but the last Healthy agents drop mid-answer
	before := families(t, coord.MetricsHandler())
	resp := env.Post("/chat/completions", fmt.Sprintf(`{"model":"sim/llama-3.1-8b","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"A long answer, please."}],"provider":{"order":[%q]}}`, dropper))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("the answer did not end whole: %d %s", resp.StatusCode, body)
	}
	after := families(t, coord.MetricsHandler())
	if got := delta(before, after, "shareai_failovers_total", "stage", "mid_stream"); got != 1 {
		t.Errorf("mid-stream failovers grew by %v, want 1", got)
	}
	if got := delta(before, after, "shareai_requests_total", "outcome", "ok"); got != 1 {
		t.Errorf("requests ok grew by %v, want the 1 answer continued on the other node", got)
	}
}

func TestAgentMetrics_GPUTelemetry(t *testing.T) {
	util, temp, power := 37.0, 64.0, 412.5
	used, total := int64(81_920), int64(143_771)
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.EachAgent = func(i int, c *agent.Config) {
			c.Hardware.GPUs = []protocol.GPU{{Index: 0, Vendor: "nvidia", Name: "NVIDIA H200", UUID: "GPU-5f2a", VRAMMiB: total}}
			c.CheckEvery = 20 * time.Millisecond
			c.Telemetry = func(context.Context) (*protocol.Telemetry, error) {
				return &protocol.Telemetry{GPUs: []protocol.GPUStat{{Index: 0, UtilizationPct: &util, TemperatureC: &temp, PowerW: &power,
					MemoryUsedMiB: &used, MemoryTotalMiB: &total}}, Processes: []protocol.GPUProcess{}}, nil
			}
		}
	})
	a := env.Agents[0]
	var fams map[string]*dto.MetricFamily
	testenv.WaitFor(t, "a GPU reading in the agent's metrics", func() bool {
		fams = families(t, a.MetricsHandler())
		return fams["shareai_gpu_utilization_ratio"] != nil
	})
	gpu := []string{"gpu", "0", "uuid", "GPU-5f2a", "name", "NVIDIA H200"}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"shareai_gpu_utilization_ratio", 0.37},
		{"shareai_gpu_temperature_celsius", 64},
		{"shareai_gpu_power_watts", 412.5},
		{"shareai_gpu_memory_used_bytes", 81_920 << 20},
		{"shareai_gpu_memory_total_bytes", 143_771 << 20},
	} {
		if got := sample(fams, c.name, gpu...); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if fams["shareai_gpu_power_limit_watts"] != nil {
		t.Error("a power limit the tool did not read is served as a sample")
	}
	if got := sample(fams, "shareai_gpu_foreign_processes"); got != 0 {
		t.Errorf("foreign processes = %v, want 0", got)
	}
}

func TestCoordinatorMetrics_CountRateLimits(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Gateway.Limits = store.RateLimits{RequestsPerMinute: 2} })
	before := families(t, env.Coordinator().MetricsHandler())
	for i := range 3 {
		resp := env.Post("/chat/completions", `{"model":"sim/llama-3.1-8b","messages":[{"role":"user","content":"hi"}]}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 429}[i < 2]; resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	after := families(t, env.Coordinator().MetricsHandler())
	if got := delta(before, after, "shareai_rate_limited_total", "limit", "requests"); got != 1 {
		t.Errorf("rate-limited requests grew by %v, want 1", got)
	}
	if got := delta(before, after, "shareai_requests_total", "outcome", "rate_limited"); got != 1 {
		t.Errorf("requests_total{outcome=rate_limited} grew by %v, want 1", got)
	}
}

// TestCoordinatorMetrics_SlotTime counts slot-time only of nodes open for jobs: with one of
// two nodes paused (outside its windows, as its owner would), the free slot-time grows by the
// open node's slots alone, and no batch slot-time is counted without batches.
func TestCoordinatorMetrics_SlotTime(t *testing.T) {
	const slots, model = 8, "sim/llama-3.1-8b"
	env := testenv.New(t, func(c *testenv.Config) { c.Agent.MaxConcurrent = slots })
	f := env.Coordinator().Fleet
	env.Agents[1].Pause()
	env.WaitFor("the node paused", func() bool { return f.OpenSlots()[model].Free == slots })
	if got := f.OpenSlots()[model]; got.Busy != 0 || got.Free != slots {
		t.Fatalf("open slots %+v, want %d free: the paused node's are not open", got, slots)
	}

	h := env.Coordinator().MetricsHandler()
	before, start := families(t, h), time.Now()
	time.Sleep(time.Second)
	after, elapsed := families(t, h), time.Since(start).Seconds()
	free := delta(before, after, "shareai_slot_seconds_total", "model", model, "state", "free")
	// Sampled every 20ms: each scrape sees the counter up to a sample behind the clock, more
	// when the machine is busy; a node counted twice, or the paused one, would be 2×.
	if lo, hi := slots*(elapsed-0.3), slots*(elapsed+0.3); free < lo || free > hi {
		t.Errorf("free slot-seconds grew by %.2f in %.2fs, want %d slots' worth (%.2f..%.2f)", free, elapsed, slots, lo, hi)
	}
	if busy := delta(before, after, "shareai_slot_seconds_total", "model", model, "state", "busy"); busy != 0 {
		t.Errorf("busy slot-seconds grew by %v with no request running", busy)
	}
	if batch := delta(before, after, "shareai_batch_slot_seconds_total", "model", model); batch != 0 {
		t.Errorf("batch slot-seconds grew by %v with no batch", batch)
	}
}
