package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

// TestBench_Batch runs a batch through the Batch API of a real network, with live load beside
// it: every line answered once, the tokens counted from the output file, the live load run
// alone and beside the batch, and the slot-time read from the coordinator's own metrics.
func TestBench_Batch(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 8
		c.Sim = sim.Config{TTFT: 2 * time.Millisecond, TokensPerSecond: 2000}
	})
	const lines, live, maxTokens = 120, 20, 6
	u := oneUsage(t, env, maxTokens)
	metrics := httptest.NewServer(env.Coordinator().MetricsHandler())
	defer metrics.Close()
	rep, err := bench.RunBatch(context.Background(), bench.BatchConfig{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Lines: lines, MaxTokens: maxTokens, Prompt: prompt,
		Live:       bench.Config{Requests: live, Concurrency: 2, Stream: true, Timeout: time.Minute},
		MetricsURL: metrics.URL, Poll: 20 * time.Millisecond, Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := rep.Batch
	if b == nil || b.Status != "completed" || b.Completed != lines || b.Failed != 0 || b.Duplicates != 0 || b.Missing != 0 {
		t.Fatalf("batch %+v; want %d lines completed, each once", b, lines)
	}
	if got, want := b.OutputTokens, int64(lines)*u.CompletionTokens; got != want {
		t.Errorf("output tokens %d, want %d (%d lines × usage.completion_tokens)", got, want, lines)
	}
	if b.Seconds <= 0 || b.LinesPerSecond <= 0 || b.OutputTokensPerSecond <= 0 {
		t.Errorf("rates: %vs, %v lines/s, %v tokens/s", b.Seconds, b.LinesPerSecond, b.OutputTokensPerSecond)
	}
	for name, r := range map[string]*bench.Report{"alone": b.LiveAlone, "beside the batch": b.LiveDuring} {
		if r == nil || r.OK != live || r.Failed != 0 || r.TTFT == nil || r.TTFT.N != live {
			t.Errorf("live load %s: %+v; want %d streamed answers timed", name, r, live)
		}
	}
	f := b.SlotFill
	if f == nil {
		t.Fatal("no slot-time read from the metrics")
	}
	if f.BatchSeconds <= 0 || f.BatchSeconds > f.BusySeconds+1e-9 || f.FreeSeconds < 0 || f.Filled <= 0 || f.Filled > 1 {
		t.Errorf("slot-time %+v: want batch slot-time within the busy, and a share filled in (0, 1]", f)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"every line answered exactly once", "of the idle slot-time", "live TTFT p50/p99"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestBench_BatchNotExactlyOnce checks the check itself: a server whose files answer a line
// twice and leave one out is reported so, not as a batch answered exactly once.
func TestBench_BatchNotExactlyOnce(t *testing.T) {
	const lines = 4
	out := ""
	for _, id := range []string{"line-1", "line-1", "line-2", "line-4"} { // line-1 twice, line-3 missing
		out += fmt.Sprintf(`{"custom_id":%q,"response":{"status_code":200,"body":{"usage":{"completion_tokens":3}}}}`+"\n", id)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/files", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, `{"id":"file-in"}`)
	})
	batch := `{"id":"batch_1","status":"%s","output_file_id":"file-out","request_counts":{"total":4,"completed":4,"failed":0}}`
	mux.HandleFunc("POST /v1/batches", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, batch, "validating") })
	mux.HandleFunc("GET /v1/batches/batch_1", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, batch, "completed") })
	mux.HandleFunc("GET /v1/files/file-out/content", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, out) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	rep, err := bench.RunBatch(context.Background(), bench.BatchConfig{
		BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: model, Lines: lines, MaxTokens: 3, Prompt: prompt, Poll: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := rep.Batch; b.Duplicates != 1 || b.Missing != 1 || b.OutputTokens != 12 {
		t.Errorf("duplicates %d, missing %d, output tokens %d; want 1, 1 and 12", b.Duplicates, b.Missing, b.OutputTokens)
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "NOT exactly once") {
		t.Errorf("report does not say the batch was not answered exactly once:\n%s", text.String())
	}
	js, _ := json.Marshal(rep.Batch)
	if !strings.Contains(string(js), `"duplicates":1`) {
		t.Errorf("JSON report %s", js)
	}
}
