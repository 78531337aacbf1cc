package main

import (
	"context"
	"flag"
	"io"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

func runProvider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "earnings" {
		return runProviderEarnings(ctx, args[1:], stdout, stderr)
	}
	var cfg config.Provider
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	cfg.Flags(fs)
	if err := parse(fs, args, stderr, `Run the provider agent: it dials the coordinator (outbound, so it works behind NAT),
registers this node and its models, and serves jobs on a local inference engine:
  --engine openai  any OpenAI-compatible server (vLLM, llama.cpp llama-server, SGLang,
                   LM Studio, Ollama's /v1), given by --upstream
  --engine sim     a simulated GPU, for demos and tests
The node key is kept in --data-dir; keep it to keep the node's identity.
'shareai provider earnings --help' shows a provider's earnings from the coordinator's database.`); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := cfg.Log.Logger()
	if err != nil {
		return err
	}
	var models []engine.Model
	for _, m := range cfg.ModelList() {
		models = append(models, engine.Model{Name: m, ContextLength: cfg.ContextLength})
	}
	eng, err := newEngine(cfg.Engine, cfg.Upstream, cfg.UpstreamAPIKey, cfg.Continue, models, cfg.SimTTFT, cfg.SimTPS)
	if err != nil {
		return err
	}
	hw := protocol.Hardware{}
	if cfg.Engine == "sim" {
		hw.Simulated = true
		hw.GPUs = []protocol.GPU{{Name: "Simulated GPU", VRAMMiB: 24576}}
		log.Info("using the simulated engine: answers are simulated text, not a real model")
	}
	in, out, _ := cfg.Ask.Prices()
	a, err := agent.New(agent.Config{
		InputPrice: in, OutputPrice: out, WaitForEngine: true,
		Coordinator: cfg.Coordinator, Token: cfg.Token, DataDir: cfg.DataDir, Name: cfg.Name,
		Region: cfg.Region, Engine: eng, MaxConcurrent: cfg.MaxConcurrent, ContextLength: cfg.ContextLength, Quantization: cfg.Quantization, Hardware: hw,
		Version: version, Log: log,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
