package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// A buyer who disconnects cancels the job on the node, and the node's slot is free again.
func TestChat_BuyerCancelFreesSlot(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 20}
	})
	client := env.Client()
	ctx, cancel := context.WithCancel(context.Background())
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("a long answer, please", 1))
	if !stream.Next() {
		t.Fatalf("stream: %v", stream.Err())
	}
	if c, a := env.Running(); c != 1 || a != 1 {
		t.Fatalf("running jobs (coordinator, agent) = %d, %d; want 1, 1", c, a)
	}
	cancel()
	stream.Close()
	env.WaitFor("the job to stop on the node and its slot to be freed", func() bool {
		c, a := env.Running()
		return c == 0 && a == 0
	})

	// The only slot serves the next request.
	next := chatParams("next", 2)
	next.MaxTokens = openai.Int(3)
	got, err := client.Chat.Completions.New(context.Background(), next)
	if err != nil {
		t.Fatalf("request after cancel: %v", err)
	}
	if got.Choices[0].Message.Content == "" {
		t.Error("empty answer after cancel")
	}

	// The cancelled request is on record as cancelled.
	env.WaitFor("usage records", func() bool {
		us, _ := env.Store.Usages(context.Background(), keyAccount(t, env), 10)
		return len(us) == 2
	})
	us, _ := env.Store.Usages(context.Background(), keyAccount(t, env), 10)
	outcomes := map[string]int{}
	for _, u := range us {
		outcomes[u.Outcome]++
	}
	if outcomes[store.OutcomeCancelled] != 1 || outcomes[store.OutcomeOK] != 1 {
		t.Errorf("outcomes %v; want one cancelled and one ok", outcomes)
	}
}

func keyAccount(t *testing.T, env *testenv.Env) string {
	t.Helper()
	k, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	return k.AccountID
}

// One slow buyer, who stops reading, never stalls the other jobs on the same node connection.
func TestChat_SlowBuyerDoesNotStallOthers(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	slow := env.Post("/chat/completions", `{"model":"sim/llama-3.1-8b","stream":true,"messages":[{"role":"user","content":"slow reader"}]}`)
	defer slow.Body.Close()
	if slow.StatusCode != http.StatusOK {
		t.Fatalf("slow stream: %d", slow.StatusCode)
	}
	// Read nothing of it, and run others to completion beside it.
	client := env.Client()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := client.Chat.Completions.New(context.Background(), chatParams("fast", int64(i))); err != nil {
				t.Errorf("request %d beside a slow buyer: %v", i, err)
			}
		})
	}
	wg.Wait()
	// The slow buyer still gets a whole answer when it reads.
	var text strings.Builder
	sc := bufio.NewScanner(slow.Body)
	done := false
	for sc.Scan() {
		text.WriteString(sc.Text())
		if sc.Text() == "data: [DONE]" {
			done = true
		}
	}
	if !done {
		t.Errorf("slow stream ended without [DONE]: %q", text.String())
	}
}
