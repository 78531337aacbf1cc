package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// broken is an engine whose server fails every request before answering.
type broken struct {
	*sim.Engine
	jobs *atomic.Int64
}

func (e broken) Run(context.Context, *protocol.Request, engine.Output) (engine.Result, error) {
	e.jobs.Add(1)
	return engine.Result{}, errors.New("upstream: 500 internal server error")
}

// A node that fails before its first token is replaced by another, and the buyer never sees it.
func TestRetry_NodeFailingBeforeFirstToken(t *testing.T) {
	var failed atomic.Int64
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.NewEngine = func(i int) (engine.Engine, error) {
			if i == 0 {
				return broken{sim.New(sim.Config{}), &failed}, nil
			}
			return sim.New(sim.Config{}), nil
		}
	})
	client := env.Client()
	healthy := env.Agents[1].NodeID()
	for i := range 12 {
		var resp *http.Response
		got, err := client.Chat.Completions.New(context.Background(), chatParams(fmt.Sprintf("try %d", i), int64(i)), option.WithResponseInto(&resp))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if node := resp.Header.Get("X-Shareai-Node"); node != healthy || got.Choices[0].Message.Content == "" {
			t.Errorf("request %d answered by %s; want the healthy node %s", i, node, healthy)
		}
	}
	if failed.Load() == 0 {
		t.Error("the broken node never got a job: the test did not exercise a retry")
	}
	env.WaitFor("every request to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)

	// With the healthy node gone, the buyer gets a clear 503, and pays nothing.
	env.StopAgent(1)
	env.WaitFor("the healthy node to leave", func() bool { return len(env.Coordinator().Fleet.Nodes()) == 1 })
	before := balance(t, env)
	_, err := client.Chat.Completions.New(context.Background(), chatParams("anyone?", 1))
	e := assertAPIError(t, err, http.StatusServiceUnavailable, "no_provider_available")
	if !strings.Contains(e.Message, "failed before answering") {
		t.Errorf("message %q does not say the node failed", e.Message)
	}
	if strings.Contains(e.Message, "internal server error") {
		t.Errorf("message %q shows the buyer the node engine's own words", e.Message)
	}
	env.WaitFor("the failed request to be closed", func() bool { return balance(t, env).Held == 0 })
	if after := balance(t, env); after.Spent != before.Spent {
		t.Errorf("spent %s → %s for a request no node answered", before.Spent, after.Spent)
	}
}
