package main

import (
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/openaicompat"
	"github.com/shareai/shareai/internal/engine/sim"
)

// newEngine makes the engine a provider runs.
func newEngine(kind, upstream, apiKey, continues string, models []engine.Model, simTTFT time.Duration, simTPS float64) (engine.Engine, error) {
	if kind == "openai" {
		return openaicompat.New(openaicompat.Config{BaseURL: upstream, APIKey: apiKey, Models: models, Continue: continues})
	}
	return sim.New(sim.Config{Models: models, TTFT: simTTFT, TokensPerSecond: simTPS}), nil
}
