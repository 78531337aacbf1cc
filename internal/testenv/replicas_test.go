package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/testenv"
)

// A network of three replicas: they share the store and an embedded NATS server, the agents
// spread over them (agent i on replica i), each replica serves its buyers, and when one is
// killed its agent moves to another replica and serves from there.
func TestReplicas(t *testing.T) {
	env := testenv.New(t, testenv.Replicas(3), testenv.Providers(3))
	if got := len(env.URLs); got != 3 {
		t.Fatalf("%d replica URLs, want 3", got)
	}
	if env.NATSURL() == "" {
		t.Fatal("no NATS for the replicas")
	}
	for i, c := range env.Coordinators() {
		if c == nil {
			t.Fatalf("replica %d not running", i+1)
		}
		if got, want := env.Agents[i].Status().Coordinator, env.URLs[i]; got != want {
			t.Errorf("agent %d connected to %s, want replica %d's %s", i+1, got, i+1, want)
		}
		if name := env.ReplicaName(i); name == "" {
			t.Errorf("replica %d has no name", i+1)
		}
	}
	ask := func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client := env.ClientOf(i)
		models, err := client.Models.List(ctx)
		if err != nil || len(models.Data) == 0 {
			t.Fatalf("models of replica %d: %v (%d)", i+1, err, len(models.Data))
		}
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    models.Data[0].ID,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		})
		return err
	}
	for i := range 3 {
		if err := ask(i); err != nil {
			t.Errorf("replica %d: %v", i+1, err)
		}
	}

	env.StopReplica(0)
	if env.CoordinatorOf(0) != nil {
		t.Fatal("replica 1 still running after StopReplica")
	}
	env.WaitFor("agent 1 on another replica", func() bool {
		c := env.Agents[0].Status().Coordinator
		return c != "" && c != env.URLs[0]
	})
	if err := ask(1); err != nil {
		t.Errorf("replica 2 after replica 1 died: %v", err)
	}
	if err := env.StartReplica(0); err != nil {
		t.Fatalf("restart replica 1: %v", err)
	}
	if got, want := env.URLs[0], env.URL; got != want {
		t.Errorf("replica 1 restarted at %s, want %s", got, want)
	}
}
