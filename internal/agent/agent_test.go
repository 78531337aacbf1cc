package agent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

// Agents reconnect on their own after the coordinator restarts, and keep their node ids.
func TestAgent_ReconnectsAfterCoordinatorRestart(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) { c.Coordinator.Fleet.HeartbeatInterval = 200 * time.Millisecond })
	ids := map[string]bool{}
	for _, a := range env.Agents {
		ids[a.NodeID()] = true
	}
	if err := env.StopCoordinator(); err != nil {
		t.Fatalf("stop coordinator: %v", err)
	}
	if err := env.StartCoordinator(); err != nil {
		t.Fatalf("restart coordinator: %v", err)
	}
	env.WaitFor("both agents to register again", func() bool {
		return env.Agents[0].Registrations() == 2 && env.Agents[1].Registrations() == 2 &&
			len(env.Coordinator().Fleet.Nodes()) == 2
	})
	for _, n := range env.Coordinator().Fleet.Nodes() {
		if !ids[n.ID] {
			t.Errorf("node %s after restart is not one of %v", n.ID, ids)
		}
	}
	client := env.Client()
	got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "sim/llama-3.1-8b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("back?")},
	})
	if err != nil || got.Choices[0].Message.Content == "" {
		t.Fatalf("request after restart: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempt  int
		random   float64
		min, max time.Duration
	}{
		{0, 0, 125 * time.Millisecond, 125 * time.Millisecond},
		{0, 0.999, 125 * time.Millisecond, 250 * time.Millisecond},
		{3, 0.5, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{7, 0.999, 15 * time.Second, 30 * time.Second},
		{50, 0, 15 * time.Second, 15 * time.Second},
		{1000, 0.999, 15 * time.Second, 30 * time.Second},
	}
	for _, tt := range tests {
		got := agent.Backoff(tt.attempt, func() float64 { return tt.random })
		if got < tt.min || got > tt.max {
			t.Errorf("Backoff(%d, %v) = %v; want in [%v, %v]", tt.attempt, tt.random, got, tt.min, tt.max)
		}
	}
}

func TestLoadOrCreateNodeKey_Persists(t *testing.T) {
	dir := t.TempDir()
	k1, err := agent.LoadOrCreateNodeKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := agent.LoadOrCreateNodeKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Error("a second start made a new node key; want the same identity")
	}
}

// An agent whose engine starts after it keeps trying, and registers once the engine answers.
func TestAgent_WaitsForItsEngine(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	eng := &late{Engine: sim.New(sim.Config{})}
	a, err := agent.New(agent.Config{Coordinator: env.URL, Token: env.ProviderToken, DataDir: t.TempDir(),
		Engine: eng, WaitForEngine: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	testenv.WaitFor(t, "the agent to ask the engine twice", func() bool { return eng.asked.Load() >= 2 })
	eng.up.Store(true)
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("agent stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not register once its engine answered")
	}
}

// late is a simulated engine that does not answer until up.
type late struct {
	*sim.Engine
	up    atomic.Bool
	asked atomic.Int32
}

func (e *late) Models(ctx context.Context) ([]engine.Model, error) {
	e.asked.Add(1)
	if !e.up.Load() {
		return nil, errors.New("connection refused")
	}
	return e.Engine.Models(ctx)
}

// An agent given several coordinators tries them in turn: it connects to the second when the
// first is down, and when the one it is connected to goes away (killed, not drained), it
// reconnects to the other within seconds.
func TestAgent_TriesItsCoordinatorsInTurn(t *testing.T) {
	env := testenv.New(t, testenv.Replicas(2), testenv.Providers(0))
	env.StopReplica(0)
	a, err := agent.New(agent.Config{Coordinator: env.URLs[0] + "," + env.URLs[1], Token: env.ProviderToken,
		DataDir: t.TempDir(), Engine: sim.New(sim.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("agent stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not connect to the second coordinator")
	}
	if got, want := a.Status().Coordinator, env.URLs[1]; got != want {
		t.Fatalf("connected to %q, want %q (the first is down)", got, want)
	}
	if err := env.StartReplica(0); err != nil {
		t.Fatal(err)
	}
	env.StopReplica(1)
	stopped := time.Now()
	testenv.WaitFor(t, "the agent to reconnect to the first coordinator", func() bool {
		return a.Status().Coordinator == env.URLs[0] && env.CoordinatorOf(0).Fleet.Node(a.NodeID()) != nil
	})
	if d := time.Since(stopped); d > 5*time.Second {
		t.Errorf("reconnected after %v, want within seconds", d)
	}
	if got := a.Registrations(); got != 2 {
		t.Errorf("registrations = %d, want 2", got)
	}
}
