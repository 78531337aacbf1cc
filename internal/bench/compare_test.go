package bench_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/openaicompat"
	"github.com/shareai/shareai/internal/testenv"
)

// cpuCounter is a process's CPU as a fake counts it, in nanoseconds.
type cpuCounter struct{ ns atomic.Int64 }

func (c *cpuCounter) add(us float64)               { c.ns.Add(int64(us * 1000)) }
func (c *cpuCounter) read() (time.Duration, error) { return time.Duration(c.ns.Load()), nil }

// metrics serves the counter as client_golang's process collector would.
func (c *cpuCounter) metrics() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", float64(c.ns.Load())/1e9)
	}))
}

// costing is the mock upstream, charging each chat completion to the counters before it
// answers.
func costing(charge func()) *httptest.Server {
	mock := bench.Mock()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			charge()
		}
		mock.ServeHTTP(w, r)
	}))
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-3 }

// TestCompare_Counts runs a comparison against two fakes whose every answer costs known CPU,
// in this process, the upstream and the network's processes, and checks each figure: the
// warm-up left out, each meter divided by the answers, the try with the least added CPU
// reported, and the text report saying so.
func TestCompare_Counts(t *testing.T) {
	var self, upstream, remote cpuCounter
	up, rem := upstream.metrics(), remote.metrics()
	defer up.Close()
	defer rem.Close()
	var try atomic.Int64
	networkCost := []float64{600, 550, 580} // the network's processes, per try
	direct := costing(func() { self.add(50); upstream.add(30) })
	defer direct.Close()
	network := costing(func() { self.add(100); upstream.add(30); remote.add(networkCost[try.Load()-1]) })
	defer network.Close()

	cfg := bench.CompareConfig{
		Load:            bench.Config{Requests: 20, Concurrency: 2, Stream: true, MaxTokens: 64},
		Direct:          bench.Target{BaseURL: direct.URL + "/v1", Model: bench.MockModel, About: "the fake upstream"},
		Network:         bench.Target{BaseURL: network.URL + "/v1", APIKey: "sk-x", Model: bench.MockModel, About: "the fake network"},
		Tries:           3,
		NetworkMetrics:  []string{rem.URL},
		UpstreamMetrics: up.URL,
		CPU:             self.read,
		Starting: func(path string, n int) {
			if path == bench.PathDirect {
				try.Store(int64(n))
			}
		},
	}
	c, err := bench.Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || !near(*got, want) {
			t.Errorf("%s = %v, want %v µs per request", name, got, want)
		}
	}
	check("direct, this process", &c.Direct.ThisProcess, 50)
	check("direct, upstream", c.Direct.Upstream, 30)
	check("direct, all", &c.Direct.CPU, 80)
	if c.Direct.Remote != nil {
		t.Errorf("the direct path counts the network's processes: %v", *c.Direct.Remote)
	}
	check("network, this process", &c.Network.ThisProcess, 100)
	check("network, upstream", c.Network.Upstream, 30)
	check("network, its processes", c.Network.Remote, 550)
	check("network, all", &c.Network.CPU, 680)
	check("added", &c.AddedCPU, 600)
	check("ratio", &c.Ratio, 8.5)
	if c.Try != 2 || len(c.Tries) != 3 || !near(c.Tries[0], 650) || !near(c.Tries[1], 600) || !near(c.Tries[2], 630) {
		t.Errorf("try %d of %v; want try 2 of [650 600 630]", c.Try, c.Tries)
	}
	for _, r := range []*bench.Report{c.Direct.Report, c.Network.Report} {
		if r.OK != 20 || r.Failed != 0 || r.TTFT == nil || r.OutputTokens != 20*bench.MockChunks {
			t.Errorf("%s: %d ok, %d failed, ttft %v, %d tokens; want 20 streams of %d chunks", r.URL, r.OK, r.Failed, r.TTFT, r.OutputTokens, bench.MockChunks)
		}
	}
	if c.Note != "" {
		t.Errorf("note %q, though both paths answered alike", c.Note)
	}
	if c.Machine != bench.MachineClass() || c.Requests != 20 || c.Concurrency != 2 || !c.Stream || c.Model != bench.MockModel {
		t.Errorf("comparison of %+v", c)
	}
	var b strings.Builder
	if err := c.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mock: streamed, max_tokens 64, concurrency 2, 20 requests a path; try 2 of 3",
		"machine: " + bench.MachineClass(), "the fake upstream", "the fake network",
		"80 µs", "680 µs", "ttft p50", "network/direct 8.5×: the network added 600 µs of CPU per request",
		"the upstream's own CPU: 30 µs per request; the network added 20.0× that", "the network's processes: 550 µs per request",
		"added CPU per try: 650, 600, 630 µs", "process_cpu_seconds_total of 1 endpoints"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, b.String())
		}
	}

	// Enough ends the tries at the first one it accepts.
	var told []float64
	cfg.Enough = func(best *bench.Comparison) bool {
		told = append(told, best.AddedCPU)
		return best.AddedCPU < 620
	}
	c, err = bench.Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tries) != 2 || c.Try != 2 || len(told) != 2 || !near(told[0], 650) || !near(told[1], 600) {
		t.Errorf("with Enough: try %d of %v, Enough told %v; want it to stop after try 2", c.Try, c.Tries, told)
	}
}

