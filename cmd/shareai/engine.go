package main

import (
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/ollama"
	"github.com/shareai/shareai/internal/engine/openaicompat"
	"github.com/shareai/shareai/internal/engine/sim"
)

// newEngine makes the engine a provider runs.
func newEngine(kind, upstream, apiKey, continues string, models []engine.Model, simTTFT time.Duration, simTPS float64) (engine.Engine, error) {
	switch kind {
	case "openai":
		return openaicompat.New(openaicompat.Config{BaseURL: upstream, APIKey: apiKey, Models: models, Continue: continues})
	case "ollama":
		names := make([]string, len(models))
		for i, m := range models {
			names[i] = m.Name
		}
		return ollama.New(ollama.Config{BaseURL: upstream, Models: names, NumCtx: DefaultOllamaContext})
	}
	return sim.New(sim.Config{Models: models, TTFT: simTTFT, TokensPerSecond: simTPS}), nil
}
