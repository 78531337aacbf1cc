package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// `shareai provider --config FILE` runs a node as its file says: the coordinator sees the
// node's name, region, windows and offers at the file's prices, its relative data_dir is the
// file's folder's wherever the agent starts, and the owner pauses and resumes it with
// `shareai provider pause|resume|status`, which say what they did.
func TestProvider_ConfigFileAndControl(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	dir := t.TempDir()
	control := freeAddr(t)
	file := filepath.Join(dir, "provider.yaml")
	writeFile(t, file, fmt.Sprintf(`coordinator: %s
token: %s
name: rig-from-file
region: de
data_dir: node
engine: {kind: sim, sim_ttft: 0s, sim_tps: 0}
price: {input: 0.20, output: 0.40}
offers:
  - model: sim/llama-3.1-8b
    price: {output: "0.35"}
availability: {windows: "daily 00:00-24:00", timezone: Europe/Berlin}
control: %s
log: {level: error}
`, env.URL, env.ProviderToken, control))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb strings.Builder
	go func() { done <- run(ctx, []string{"provider", "--config", file}, io.Discard, &errb) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("provider exited %d: %s", code, errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("provider did not stop")
		}
	})
	env.WaitFor("the node from the file to register", func() bool {
		for _, n := range env.Coordinator().Fleet.Nodes() {
			if n.Name == "rig-from-file" {
				return true
			}
		}
		return false
	})
	for _, n := range env.Coordinator().Fleet.Nodes() {
		if n.Name != "rig-from-file" {
			continue
		}
		if n.Region != "de" || n.Windows != "daily 00:00-24:00" || n.Timezone != "Europe/Berlin" {
			t.Errorf("node region %q windows %q in %q; want the file's", n.Region, n.Windows, n.Timezone)
		}
		if len(n.Offers) != 1 || n.Offers[0].Model != "sim/llama-3.1-8b" || n.Offers[0].InputPrice != 200_000_000 || n.Offers[0].OutputPrice != 350_000_000 {
			t.Errorf("offers %+v; want the one offer at $0.20 in and its own $0.35 out", n.Offers)
		}
	}

	if _, err := os.Stat(filepath.Join(dir, "node", "node.key")); err != nil {
		t.Errorf("the node key is not in the file's folder: %v", err)
	}
	if _, err := os.Stat("node"); err == nil {
		t.Error("data_dir: node made a folder in the working directory, not the file's")
	}

	var out strings.Builder
	testenv.WaitFor(t, "the control API", func() bool {
		out.Reset()
		return run(ctx, []string{"provider", "status", "--config", file}, &out, io.Discard) == 0
	})
	if !strings.Contains(out.String(), "taking jobs") || !strings.Contains(out.String(), "connected") {
		t.Errorf("status:\n%s", out.String())
	}
	for _, c := range []struct{ action, said, state string }{
		{"pause", "paused: the node takes no new jobs until 'shareai provider resume'; no jobs are running\n", "taking no new jobs: paused by its owner"},
		{"pause", "already paused: the node takes no new jobs", "taking no new jobs: paused by its owner"},
		{"resume", "resumed: the node takes jobs again\n", "state    taking jobs"},
		{"resume", "not paused: the node already takes jobs\n", "state    taking jobs"},
	} {
		out.Reset()
		if code := run(ctx, []string{"provider", c.action, "--config", file}, &out, &out); code != 0 ||
			!strings.HasPrefix(out.String(), c.said) || !strings.Contains(out.String(), c.state) {
			t.Errorf("%s: exit %d\n%s\nwant it to say %q, then %q", c.action, code, out.String(), c.said, c.state)
		}
	}
	out.Reset()
	if code := run(ctx, []string{"provider", "pause", "--control", control, "--data-dir", t.TempDir()}, &out, &out); code != 1 || !strings.Contains(out.String(), "control token") {
		t.Errorf("pause without the node's data dir: %d %q; want a refusal about the token", code, out.String())
	}
}