// WarmUp sends its requests through the network alone, every one answered; a network that
// fails them is an error.
func TestCompareConfig_WarmUp(t *testing.T) {
	var direct, network atomic.Int64
	up := costing(func() { direct.Add(1) })
	defer up.Close()
	via := costing(func() { network.Add(1) })
	defer via.Close()
	cfg := bench.CompareConfig{
		Load:    bench.Config{Requests: 5, Concurrency: 3, MaxTokens: 8},
		Direct:  bench.Target{BaseURL: up.URL + "/v1", Model: bench.MockModel},
		Network: bench.Target{BaseURL: via.URL + "/v1", APIKey: "sk-x", Model: bench.MockModel},
	}
	if err := cfg.WarmUp(context.Background(), 17); err != nil {
		t.Fatal(err)
	}
	if network.Load() != 17 || direct.Load() != 0 {
		t.Errorf("a warm-up of 17: %d requests through the network, %d direct; want 17 and 0", network.Load(), direct.Load())
	}
	c, err := bench.Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Warm = 17
	var text strings.Builder
	if err := c.WriteText(&text); err != nil || !strings.Contains(text.String(), "5 requests a path, after 17 through the network") ||
		!strings.HasSuffix(c.Scenario(), " warm=17") {
		t.Errorf("the report of a comparison after a warm-up (%q), %v:\n%s", c.Scenario(), err, text.String())
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"no"}}`, http.StatusServiceUnavailable)
	}))
	defer down.Close()
	cfg.Network.BaseURL = down.URL + "/v1"
	if err := cfg.WarmUp(context.Background(), 4); err == nil || !strings.Contains(err.Error(), "network warm-up: 4 of 4 requests failed") {
		t.Errorf("a warm-up through a failing network: %v; want an error saying so", err)
	}
}

// Settle runs before each reading of the network's CPU: what the network held back from its
// warm-up (a group commit) is not the run's, and what it held back from the run is.
func TestCompare_Settle(t *testing.T) {
	var self cpuCounter
	var deferred atomic.Int64 // requests whose settling is held back
	direct := costing(func() { self.add(50) })
	defer direct.Close()
	network := costing(func() { self.add(100); deferred.Add(1) })
	defer network.Close()
	settles := 0
	cfg := bench.CompareConfig{
		Load:    bench.Config{Requests: 20, Concurrency: 2, MaxTokens: 64},
		Direct:  bench.Target{BaseURL: direct.URL + "/v1", Model: bench.MockModel},
		Network: bench.Target{BaseURL: network.URL + "/v1", APIKey: "sk-x", Model: bench.MockModel},
		CPU:     self.read,
		Settle: func(context.Context) error {
			settles++
			self.add(40 * float64(deferred.Swap(0)))
			return nil
		},
	}
	c, err := bench.Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !near(c.Direct.CPU, 50) || !near(c.Network.CPU, 140) || settles != 2 {
		t.Errorf("direct %v, network %v µs per request, %d settles; want 50, 140 (100 at once, 40 settled), 2", c.Direct.CPU, c.Network.CPU, settles)
	}
}

// TestCompare_Refuses checks that a comparison needs every request answered, and a load of
// requests, not a duration.
func TestCompare_Refuses(t *testing.T) {
	direct := httptest.NewServer(bench.Mock())
	defer direct.Close()
	var n atomic.Int64
	mock := bench.Mock()
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && n.Add(1)%7 == 0 {
			http.Error(w, `{"error":{"message":"no node","type":"server_error","code":"no_provider_available"}}`, http.StatusServiceUnavailable)
			return
		}
		mock.ServeHTTP(w, r)
	}))
	defer flaky.Close()
	cfg := bench.CompareConfig{
		Load:    bench.Config{Requests: 30, Concurrency: 3, MaxTokens: 8},
		Direct:  bench.Target{BaseURL: direct.URL + "/v1", Model: bench.MockModel},
		Network: bench.Target{BaseURL: flaky.URL + "/v1", Model: bench.MockModel},
	}
	_, err := bench.Compare(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "network: ") || !strings.Contains(err.Error(), "no_provider_available") {
		t.Errorf("with a network that fails one request in 7: %v; want an error naming the network and the failure", err)
	}
	cfg.Network.BaseURL, cfg.Load.Duration = direct.URL+"/v1", time.Second
	if _, err := bench.Compare(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("with a duration: %v; want it refused", err)
	}
}

// TestCompare_InProcess compares the mock upstream with a network in this process whose
// provider runs the openai engine on it, counting this process's real CPU: the network's
// path costs more, and the figures are one another's differences and ratios.
func TestCompare_InProcess(t *testing.T) {
	up := httptest.NewServer(bench.Mock())
	defer up.Close()
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 8
		c.NewEngine = func(int) (engine.Engine, error) {
			return openaicompat.New(openaicompat.Config{BaseURL: up.URL + "/v1"})
		}
	})
	model, err := bench.FirstModel(context.Background(), http.DefaultClient, env.BaseURL(), env.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bench.Compare(context.Background(), bench.CompareConfig{
		Load:              bench.Config{Requests: 30, Concurrency: 3, Stream: true, MaxTokens: 64},
		Direct:            bench.Target{BaseURL: up.URL + "/v1", Model: bench.MockModel},
		Network:           bench.Target{BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model},
		Tries:             2,
		UpstreamInProcess: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*bench.Report{c.Direct.Report, c.Network.Report} {
		if r.OK != 30 || r.Failed != 0 || r.TTFT == nil || r.OutputTokens != 30*bench.MockChunks {
			t.Errorf("%s: %d ok, %d failed, %d tokens; want 30 streams of the mock's %d chunks", r.URL, r.OK, r.Failed, r.OutputTokens, bench.MockChunks)
		}
	}
	// The network does ten times the direct path's work; its CPU is more however busy the
	// machine, since only this process's CPU counts.
	if c.Direct.CPU <= 0 || c.Network.CPU <= c.Direct.CPU {
		t.Errorf("CPU per request: direct %.0f µs, network %.0f µs; want the network's more", c.Direct.CPU, c.Network.CPU)
	}
	if !near(c.AddedCPU, c.Network.CPU-c.Direct.CPU) || !near(c.Ratio, c.Network.CPU/c.Direct.CPU) {
		t.Errorf("added %v, ratio %v; want %v and %v", c.AddedCPU, c.Ratio, c.Network.CPU-c.Direct.CPU, c.Network.CPU/c.Direct.CPU)
	}
	if len(c.Tries) != 2 || c.AddedCPU != slices.Min(c.Tries) || c.Tries[c.Try-1] != c.AddedCPU {
		t.Errorf("try %d, added %v, tries %v; want the least of the tries", c.Try, c.AddedCPU, c.Tries)
	}
	if c.Note != "" {
		t.Errorf("note %q: the network changed the answers", c.Note)
	}
	if c.Direct.Upstream != nil || c.Network.Remote != nil || !strings.Contains(c.Method, "mock upstream") {
		t.Errorf("in one process, yet upstream %v, remote %v, method %q", c.Direct.Upstream, c.Network.Remote, c.Method)
	}
}

// TestMock checks the mock upstream's answers as bench reads them: 20 words with usage,
// streamed or not, fewer when max_tokens is less, and its model list.
func TestMock(t *testing.T) {
	up := httptest.NewServer(bench.Mock())
	defer up.Close()
	model, err := bench.FirstModel(context.Background(), http.DefaultClient, up.URL+"/v1", "")
	if err != nil || model != bench.MockModel {
		t.Fatalf("first model %q, %v; want %q", model, err, bench.MockModel)
	}
	for _, tt := range []struct {
		stream    bool
		maxTokens int
		want      int64
	}{{true, 64, bench.MockChunks}, {false, 64, bench.MockChunks}, {true, 5, 5}, {false, 1, 1}, {true, 20, 20}} {
		rep, err := bench.Run(context.Background(), bench.Config{BaseURL: up.URL + "/v1", Model: model, Requests: 5, Concurrency: 2, Stream: tt.stream, MaxTokens: tt.maxTokens})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK != 5 || rep.OutputTokens != 5*tt.want || rep.InputTokens != 5*12 || rep.UsageMissing != 0 || (rep.TTFT != nil) != tt.stream {
			t.Errorf("stream %v, max_tokens %d: %+v; want 5 answers of %d tokens with usage", tt.stream, tt.maxTokens, rep, tt.want)
		}
	}
	// max_completion_tokens too, and the stream's chunks as counted without usage.
	resp, err := http.Post(up.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"mock","stream":true,"max_completion_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if n := strings.Count(string(body), `"content":" word`); n != 3 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("max_completion_tokens 3: %d words in %s", n, body)
	}
}

func TestParseCPU(t *testing.T) {
	got, err := bench.ParseCPU(strings.NewReader("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.34\n"))
	if want := 12340 * time.Millisecond; err != nil || got != want {
		t.Errorf("ParseCPU = %v, %v; want %v", got, err, want)
	}
	if _, err := bench.ParseCPU(strings.NewReader("go_goroutines 3\n")); err == nil || !strings.Contains(err.Error(), "process_cpu_seconds_total") {
		t.Errorf("without the counter: %v", err)
	}
}
