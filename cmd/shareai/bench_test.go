package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
		{[]string{"--compare", "127.0.0.1:8000"}, "--compare"},
		{[]string{"--compare", "mock", "--hold"}, "--compare"},
		{[]string{"--compare", "mock", "--duration", "5s"}, "--compare"},
		{[]string{"--compare", "http://127.0.0.1:8000", "--url", "http://127.0.0.1:8080", "--key", "sk-x"}, "--metrics"},
		{[]string{"--compare", "mock", "--url", "http://127.0.0.1:8080", "--key", "sk-x", "--metrics", "http://127.0.0.1:9464/metrics"}, "--mock-upstream"},
		{[]string{"--compare", "mock", "--metrics", "http://127.0.0.1:9464/metrics"}, "--metrics"},
		{[]string{"--compare", "mock", "--upstream-metrics", "http://127.0.0.1:8000/metrics"}, "--upstream-metrics"},
		{[]string{"--upstream-metrics", "http://127.0.0.1:8000/metrics"}, "--upstream-metrics"},
		{[]string{"--tries", "3"}, "--tries"},
		{[]string{"--warm", "100"}, "--warm"},
		{[]string{"--compare", "mock", "--warm", "-1"}, "--warm"},
		{[]string{"--compare", "mock", "--tries", "0"}, "--tries"},
		{[]string{"--compare", "http://127.0.0.1:8000", "--baseline", "b.json"}, "--baseline"},
		{[]string{"--compare", "mock", "--update-baseline"}, "--update-baseline"},
		{[]string{"--against", "/tmp/shareai-ref"}, "--against"},
		{[]string{"--compare", "http://127.0.0.1:8000", "--against", "/tmp/shareai-ref"}, "--against"},
		{[]string{"--compare", "mock", "--baseline", "b.json", "--update-baseline", "--against", "/tmp/shareai-ref"}, "--against"},
		{[]string{"--mock-upstream", "8000"}, "--mock-upstream"},
		{[]string{"--mock-upstream", "127.0.0.1:0", "--compare", "mock"}, "--mock-upstream"},
		{[]string{"--hold", "--metrics", "http://a:1/metrics,http://b:2/metrics"}, "--metrics"},
	}
	for _, tt := range tests {
		var errb strings.Builder
		if code := run(context.Background(), append([]string{"bench"}, tt.args...), io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("bench %v: exit %d, %q; want 1 naming %s", tt.args, code, errb.String(), tt.want)
		}
	}
}

// TestBench_Compare runs `shareai bench --compare mock` as scripts/bench-regress.sh does:
// it records the figures in a new baseline file, then is held to figures recorded there:
// more than 25% below this run's passes, one far below fails, none for this machine passes.
func TestBench_Compare(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	path := filepath.Join(t.TempDir(), "baseline.json")
	compare := func(extra ...string) (int, *bench.Comparison, string) {
		t.Helper()
		var out, errb strings.Builder
		args := append([]string{"bench", "--compare", "mock", "-n", "30", "-c", "3", "--stream=false", "--providers", "1", "--json", "--baseline", path}, extra...)
		code := run(context.Background(), args, &out, &errb)
		var c bench.Comparison
		if err := json.Unmarshal([]byte(out.String()), &c); err != nil {
			t.Fatalf("bench %v exited %d, stdout is not a comparison: %v\n%s\n%s", extra, code, err, out.String(), errb.String())
		}
		return code, &c, errb.String()
	}

	code, c, stderr := compare("--update-baseline", "--tries", "2")
	if code != 0 {
		t.Fatalf("--update-baseline exited %d: %s", code, stderr)
	}
	if c.Direct.Report.OK != 30 || c.Network.Report.OK != 30 || c.Network.CPU <= c.Direct.CPU || len(c.Tries) != 2 ||
		c.Providers != 1 || c.Model != bench.MockModel || c.Check != nil {
		t.Errorf("comparison %+v; want 30 answers a path, the network's costing more, 2 tries, no check", c)
	}
	if !strings.Contains(stderr, "Recorded in "+path) || !strings.Contains(stderr, "direct, try 2 of 2:") {
		t.Errorf("stderr does not say what it recorded, and each try: %s", stderr)
	}
	// A test binary is stamped with no commit: the file names none, and says why.
	if !strings.Contains(stderr, "This binary names no commit") {
		t.Errorf("stderr does not say the figures name no commit: %s", stderr)
	}
	b, err := bench.LoadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := b.Machines[bench.MachineClass()][c.Scenario()]
	if !ok || f.AddedCPU <= 0 || f.AddedCPU != float64(int64(c.AddedCPU*10+0.5))/10 || !strings.Contains(b.About, "scripts/bench-regress.sh --update") || b.Commit != "" {
		t.Fatalf("baseline %+v; want this run's figure for %q, %q", b, bench.MachineClass(), c.Scenario())
	}

	// A figure far above this run's: improved, it passes and says to record it.
	setFigure := func(added float64) {
		t.Helper()
		f.AddedCPU = added
		b.Machines[bench.MachineClass()][c.Scenario()] = f
		if err := b.Save(path); err != nil {
			t.Fatal(err)
		}
	}
	setFigure(1e9)
	code, c, stderr = compare()
	if code != 0 || c.Check == nil || c.Check.Status != bench.VerdictImproved {
		t.Errorf("against a figure far above: exit %d, check %+v; want 0, improved (%s)", code, c.Check, stderr)
	}
	// A figure far below this run's: a regression, after every try.
	setFigure(0.01)
	code, c, stderr = compare("--tries", "2")
	if code != 1 || c.Check == nil || !c.Check.Failed() || len(c.Tries) != 2 || !strings.Contains(stderr, "regressed") {
		t.Errorf("against a figure far below: exit %d, check %+v, tries %v; want 1, a regression after 2 tries (%s)", code, c.Check, c.Tries, stderr)
	}
	// None for this machine: it passes, saying so, after one try.
	delete(b.Machines, bench.MachineClass())
	b.Machines["plan9/386, unknown CPU, 1 CPUs"] = map[string]bench.Figure{c.Scenario(): {AddedCPU: 1}}
	if err := b.Save(path); err != nil {
		t.Fatal(err)
	}
	code, c, _ = compare("--tries", "3")
	if code != 0 || c.Check == nil || c.Check.Status != bench.VerdictNoBaseline || len(c.Tries) != 1 {
		t.Errorf("without a figure for this machine: exit %d, check %+v, tries %v; want 0, no baseline, one try", code, c.Check, c.Tries)
	}
}

