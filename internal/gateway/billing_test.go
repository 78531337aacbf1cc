package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/meter"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/testenv"
)

// generation reads GET /v1/generation for a request, as its buyer.
func generation(t *testing.T, env *testenv.Env, requestID string) (g struct {
	NodeID           *string `json:"node_id"`
	TokensPrompt     int     `json:"tokens_prompt"`
	TokensCompletion int     `json:"tokens_completion"`
	CostUSD          string  `json:"cost_usd"`
	Outcome          string  `json:"outcome"`
}) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.BaseURL()+"/generation?id="+requestID, nil)
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/generation?id=%s: %d, %v", requestID, resp.StatusCode, err)
	}
	if err := json.Unmarshal(body.Data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// A stream cut mid-way with no node left to continue it is billed for what its buyer received,
// and the node that generated it earns it: not recorded as $0.
func TestBilling_CutWithNoNodeLeft(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Sim = sim.Config{TokensPerSecond: 100}
		c.Coordinator.Core.Queue = queue.Config{Timeout: 200 * time.Millisecond}
	})
	resp := streamReq(t, env, "Tell a long story.")
	defer resp.Body.Close()
	node, id := resp.Header.Get("X-Shareai-Node"), resp.Header.Get("X-Request-Id")
	a := readStream(t, resp, func(n int) {
		if n == 5 {
			env.StopAgent(0)
		}
	})
	if a.done || a.errText == "" {
		t.Fatalf("done %v, error %q; want the stream ended with an error", a.done, a.errText)
	}
	env.WaitFor("the request to be settled", func() bool { return balance(t, env).Held == 0 })
	received := meter.Words(a.text.String()) // the sim makes a token a word
	g := generation(t, env, id)
	if g.TokensCompletion != received || g.TokensPrompt == 0 || g.CostUSD == "0" || g.NodeID == nil || *g.NodeID != node || g.Outcome != "error" {
		t.Errorf("generation %+v; want %d completion tokens (those received), a prompt, a cost, node %s, outcome error", g, received, node)
	}
	prov, _ := env.Store.Account(context.Background(), "local-provider")
	earn, err := env.Store.Earnings(context.Background(), prov.ID, time.Now().Add(-time.Hour))
	if err != nil || len(earn) != 1 || earn[0].NodeID != node || earn[0].Pending <= 0 {
		t.Errorf("earnings %+v, %v; want node %s paid for what it generated", earn, err, node)
	}
	if b := balance(t, env); b.Spent <= 0 {
		t.Errorf("buyer spent %s; want the answer delivered paid for", b.Spent)
	}
	ledgerSumIsZero(t, env)
}

// A stream's bill is checkpointed soon after its first token (at the first flush 20 ms after
// it: here, the second token), with the tokens delivered (not an estimate from bytes). (A
// non-streamed answer, which its buyer gets only whole, is not: cmd/shareai's crash test
// kills the coordinator with one in flight.)
func TestBilling_CheckpointAtFirstToken(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 10} })
	ctx := context.Background()
	resp := streamReq(t, env, "Tell a long story.")
	defer resp.Body.Close()
	var text string
	readStream(t, resp, func(n int) {
		if n != 3 { // the role chunk, then two tokens
			return
		}
		env.WaitFor("the first checkpoint", func() bool {
			hs, _ := env.Store.OpenHolds(ctx)
			return len(hs) == 1 && hs[0].Checkpoint != nil
		})
		hs, _ := env.Store.OpenHolds(ctx)
		cp := hs[0].Checkpoint
		if cp.Usage == nil || cp.Usage.CompletionTokens < 1 || cp.Usage.CompletionTokens > 2 || cp.Debit <= 0 {
			t.Errorf("first checkpoint %+v (usage %+v); want one or two tokens delivered, billed", cp, cp.Usage)
		}
		resp.Body.Close() // the buyer goes: the request is billed, the hold closed
		text = "done"
	})
	if text == "" {
		t.Fatal("the stream ended before its third chunk")
	}
	env.WaitFor("the stream to be settled", func() bool { return balance(t, env).Held == 0 })
	ledgerSumIsZero(t, env)
}

// An answer not streamed that fails with no node to finish it reaches its buyer as an error
// only: it costs nothing, and its hold is closed.
func TestBilling_NonStreamedFailureCostsNothing(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return failsMidAnswer{sim.New(sim.Config{})}, nil
		}
	})
	client := env.Client()
	var resp *http.Response
	_, err := client.Chat.Completions.New(context.Background(), chatParams("A whole answer, please.", 5), option.WithResponseInto(&resp))
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("err %v; want a 502", err)
	}
	env.WaitFor("the request to be settled", func() bool { return balance(t, env).Held == 0 })
	if b := balance(t, env); b.Spent != 0 {
		t.Errorf("buyer spent %s on an answer it never got", b.Spent)
	}
	if g := generation(t, env, resp.Header.Get("X-Request-Id")); g.CostUSD != "0" || g.TokensCompletion != 0 || g.Outcome != "error" {
		t.Errorf("generation %+v; want an error that cost nothing", g)
	}
	ledgerSumIsZero(t, env)
}
