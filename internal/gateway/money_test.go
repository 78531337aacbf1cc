package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// expectedCost is what the test network charges: $0.05 and $0.10 per 1M tokens, plus 5%.
func expectedCost(prompt, completion int) money.Nanos {
	net := money.Price(50_000_000).Cost(prompt) + money.Price(100_000_000).Cost(completion)
	return net + money.Fee(net, 500)
}

func balance(t *testing.T, env *testenv.Env) *store.Balance {
	t.Helper()
	b, err := env.Store.Balance(context.Background(), keyAccount(t, env))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ledgerSumIsZero(t *testing.T, env *testenv.Env) {
	t.Helper()
	if sum, err := env.Store.LedgerSum(context.Background()); err != nil || sum != 0 {
		t.Errorf("ledger sum = %d, %v; want 0", sum, err)
	}
}

func TestCost_ReportedAndCharged(t *testing.T) {
	env := testenv.New(t)
	client := env.Client()
	ctx := context.Background()
	before := balance(t, env)

	var resp *http.Response
	got, err := client.Chat.Completions.New(ctx, chatParams("What does this cost?", 1), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	want := expectedCost(int(got.Usage.PromptTokens), int(got.Usage.CompletionTokens))
	var usage struct {
		Cost float64 `json:"cost"`
	}
	if err := jsonUnmarshal(got.Usage.RawJSON(), &usage); err != nil {
		t.Fatal(err)
	}
	if usage.Cost != want.Float() || resp.Header.Get(relay.HeaderCost) != want.String() {
		t.Errorf("usage.cost %v, header %q; want %v", usage.Cost, resp.Header.Get(relay.HeaderCost), want)
	}

	// Streamed: the cost is in the usage chunk and in the trailer.
	body := `{"model":"sim/llama-3.1-8b","stream":true,"stream_options":{"include_usage":true},"seed":1,"messages":[{"role":"user","content":"What does this cost?"}]}`
	sresp := env.Post("/chat/completions", body)
	var usageLine string
	sc := bufio.NewScanner(sresp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"usage":`) {
			usageLine = sc.Text()
		}
	}
	io.Copy(io.Discard, sresp.Body)
	sresp.Body.Close()
	if !strings.Contains(usageLine, `"cost":`+want.String()+`}`) {
		t.Errorf("usage chunk %q; want cost %s", usageLine, want)
	}
	if tr := sresp.Trailer.Get(relay.HeaderCost); tr != want.String() {
		t.Errorf("cost trailer %q, want %s", tr, want)
	}

	env.WaitFor("both requests to be settled", func() bool { return balance(t, env).Held == 0 })
	after := balance(t, env)
	if spent := before.Credits - after.Credits; spent != 2*want || after.Held != 0 || after.Spent != 2*want {
		t.Errorf("balance went %s → %s (held %s, spent %s); want 2 × %s charged", before.Credits, after.Credits, after.Held, after.Spent, want)
	}
	rec, err := env.Store.UsageByRequest(ctx, resp.Header.Get("X-Request-Id"))
	if err != nil || rec.Cost != want || rec.Outcome != store.OutcomeOK {
		t.Errorf("usage record %+v, %v; want cost %s", rec, err, want)
	}
	ledgerSumIsZero(t, env)
}

func TestCost_InsufficientCredits(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Credit = 1 })
	client := env.Client()
	_, err := client.Chat.Completions.New(context.Background(), chatParams("hi", 1))
	e := assertAPIError(t, err, http.StatusPaymentRequired, "insufficient_credits")
	if !strings.Contains(e.Message, "$0.000000001 available") {
		t.Errorf("message %q does not say what is available", e.Message)
	}
	if c, a := env.Running(); c != 0 || a != 0 {
		t.Errorf("running jobs %d, %d after a refused hold; want none (the slot is released)", c, a)
	}
}

func TestCost_SpendLimit(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	k, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.SetCap(context.Background(), store.Cap{Scope: store.KeyScope(k.ID), Period: store.Weekly, Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	client := env.Client()
	_, err = client.Chat.Completions.New(context.Background(), chatParams("hi", 1))
	e := assertAPIError(t, err, http.StatusPaymentRequired, "spend_limit_exceeded")
	if !strings.Contains(e.Message, "weekly API key spend limit of $0.000001") || !strings.Contains(e.Message, "resets at") {
		t.Errorf("message %q does not say which limit and when it resets", e.Message)
	}
}

// A buyer who goes away mid-stream pays for what was delivered: not nothing.
func TestCost_CancelledStreamIsBilled(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 50} })
	client := env.Client()
	ctx, cancel := context.WithCancel(context.Background())
	var resp *http.Response
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("a long answer", 1), option.WithResponseInto(&resp))
	for range 3 {
		if !stream.Next() {
			t.Fatalf("stream: %v", stream.Err())
		}
	}
	cancel()
	stream.Close()
	id := resp.Header.Get("X-Request-Id")
	var rec *store.Usage
	env.WaitFor("the cancelled request to be billed", func() bool {
		rec, _ = env.Store.UsageByRequest(context.Background(), id)
		return rec != nil
	})
	if rec.Outcome != store.OutcomeCancelled || rec.Cost <= 0 || rec.CompletionTokens == 0 || rec.PromptTokens == 0 {
		t.Errorf("cancelled request's record %+v; want it billed for its prompt and the tokens delivered", rec)
	}
	if b := balance(t, env); b.Held != 0 || b.Spent != rec.Cost {
		t.Errorf("balance %+v; want nothing held and the cancelled request's cost spent", b)
	}
	ledgerSumIsZero(t, env)
}
