package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/config"
)

// TestBench_OwnNetwork runs `shareai bench` without a URL: it starts a network of its own,
// loads it, prints a JSON report, and removes the network's data directory.
func TestBench_OwnNetwork(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out, errb strings.Builder
	code := run(context.Background(), []string{"bench", "-n", "20", "-c", "4", "--json", "--sim-tps", "0", "--sim-ttft", "0", "--max-tokens", "8"}, &out, &errb)
	if code != 0 {
		t.Fatalf("bench exited %d: %s\n%s", code, errb.String(), out.String())
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, out.String())
	}
	if rep.OK != 20 || rep.Failed != 0 || rep.Concurrency != 4 || !rep.Stream || !strings.HasPrefix(rep.Model, "sim/") ||
		rep.OutputTokens != 20*8 || rep.TTFT == nil || rep.TTFT.N != 20 || rep.Network == "" {
		t.Errorf("report %+v; want 20 streamed answers of 8 tokens from a sim model on its own network", rep)
	}
	if !strings.Contains(errb.String(), "Started a network in this process") {
		t.Errorf("stderr does not say bench started a network: %q", errb.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "shareai-bench-*")); len(left) != 0 {
		t.Errorf("the network's data directory is left: %v", left)
	}
}

// TestBench_URL runs bench against a network started apart, found through OPENAI_BASE_URL and
// OPENAI_API_KEY as `shareai up` prints them, with a text report.
func TestBench_URL(t *testing.T) {
	n, err := startBenchNet(context.Background(), &config.Bench{Providers: 1, Concurrency: 4}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	t.Setenv("OPENAI_BASE_URL", n.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", n.APIKey)
	var out, errb strings.Builder
	code := run(context.Background(), []string{"bench", "-n", "12", "-c", "3", "--stream=false", "--model", "sim/qwen-2.5-7b", "--max-tokens", "4"}, &out, &errb)
	if code != 0 {
		t.Fatalf("bench exited %d: %s\n%s", code, errb.String(), out.String())
	}
	for _, want := range []string{"sim/qwen-2.5-7b at " + n.URL + "/v1: not streamed", "12 ok, 0 failed", "req/s", "48 out", "latency"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report has no %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(errb.String(), "Started a network") {
		t.Errorf("bench started a network though given a URL: %s", errb.String())
	}

	// Every request failing is an error, after the report.
	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"bench", "-n", "3", "-c", "1", "--key", "sk-wrong", "--model", "sim/qwen-2.5-7b"}, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "401 invalid_api_key") || !strings.Contains(errb.String(), "every request failed") {
		t.Errorf("with a wrong key: exit %d, stdout %q, stderr %q; want 1, the 401s reported", code, out.String(), errb.String())
	}
}

func TestBench_Flags(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-c", "0"}, "-c"},
		{[]string{"--url", "127.0.0.1:8080"}, "--url"},
		{[]string{"--url", "http://127.0.0.1:8080"}, "--key"},
		{[]string{"--metrics", "http://127.0.0.1:9464/metrics"}, "--hold"},
		{[]string{"--hold", "--stream=false"}, "--hold"},
	}
	for _, tt := range tests {
		var errb strings.Builder
		if code := run(context.Background(), append([]string{"bench"}, tt.args...), io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("bench %v: exit %d, %q; want 1 naming %s", tt.args, code, errb.String(), tt.want)
		}
	}
}
