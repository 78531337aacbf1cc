package gateway_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

// Chaos: many streamed requests over four simulated nodes, three of which drop their
// connection or stall mid-answer at random (and reconnect). Every answer equals, character for
// character, the undisturbed answer to the same request; none fails while one node stays
// healthy; money is conserved; no goroutine is left behind.
func TestChaos_FailoverKeepsEveryAnswerWhole(t *testing.T) {
	requests := 1000
	if testing.Short() {
		requests = 100
	}
	goroutines := runtime.NumGoroutine()
	env := testenv.New(t, testenv.Providers(4), func(c *testenv.Config) {
		c.Healthy = 1
		c.Agent.MaxConcurrent = 64
		c.Coordinator.Core.StallTimeout = time.Second
		c.Agent.Chaos = agent.Chaos{Drop: 0.15, Stall: 0.1}
		c.Sim = sim.Config{TokensPerSecond: 1500}
	})
	client := env.Client()
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		sem    = make(chan struct{}, 50)
	)
	for i := range requests {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			prompt := fmt.Sprintf("chaos %d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			params := chatParams(prompt, int64(i))
			maxTokens := 0
			if i%2 == 1 {
				maxTokens = 10 + i%50 // cut by max_tokens, before or after a failover
				params.MaxTokens = openai.Int(int64(maxTokens))
			}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var text strings.Builder
			for stream.Next() {
				if c := stream.Current(); len(c.Choices) > 0 {
					text.WriteString(c.Choices[0].Delta.Content)
				}
			}
			if err := stream.Err(); err != nil {
				failed.Add(1)
				t.Errorf("request %d failed: %v", i, err)
				return
			}
			if w := wantN(t, prompt, int64(i), maxTokens); text.String() != w {
				t.Errorf("request %d: answer differs from the undisturbed one:\n got %q\nwant %q", i, text.String(), w)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Errorf("%d of %d requests failed with a healthy node in the network", failed.Load(), requests)
	}
	env.WaitFor("every request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
	env.Close()
	testenv.WaitFor(t, "goroutines to wind down", func() bool { return runtime.NumGoroutine() <= goroutines+5 })
}