// TestBench_CompareAgainst holds this build to a reference build run in the same run: a
// stand-in binary that records its arguments and prints a comparison with the figure each
// case wants. Every try runs the reference first; the tries stop at the first within the
// tolerance; a reference of another load, or one that fails, is an error naming it.
func TestBench_CompareAgainst(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in reference build is a shell script")
	}
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	dir := t.TempDir()
	ref := filepath.Join(dir, "shareai-ref")
	script := "#!/bin/sh\necho \"$@\" >> " + filepath.Join(dir, "args") + "\ncat " + filepath.Join(dir, "report.json") + "\nexit $(cat " + filepath.Join(dir, "exit") + ")\n"
	if err := os.WriteFile(ref, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	warm := 0 // the reference's report says it warmed its network up with this many requests
	reference := func(added float64, requests, exit int) {
		t.Helper()
		c := bench.Comparison{Model: bench.MockModel, Concurrency: 3, Requests: requests, Warm: warm, MaxTokens: 64, Providers: 1, Machine: bench.MachineClass(),
			Direct: &bench.PathRun{CPU: 50, Report: &bench.Report{}}, Network: &bench.PathRun{CPU: 50 + added, Report: &bench.Report{}}, AddedCPU: added}
		data, _ := json.Marshal(c)
		os.Remove(filepath.Join(dir, "args"))
		if os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644) != nil || os.WriteFile(filepath.Join(dir, "exit"), []byte(strconv.Itoa(exit)), 0o644) != nil {
			t.Fatal("cannot write the reference's report")
		}
	}
	compare := func(tries string, more ...string) (int, *bench.Comparison, string) {
		t.Helper()
		var out, errb strings.Builder
		code := run(context.Background(), append([]string{"bench", "--compare", "mock", "-n", "30", "-c", "3", "--stream=false", "--providers", "1",
			"--json", "--tries", tries, "--against", ref}, more...), &out, &errb)
		if out.Len() == 0 {
			return code, nil, errb.String()
		}
		var c bench.Comparison
		if err := json.Unmarshal([]byte(out.String()), &c); err != nil {
			t.Fatalf("bench exited %d, stdout is not a comparison: %v\n%s\n%s", code, err, out.String(), errb.String())
		}
		return code, &c, errb.String()
	}
	runs := func() []string {
		data, _ := os.ReadFile(filepath.Join(dir, "args"))
		return strings.Split(strings.TrimSpace(string(data)), "\n")
	}

	// A reference far costlier: improved, after one try of each.
	reference(1e6, 30, 0)
	code, c, stderr := compare("3")
	if code != 0 || c == nil || c.Check == nil || c.Check.Status != bench.VerdictImproved || len(c.Tries) != 1 || len(runs()) != 1 ||
		!strings.Contains(c.Check.Message, "that the reference build "+ref+" added in this run") {
		t.Errorf("against a costlier reference: exit %d, check %+v, tries %v, reference runs %d; want 0, improved, one try (%s)", code, c.Check, c.Tries, len(runs()), stderr)
	}
	args := runs()[0]
	for _, want := range []string{"bench --compare mock --json --tries 1 -n 30 -c 3 --stream=false --max-tokens 64 --providers 1"} {
		if !strings.Contains(args, want) {
			t.Errorf("the reference ran with %q; want the same load: %q", args, want)
		}
	}
	if strings.Index(stderr, "the reference build "+ref+", try 1 of 3:") > strings.Index(stderr, "this build, network, try 1 of 3:") {
		t.Errorf("the reference did not run first: %s", stderr)
	}

	// A reference far cheaper: a regression, after every try, each running the reference.
	reference(0.01, 30, 0)
	code, c, stderr = compare("2")
	if code != 1 || c == nil || c.Check == nil || !c.Check.Failed() || len(c.Tries) != 2 || len(runs()) != 2 || !strings.Contains(stderr, "regressed") ||
		!strings.Contains(stderr, "against "+ref) {
		t.Errorf("against a cheaper reference: exit %d, check %+v, tries %v, reference runs %d; want 1, a regression after 2 tries of each (%s)", code, c.Check, c.Tries, len(runs()), stderr)
	}

	// A reference that ran another load, or failed: an error that says so.
	reference(100, 31, 0)
	if code, c, stderr = compare("1"); code != 1 || c != nil || !strings.Contains(stderr, `it ran "json c=3 n=31 max_tokens=64 providers=1", not "json c=3 n=30 max_tokens=64 providers=1"`) {
		t.Errorf("a reference of another load: exit %d, stderr %s", code, stderr)
	}
	reference(100, 30, 3)
	if code, c, stderr = compare("1"); code != 1 || c != nil || !strings.Contains(stderr, "--against "+ref+": exit status 3") {
		t.Errorf("a reference that failed: exit %d, stderr %s", code, stderr)
	}

	// With a warm-up: the reference warms its own network up as much, and its report must say
	// so; this build's network takes the warm-up before its first try.
	warm = 12
	reference(1e6, 30, 0)
	code, c, stderr = compare("1", "--warm", "12")
	if code != 0 || c == nil || c.Warm != 12 || !strings.Contains(runs()[0], "--warm 12") ||
		!strings.Contains(stderr, "network, warm-up of 12 requests:") {
		t.Errorf("with --warm 12: exit %d, comparison %+v, reference ran with %q; want 0, warm 12 both ways (%s)", code, c, runs(), stderr)
	}
	warm = 0
	reference(1e6, 30, 0)
	if code, c, stderr = compare("1", "--warm", "12"); code != 1 || c != nil || !strings.Contains(stderr, `not "json c=3 n=30 max_tokens=64 providers=1 warm=12"`) {
		t.Errorf("a reference that took no warm-up: exit %d, stderr %s", code, stderr)
	}
}

