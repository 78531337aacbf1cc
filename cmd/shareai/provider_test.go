package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/testenv"
)

// `shareai provider --config FILE` runs a node as its file says: the coordinator sees the
// node's name, region, windows and offers at the file's prices, and the owner pauses and resumes
// it with `shareai provider pause|resume|status`.
func TestProvider_ConfigFileAndControl(t *testing.T) {
	env := testenv.New(t, testenv.Options{Providers: 1})
	dir := t.TempDir()
	control := freeAddr(t)
	file := filepath.Join(dir, "provider.yaml")
	writeFile(t, file, fmt.Sprintf(`coordinator: %s
token: %s
name: rig-from-file
region: de
data_dir: %s
engine: {kind: sim, sim_ttft: 0s, sim_tps: 0}
price: {input: 0.20, output: 0.40}
offers:
  - model: sim/llama-3.1-8b
    price: {output: "0.35"}
availability: {windows: "daily 00:00-24:00", timezone: Europe/Berlin}
control: %s
log: {level: error}
`, env.URL, env.ProviderToken, filepath.Join(dir, "node"), control))

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

	var out strings.Builder
	testenv.WaitFor(t, "the control API", func() bool {
		out.Reset()
		return run(ctx, []string{"provider", "status", "--config", file}, &out, io.Discard) == 0
	})
	if !strings.Contains(out.String(), "taking jobs") || !strings.Contains(out.String(), "connected") {
		t.Errorf("status:\n%s", out.String())
	}
	out.Reset()
	if code := run(ctx, []string{"provider", "pause", "--config", file}, &out, &out); code != 0 || !strings.Contains(out.String(), "taking no new jobs: paused by its owner") {
		t.Errorf("pause: %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run(ctx, []string{"provider", "resume", "--config", file}, &out, &out); code != 0 || !strings.Contains(out.String(), "state    taking jobs") {
		t.Errorf("resume: %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run(ctx, []string{"provider", "pause", "--control", control, "--data-dir", t.TempDir()}, &out, &out); code != 1 || !strings.Contains(out.String(), "control token") {
		t.Errorf("pause without the node's data dir: %d %q; want a refusal about the token", code, out.String())
	}
}

// A file with a misspelt setting or a bad value is refused before anything starts, naming it.
func TestProvider_ConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ yaml, want string }{
		{"token: spt-x\nengin: {kind: sim}\n", `line 2: unknown setting "engin"`},
		{"token: spt-x\navailability: {windows: \"mon-fry 08:00-18:00\"}\n", `unknown day "fry"`},
		{"token: spt-x\nguard: {max_temperature_c: 80, resume_temperature_c: 90}\n", "guard.resume_temperature_c"},
	}
	for i, tt := range tests {
		file := filepath.Join(dir, fmt.Sprintf("p%d.yaml", i))
		writeFile(t, file, tt.yaml)
		var out strings.Builder
		if code := run(context.Background(), []string{"provider", "--config", file, "--data-dir", dir}, io.Discard, &out); code != 1 || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%q: exit %d, %q; want 1 and %q", tt.yaml, code, out.String(), tt.want)
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
	env := testenv.New(t, testenv.Options{Providers: 1})
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
