package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/ollama"
	"github.com/shareai/shareai/internal/hw"
	"github.com/shareai/shareai/internal/protocol"
)

// runProviderInit is 'shareai provider init': it detects the GPUs and a local Ollama, and
// writes a commented configuration that offers the installed models that fit.
func runProviderInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("provider init", flag.ContinueOnError)
	path := flags.String("config", "shareai-provider.yaml", "the configuration file to write")
	coordinator := flags.String("coordinator", "http://127.0.0.1:8080", "the coordinator's URL")
	token := flags.String("token", "", "the provider token (spt-…); empty: set SHAREAI_PROVIDER_TOKEN instead")
	ollamaURL := flags.String("ollama", ollama.DefaultBaseURL, "where to look for Ollama")
	force := flags.Bool("force", false, "overwrite the file if it exists")
	if err := parse(flags, args, stderr, `Detect this machine's GPUs (nvidia-smi, rocm-smi, sysctl on Apple Silicon) and a local
Ollama, and write a commented configuration for 'shareai provider --config FILE': the
Ollama models that fit the GPUs' memory are offered, the others are listed and left out.
Edit it (prices, region, availability windows, temperature limits), then run the agent.`); err != nil {
		return err
	}
	if _, err := os.Stat(*path); err == nil && !*force {
		return fmt.Errorf("%s exists: choose another --config, or --force to overwrite it", *path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	machine, err := hw.Discover(ctx, hw.Exec)
	if err != nil {
		return err
	}
	models, ollamaErr := ollamaModels(ctx, *ollamaURL)
	text := providerYAML(initInput{Machine: machine, Coordinator: *coordinator, Token: *token,
		OllamaURL: *ollamaURL, Models: models, OllamaErr: ollamaErr})
	if err := os.MkdirAll(filepath.Dir(*path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*path, []byte(text), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(*path, 0o600); err != nil { // a file overwritten keeps its mode: it may hold the token
		return err
	}
	fmt.Fprintf(stdout, "%s\nWrote %s. Review it, then run:\n  shareai provider --config %s\n", summary(machine), *path, *path)
	if ollamaErr != nil {
		fmt.Fprintf(stdout, "No Ollama answered at %s (%v): install it from https://ollama.com, or set engine.kind to openai for vLLM or llama.cpp.\n", *ollamaURL, ollamaErr)
	}
	return nil
}

func ollamaModels(ctx context.Context, url string) ([]engine.Model, error) {
	e, err := ollama.New(ollama.Config{BaseURL: url})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second) // a cold Ollama with many models is slow to describe them
	defer cancel()
	return e.Models(ctx)
}

// summary reads like "Found 2 × NVIDIA GeForce RTX 3090 (48.0 GiB of GPU memory): models up to about 32B fit at Q4_K_M with an 8192-token context."
func summary(m protocol.Hardware) string {
	vram := totalVRAM(m)
	if len(m.GPUs) == 0 {
		return "Found no GPU: the node would run models on its CPU, slowly. ShareAI is meant for GPUs."
	}
	most := hw.MaxParameters(vram, hw.ModelSpec{Quantization: "Q4_K_M", ContextLength: 8192})
	return fmt.Sprintf("Found %d × %s (%.1f GiB of GPU memory): models up to about %gB fit at Q4_K_M with an 8192-token context.",
		len(m.GPUs), m.GPUs[0].Name, float64(vram)/1024, most)
}

func totalVRAM(m protocol.Hardware) int64 {
	var v int64
	for _, g := range m.GPUs {
		v += g.VRAMMiB
	}
	return v
}

type initInput struct {
	Machine            protocol.Hardware
	Coordinator, Token string
	OllamaURL          string
	Models             []engine.Model
	OllamaErr          error
}

// providerYAML writes the configuration, with comments that say what each setting does.
func providerYAML(in initInput) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# ShareAI provider agent: shareai provider --config THIS_FILE")
	w("# Written by 'shareai provider init' on %s. The environment (SHAREAI_*) and flags override it.", time.Now().UTC().Format(time.DateOnly))
	w("#")
	for _, g := range in.Machine.GPUs {
		w("# GPU %d: %s, %d MiB, driver %s, uuid %s", g.Index, g.Name, g.VRAMMiB, orNone(g.Driver), orNone(g.UUID))
	}
	if len(in.Machine.GPUs) == 0 {
		w("# No GPU found.")
	}
	w("")
	w("coordinator: %s", in.Coordinator)
	if in.Token != "" {
		w("token: %s", in.Token)
	} else {
		w("# token: spt-...   # or set SHAREAI_PROVIDER_TOKEN; made with: shareai keys create --provider")
	}
	w("name: %s   # how the node shows to you", hostname())
	w("region: \"\"   # ISO country code (de, us, jp): buyers can require a region")
	w("data_dir: .shareai-node   # keeps the node key, the node's identity: keep it; relative to this file's folder")
	w("")
	w("engine:")
	w("  kind: ollama   # ollama, openai (vLLM, llama.cpp, SGLang, LM Studio) or sim")
	w("  url: %s", in.OllamaURL)
	w("  # pull: [llama3.1:8b]   # models to pull at start when missing")
	w("")
	w("# Your price floor, in USD per million tokens; buyers pay it plus the platform fee.")
	w("price: {input: 0.05, output: 0.10}")
	w("max_concurrent: 4   # jobs at once per model")
	w("")
	writeOffers(w, in)
	w("")
	w("availability:")
	w("  windows: \"\"   # when the node takes jobs, e.g. \"mon-fri 08:00-18:00, 22:30-01:00\"; empty: always")
	w("  timezone: \"\"  # of the windows, e.g. Europe/Berlin; empty: this machine's")
	w("  drain: 10m     # how long running jobs may go on once a window closes or you pause")
	w("")
	w("guard:")
	w("  step_aside: true      # take no jobs while another program (a game, your training) uses the GPU")
	w("  quiet_period: 5m      # and resume after it has left the GPU for this long")
	w("  max_temperature_c: 83 # no new jobs at or above this temperature")
	w("  resume_temperature_c: 75")
	w("  # max_power_w: 300")
	w("")
	w("control: 127.0.0.1:7071   # for 'shareai provider pause|resume|status'")
	w("log: {level: info, format: text}")
	return b.String()
}

// writeOffers lists the Ollama models: those that fit are offered, the others commented out
// with the reason.
func writeOffers(w func(string, ...any), in initInput) {
	if len(in.Models) == 0 {
		w("# offers: every model the engine serves when none are listed, e.g.")
		w("# offers:")
		w("#   - model: llama3.1:8b")
		w("#     context_length: 8192")
		w("#     price: {input: 0.05, output: 0.10}")
		return
	}
	w("# The models offered, each with its own settings if you like (context_length,")
	w("# max_concurrent, price). Models that do not fit the GPUs' memory are left out.")
	vram := totalVRAM(in.Machine)
	var lines []string
	fits := 0
	for _, m := range in.Models {
		ctxLen := min(cmp.Or(m.ContextLength, 8192), 8192)
		err := hw.Check(hw.ModelSpec{Name: m.Name, Parameters: m.Parameters, Quantization: m.Quantization,
			SizeBytes: m.SizeBytes, ContextLength: ctxLen}, vram)
		if err != nil {
			lines = append(lines, fmt.Sprintf("  # - model: %s   # does not fit: %v", m.Name, err))
			continue
		}
		fits++
		lines = append(lines, fmt.Sprintf("  - model: %s   # %gB at %s", m.Name, m.Parameters, orNone(m.Quantization)),
			fmt.Sprintf("    context_length: %d", ctxLen))
	}
	if fits == 0 {
		w("# None of the installed models fits: pull a smaller one (ollama pull llama3.2:3b).")
		w("# offers:")
	} else {
		w("offers:")
	}
	for _, l := range lines {
		w("%s", l)
	}
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "my-gpu"
	}
	return h
}
