package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/localnet"
)

// upFlags is the flag set of `shareai up`: its settings, and --check-config.
func upFlags(cfg *config.Up) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	cfg.Flags(fs)
	return fs, checkFlag(fs)
}

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config.Up
	fs, check := upFlags(&cfg)
	if err := parseFile(fs, args, stderr, `Run a whole ShareAI network on this machine: a coordinator (SQLite in --data-dir) and
--providers agents connected to it over loopback. --replicas N runs N coordinators sharing
the database and an embedded NATS server (or --nats), with the agents spread over them. The agents run simulated GPUs unless
--engine openai --upstream URL puts them on a real OpenAI-compatible engine. Prints the
environment for OpenAI SDKs once the network can serve. Ctrl-C stops everything.
Settings come from the YAML file --config (keys are the flags' names: providers: 4), then
the environment, then these flags; see docs/configuration.md.`); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := cfg.Log.Logger()
	if err != nil {
		return err
	}
	nc, err := cfg.Build()
	if err != nil {
		return err
	}
	if *check {
		return printSettings(stdout, fs)
	}
	tp, stopTracing, err := startTracing(cfg.Trace, "shareai-up", log) // the coordinator's spans and the agents'
	if err != nil {
		return err
	}
	defer stopTracing() // after the network has stopped
	nc.Coordinator.Log, nc.Coordinator.TracerProvider, nc.Agent.Version = log, tp, version
	nc.NewEngine = func(int) (engine.Engine, error) {
		return newEngine(cfg.Engine, cfg.Upstream, cfg.UpstreamAPIKey, "", nil, cfg.SimTTFT, cfg.SimTPS)
	}
	n, err := localnet.Start(ctx, nc)
	if err != nil {
		return err
	}
	// The coordinator's metrics (the first replica's), of whichever coordinator runs now (the
	// network may restart it).
	// A second network on this machine finds the default port taken: it serves none, and says so.
	if err := serveMetrics(ctx, cfg.MetricsAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Coordinator().MetricsHandler().ServeHTTP(w, r)
	}), log, false); err != nil {
		n.Close()
		return err
	}
	model := "MODEL"
	if ms := n.Coordinator().Fleet.Models(); len(ms) > 0 {
		model = ms[0].ID
	}
	kind := "simulated provider"
	switch cfg.Engine {
	case "openai":
		kind = "provider on " + cfg.Upstream
	case "ollama":
		kind = "provider on Ollama"
	}
	if len(n.Agents) != 1 {
		kind = strings.Replace(kind, "provider", "providers", 1)
	}
	if len(n.URLs) > 1 {
		fmt.Fprintf(stderr, "ShareAI network up: %d coordinator replicas (NATS at %s) with %d %s.\nWeb console: %s/ (sign up there).\n", len(n.URLs), config.MaskURL(n.NATSURL()), len(n.Agents), kind, n.URL)
		for i, u := range n.URLs {
			fmt.Fprintf(stdout, "replica %d: %s/v1\n", i+1, u)
		}
	} else {
		fmt.Fprintf(stderr, "ShareAI network up: coordinator at %s with %d %s.\nWeb console: %s/ (sign up there).\n", n.URL, len(n.Agents), kind, n.URL)
	}
	fmt.Fprintf(stdout, "export OPENAI_BASE_URL=%s/v1\nexport OPENAI_API_KEY=%s\n", n.URL, n.APIKey)
	fmt.Fprintf(stdout, `curl -s $OPENAI_BASE_URL/chat/completions -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" -d '{"model":"%s","messages":[{"role":"user","content":"Hello!"}]}'`+"\n", model)
	if f, ok := stdout.(interface{ Sync() error }); ok {
		f.Sync()
	}
	<-ctx.Done()
	fmt.Fprintln(stderr, "Stopping: letting streams in flight finish…")
	return n.Close()
}