// TestBench_CompareElsewhere compares an upstream with a network started apart, whose CPU
// bench reads from its Prometheus endpoint, with a text report.
func TestBench_CompareElsewhere(t *testing.T) {
	up := httptest.NewServer(bench.Mock())
	defer up.Close()
	n, err := startNet(context.Background(), &config.Bench{Providers: 1, Concurrency: 2}, up.URL+"/v1", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	var out, errb strings.Builder
	code := run(context.Background(), []string{"bench", "--compare", up.URL, "--url", n.URL, "--key", n.APIKey, "--metrics", n.metricsURL,
		"-n", "20", "-c", "2"}, &out, &errb)
	if code != 0 {
		t.Fatalf("bench exited %d: %s\n%s", code, errb.String(), out.String())
	}
	for _, want := range []string{"mock: streamed", "direct   " + up.URL + "/v1", "network  " + n.URL + "/v1", "the network's processes: ", "process_cpu_seconds_total of 1 endpoints"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report has no %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(errb.String(), "Started a network") {
		t.Errorf("bench started a network though given a URL: %s", errb.String())
	}
}

// TestBench_MockUpstream serves the mock upstream alone, with its process metrics, until
// Ctrl-C.
func TestBench_MockUpstream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"bench", "--mock-upstream", "127.0.0.1:0"}, io.Discard, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	base, _, _ := strings.Cut(strings.TrimPrefix(line, "Mock upstream at "), " ")
	model, err := bench.FirstModel(ctx, http.DefaultClient, base, "")
	if err != nil || model != bench.MockModel {
		t.Fatalf("%q: first model %q, %v", line, model, err)
	}
	cpu, err := bench.ScrapeCPU(ctx, http.DefaultClient, strings.TrimSuffix(base, "/v1")+"/metrics")
	if err != nil || cpu <= 0 {
		t.Errorf("its metrics: CPU %v, %v; want this process's", cpu, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after Ctrl-C, want 0", code)
	}
}
