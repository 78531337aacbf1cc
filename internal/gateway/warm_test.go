package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

// unloaded is a simulated engine that reports no model loaded in memory.
type unloaded struct{ *sim.Engine }

func (unloaded) Loaded(context.Context) ([]string, error) { return nil, nil }

// A node with the model loaded wins over one that would have to load it, at equal price.
func TestRouting_WarmWins(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Coordinator.Fleet.HeartbeatInterval = 50 * time.Millisecond
		c.NewEngine = func(i int) (engine.Engine, error) {
			if i == 0 {
				return unloaded{sim.New(sim.Config{})}, nil
			}
			return sim.New(sim.Config{}), nil
		}
	})
	cold := env.Agents[0].NodeID()
	env.WaitFor("the cold node's heartbeat", func() bool {
		n := env.Coordinator().Fleet.Node(cold)
		return n != nil && !n.Offers[0].Warm()
	})
	client := env.Client()
	for range 10 {
		var resp *http.Response
		if _, err := client.Chat.Completions.New(context.Background(), chatParams("who is warm?", 1), option.WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		if node := resp.Header.Get("X-Shareai-Node"); node == cold {
			t.Fatalf("served by the cold node %s", node)
		}
	}
}