// A file with a misspelt setting or a bad value is refused before anything starts, naming the
// file, the line and the setting as the file writes it; a value given by a flag is named by the
// flag.
func TestProvider_ConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		yaml string
		args []string
		want string // after "shareai provider: FILE: "
	}{
		{"token: spt-x\nengin: {kind: sim}\n", nil, `line 2: unknown setting "engin"`},
		{"token: spt-x\navailability: {windows: \"mon-fry 08:00-18:00\"}\n", nil, `line 2: availability.windows: schedule: "mon-fry 08:00-18:00": unknown day "fry"`},
		{"token: spt-x\nguard: {max_temperature_c: 80, resume_temperature_c: 90}\n", nil, "line 2: guard.resume_temperature_c: 90 °C must be below"},
		{"token: spt-x\nprice:\n  input: 0.1\n  output: lots\n", nil, `line 4: price.output: "lots" is not an amount of USD`},
		{"token: spt-x\nengine: {kind: vllm}\n", nil, `line 2: engine.kind: "vllm" is not ollama, openai or sim`},
		{"token: spt-x\nengine: sim\n", nil, "line 2: engine: want settings under it, such as engine: {kind: sim}"},
		{"token: spt-x\n\nmax_concurrent: 0\n", nil, "line 3: max_concurrent: must be at least 1"},
		{"token: spt-x\noffers:\n  - model: a\n    context_length: long\n", nil, `line 4: offers[0].context_length: "long": want a whole number`},
		{"engine: {kind: sim}\n", nil, "token (--token, SHAREAI_PROVIDER_TOKEN): required"},
	}
	for i, tt := range tests {
		file := filepath.Join(dir, fmt.Sprintf("p%d.yaml", i))
		writeFile(t, file, tt.yaml)
		var out strings.Builder
		args := append([]string{"provider", "--config", file, "--data-dir", dir, "--control="}, tt.args...)
		if code := run(context.Background(), args, io.Discard, &out); code != 1 || !strings.Contains(out.String(), "shareai provider: "+file+": "+tt.want) {
			t.Errorf("%q: exit %d, %q; want 1 and %q", tt.yaml, code, out.String(), tt.want)
		}
	}
	// A flag overrides the file: its error names the flag.
	file := filepath.Join(dir, "flag.yaml")
	writeFile(t, file, "token: spt-x\nprice: {input: 0.1}\n")
	var out strings.Builder
	if code := run(context.Background(), []string{"provider", "--config", file, "--price-input", "cheap"}, io.Discard, &out); code != 1 ||
		!strings.Contains(out.String(), `shareai provider: --price-input: "cheap" is not an amount of USD`) {
		t.Errorf("--price-input cheap over the file: exit %d, %q; want the flag named", code, out.String())
	}
}

// pause and resume say what they did: paused or already, resumed or not paused, what becomes of
// the running jobs, and what still pauses the node.
func TestControlDone(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		action string
		st     agent.Status
		want   string
	}{
		{"pause", agent.Status{Changed: &yes, Paused: "paused by its owner", Running: 2, Drain: "10m0s"},
			"paused: the node takes no new jobs until 'shareai provider resume'; its 2 running jobs go on for up to 10m (the drain time), then other nodes finish the answers"},
		{"pause", agent.Status{Changed: &no, Paused: "paused by its owner", Running: 1, Drain: "1h0m0s"},
			"already paused: the node takes no new jobs until 'shareai provider resume'; its running job goes on for up to 1h (the drain time), then other nodes finish the answers"},
		{"pause", agent.Status{Paused: "paused by its owner"}, // an older agent: no changed, no drain
			"paused: the node takes no new jobs until 'shareai provider resume'; no jobs are running"},
		{"resume", agent.Status{Changed: &yes}, "resumed: the node takes jobs again"},
		{"resume", agent.Status{Changed: &yes, Paused: "outside its availability windows (mon 08:00-18:00)"},
			"resumed, but the node still takes no new jobs: outside its availability windows (mon 08:00-18:00)"},
		{"resume", agent.Status{Changed: &no}, "not paused: the node already takes jobs"},
		{"resume", agent.Status{Changed: &no, Paused: "GPU 0 is at 88 °C (limit 83 °C)"},
			"not paused by its owner, nothing to resume: the node takes no new jobs: GPU 0 is at 88 °C (limit 83 °C)"},
	}
	for _, tt := range tests {
		if got := controlDone(tt.action, tt.st); got != tt.want {
			t.Errorf("controlDone(%s, %+v)\n got %q\nwant %q", tt.action, tt.st, got, tt.want)
		}
	}
}

// `shareai provider init` writes a configuration that the agent accepts, offering the Ollama
// models that fit, and will not overwrite a file unless told to.
func TestProviderInit(t *testing.T) {
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tags" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"models":[{"name":"llama3.2:3b","model":"llama3.2:3b","size":2019393189,
			"details":{"parameter_size":"3.2B","quantization_level":"Q4_K_M"}}]}`)
	}))
	t.Cleanup(ollama.Close)
	file := filepath.Join(t.TempDir(), "provider.yaml")
	var out strings.Builder
	if code := run(context.Background(), []string{"provider", "init", "--config", file, "--token", "spt-init", "--ollama", ollama.URL}, &out, &out); code != 0 {
		t.Fatalf("init: %d %s", code, out.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"token: spt-init", "kind: ollama", "url: " + ollama.URL, "offers:", "- model: llama3.2:3b", "max_temperature_c: 83"} {
		if !strings.Contains(text, want) {
			t.Errorf("the written configuration lacks %q:\n%s", want, text)
		}
	}
	// The agent reads it: its help shows the file's values as defaults.
	out.Reset()
	run(context.Background(), []string{"provider", "--config", file, "--help"}, &out, &out)
	if !strings.Contains(out.String(), ollama.URL) {
		t.Errorf("provider --help with the written file does not show its engine URL:\n%s", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"provider", "init", "--config", file}, &out, &out); code != 1 || !strings.Contains(out.String(), "exists") {
		t.Errorf("init over an existing file: %d %q; want a refusal", code, out.String())
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// `shareai provider selftest` has the coordinator check the node and prints the results.
func TestProviderSelftest(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	dir := t.TempDir()
	file := filepath.Join(dir, "provider.yaml")
	writeFile(t, file, fmt.Sprintf("coordinator: %s\ntoken: %s\ndata_dir: %s\nengine: {kind: sim, sim_ttft: 0s, sim_tps: 0}\ncontrol: \"\"\nlog: {level: error}\n",
		env.URL, env.ProviderToken, filepath.Join(dir, "node")))
	var out strings.Builder
	if code := run(context.Background(), []string{"provider", "selftest", "--config", file, "--control="}, &out, &out); code != 0 {
		t.Fatalf("selftest: exit %d\n%s", code, out.String())
	}
	if strings.Count(out.String(), "PASS") != 3 || !strings.Contains(out.String(), "passed 3 checks") {
		t.Errorf("selftest output:\n%s", out.String())
	}
}

// The provider file's ask schedules reach the agent's offers: the node's for the models it
// offers by default and for a named offer without windows (at its own flat ask), an offer's
// own where it has them.
func TestProvider_AskScheduleReachesTheOffers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.yaml")
	if err := os.WriteFile(path, []byte(`token: spt-test
engine: {kind: sim}
price:
  input: 0.10
  output: 0.20
  timezone: Europe/Berlin
  windows: [{name: peak, when: "mon-fri 09:00-18:00", input: 0.30}]
offers:
  - model: sim/llama-3.1-8b
    price: {output: 0.25}
  - model: sim/qwen-2.5-7b
    price:
      timezone: UTC
      windows: [{name: night, when: "daily 00:00-06:00", input: 0.01, output: 0.02}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg config.Provider
	fs := providerFlags(&cfg)
	if err := cfg.LoadFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	acfg, err := agentConfig(context.Background(), &cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if s := acfg.AskSchedule; s == nil || s.Timezone != "Europe/Berlin" || s.Windows[0] != (protocol.AskWindow{Name: "peak", When: "mon-fri 09:00-18:00", InputPrice: 300_000_000, OutputPrice: 200_000_000}) {
		t.Errorf("the node's schedule %+v; want peak at $0.30 in, the flat $0.20 out", s)
	}
	llama, qwen := acfg.Offers[0].AskSchedule, acfg.Offers[1].AskSchedule
	if llama == nil || llama.Windows[0].OutputPrice != 250_000_000 || llama.Windows[0].InputPrice != 300_000_000 {
		t.Errorf("llama's schedule %+v; want the node's, at the offer's own flat output ask", llama)
	}
	if qwen == nil || qwen.Timezone != "UTC" || qwen.Windows[0].Name != "night" || len(qwen.Windows) != 1 {
		t.Errorf("qwen's schedule %+v; want its own", qwen)
	}
}
