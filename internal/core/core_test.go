package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/core"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/relay"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// The core runs requests for callers that are not HTTP handlers: these tests call it as the
// playground, the prober and the batch runner do, with a sink of their own, over a network of
// real agents, and check the answer and the money.

const model = "sim/llama-3.1-8b"

// sink is an answer as the core writes it: its pieces, its end or its failure, and what the
// core said when a node took the request.
type sink struct {
	mu      sync.Mutex
	begins  []core.Begin
	text    strings.Builder
	pieces  int
	finish  string
	usage   protocol.Usage
	cost    money.Nanos
	failed  error
	onPiece func(n int) // called after each piece, outside the lock
}

func (s *sink) open(b core.Begin) relay.Sink {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begins = append(s.begins, b)
	return s
}

func (s *sink) Delta(d *protocol.Delta) error {
	s.mu.Lock()
	s.text.WriteString(d.Text)
	s.pieces++
	n := s.pieces
	s.mu.Unlock()
	if s.onPiece != nil {
		s.onPiece(n)
	}
	return nil
}

func (s *sink) Flush() error { return nil }

func (s *sink) End(finish string, u protocol.Usage, cost money.Nanos) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finish, s.usage, s.cost = finish, u, cost
	return nil
}

func (s *sink) Fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = err
	return nil
}

func chat(t *testing.T, prompt string, seed int64) *protocol.Request {
	t.Helper()
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": prompt}})
	return &protocol.Request{Kind: protocol.KindChat, Model: model, Messages: msgs, Seed: &seed}
}

// buyer is the network's buyer account and key.
func buyer(t *testing.T, env *testenv.Env) *store.Key {
	t.Helper()
	k, err := env.Store.KeyByHash(context.Background(), store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func settled(t *testing.T, env *testenv.Env, account string) *store.Balance {
	t.Helper()
	var b *store.Balance
	env.WaitFor("the request to be settled", func() bool {
		var err error
		b, err = env.Store.Balance(context.Background(), account)
		return err == nil && b.Held == 0
	})
	return b
}

// A node that vanishes mid-answer is replaced with no HTTP anywhere on the buyer's side: the
// sink gets one unbroken answer, the same as an undisturbed run's, made once; the account pays
// what the stored usage says, the sink was told that cost, both nodes earn, and the ledger
// balances. The account pays directly, with no key, as the playground's chats do.
func TestServe_FailoverAndBilling(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 100} })
	ctx := context.Background()
	acct := buyer(t, env).AccountID
	before, err := env.Store.Balance(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "Tell a long story about failover."
	job := chat(t, prompt, 5)
	s := &sink{}
	var once sync.Once
	s.onPiece = func(n int) {
		if n == 5 {
			once.Do(func() {
				s.mu.Lock()
				first := s.begins[0].Node
				s.mu.Unlock()
				for i, a := range env.Agents {
					if a.NodeID() == first {
						env.StopAgent(i) // the node's machine goes away mid-answer
					}
				}
			})
		}
	}
	id := requestid.New()
	out, err := env.Coordinator().Core.Serve(ctx, &core.Request{ID: id, Account: acct, Job: job, Stream: true, Answer: s.open})
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	if want := sim.New(sim.Config{}).Answer(job); s.text.String() != want || s.finish != "stop" || s.failed != nil {
		t.Errorf("answer %q, finish %q, failed %v; want the undisturbed answer %q, stop", s.text.String(), s.finish, s.failed, want)
	}
	if len(s.begins) != 1 || s.begins[0].Answer.ID != "chatcmpl-"+strings.TrimPrefix(id, "req_") || s.begins[0].Answer.Model != model {
		t.Errorf("begins %+v; want one, naming the answer chatcmpl-… of %s", s.begins, model)
	}
	u := out.Usage
	if u.Outcome != store.OutcomeOK || u.KeyID != "" || u.AccountID != acct || out.Bill == nil || out.Bill.Cost() != s.cost || s.cost <= 0 {
		t.Fatalf("outcome %+v, bill %+v, sink told %s; want ok, the account's, no key, billed what the sink was told", u, out.Bill, s.cost)
	}
	if out.Billed() != s.usage.PromptTokens+s.usage.CompletionTokens {
		t.Errorf("billed %d tokens; the sink was told %+v", out.Billed(), s.usage)
	}

	after := settled(t, env, acct)
	if spent := after.Spent - before.Spent; spent != s.cost {
		t.Errorf("the account spent %s; the answer cost %s", spent, s.cost)
	}
	if sum, err := env.Store.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sum %d, %v; want 0", sum, err)
	}
	prov, err := env.Store.Account(ctx, "local-provider")
	if err != nil {
		t.Fatal(err)
	}
	if earn, err := env.Store.Earnings(ctx, prov.ID, time.Now().Add(-time.Hour)); err != nil || len(earn) != 2 {
		t.Errorf("earnings %+v, %v; want both nodes paid for their parts", earn, err)
	}
	var rec *store.Usage
	env.WaitFor("the usage record", func() bool {
		rec, err = env.Store.UsageByRequest(ctx, id)
		return err == nil
	})
	if rec.Cost != s.cost || rec.CompletionTokens != s.usage.CompletionTokens || rec.KeyID != "" {
		t.Errorf("stored usage %+v; want the cost and tokens the sink was told, and no key", rec)
	}
}

// A request no node can take returns the buyer's error, with nothing held or billed, and the
// sink is never opened; a key's rules apply without HTTP too.
func TestServe_Refusals(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	key := buyer(t, env)
	c := env.Coordinator().Core
	s := &sink{}

	_, err := c.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: &protocol.Request{Kind: protocol.KindChat, Model: "sim/none",
		Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)}, Answer: s.open})
	if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Status != http.StatusNotFound || ae.Code != api.CodeModelNotFound {
		t.Errorf("unknown model: %v; want 404 model_not_found", err)
	}

	ruled := *key
	ruled.Models = []string{"sim/other"}
	_, err = c.Serve(ctx, &core.Request{ID: requestid.New(), Key: &ruled, Job: chat(t, "hi", 1), Answer: s.open})
	if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Status != http.StatusForbidden {
		t.Errorf("a model the key may not use: %v; want 403", err)
	}

	_, err = c.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: chat(t, "hi", 1), Routing: api.Routing{Provider: json.RawMessage(`{"sort":"cheapest"}`)}, Answer: s.open})
	if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Status != http.StatusBadRequest || ae.Param != "provider.sort" {
		t.Errorf("bad routing: %v; want 400 on provider.sort", err)
	}
	if len(s.begins) != 0 {
		t.Errorf("the sink was opened %d times for refused requests", len(s.begins))
	}
	if b := settled(t, env, key.AccountID); b.Spent != 0 {
		t.Errorf("spent %s on refused requests", b.Spent)
	}
}

// A replica that has just started, before the others' nodes are in view, does not call a
// model it sees no node of unknown: the request waits for the view (a load balancer may send
// it requests before its readiness check says it is ready), and is told 404 once the view is
// in and no node serves it. The models its own nodes serve are served meanwhile.
func TestServe_JoiningReplicaWaitsForTheView(t *testing.T) {
	env := testenv.New(t)
	c, f := env.Coordinator().Core, env.Coordinator().Fleet
	key := buyer(t, env)
	f.SetPeers(testenv.NoPeers{})
	unknown := func(ctx context.Context) error {
		_, err := c.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: &protocol.Request{Kind: protocol.KindChat, Model: "sim/none",
			Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)}, Answer: (&sink{}).open})
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := unknown(ctx); !errors.Is(err, core.ErrBuyerGone) {
		t.Errorf("a model not in view while joining: %v; want it to wait for the view until the buyer left", err)
	}
	s := &sink{}
	if _, err := c.Serve(context.Background(), &core.Request{ID: requestid.New(), Key: key, Job: chat(t, "hi", 1), Answer: s.open}); err != nil || s.finish != "stop" {
		t.Errorf("a model its own node serves, while joining: %v, finish %q; want it served", err, s.finish)
	}

	done := make(chan error, 1)
	go func() { done <- unknown(context.Background()) }()
	f.Joined()
	err := <-done
	if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Status != http.StatusNotFound || ae.Code != api.CodeModelNotFound {
		t.Errorf("a model no node serves, once the view is in: %v; want 404 model_not_found", err)
	}
	if b := settled(t, env, key.AccountID); b.Held != 0 {
		t.Errorf("held %s after the refused requests", b.Held)
	}
}

// failing is an engine whose every answer fails before its first token, with words of its
// own a buyer must not see.
type failing struct{ *sim.Engine }

func (failing) Run(context.Context, *protocol.Request, engine.Output) (engine.Result, error) {
	return engine.Result{}, errors.New("CUDA out of memory at /home/owner/secret/model.gguf")
}

// A node's engine's own error text is recorded for its provider, as an event of the node,
// and is never in what the buyer reads: neither the error nor the usage record (which the
// console's request page shows). errors.As still finds what the node reported.
func TestServe_EngineWordsNotShown(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) { return failing{sim.New(sim.Config{})}, nil }
	})
	ctx := context.Background()
	id := requestid.New()
	_, err := env.Coordinator().Core.Serve(ctx, &core.Request{ID: id, Key: buyer(t, env), Job: chat(t, "hi", 1), Answer: (&sink{}).open})
	ae, ok := errors.AsType[*api.Error](err)
	if !ok || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("err %v; want a 503", err)
	}
	if strings.Contains(ae.Message, "CUDA") || strings.Contains(ae.Message, "/home/owner") || !strings.Contains(ae.Message, "failed before answering") {
		t.Errorf("the buyer is told %q; want that the node failed, without its engine's words", ae.Message)
	}
	if pe, ok := errors.AsType[*protocol.Error](err); !ok || !strings.Contains(pe.Message, "CUDA out of memory") {
		t.Errorf("the error's cause %v; want the node's error, for the log", err)
	}
	var rec *store.Usage
	env.WaitFor("the usage record", func() bool {
		var err error
		rec, err = env.Store.UsageByRequest(ctx, id)
		return err == nil
	})
	if rec.Cost != 0 || rec.Outcome != store.OutcomeError || strings.Contains(rec.Error, "CUDA") || !strings.Contains(rec.Error, "failed before answering") {
		t.Errorf("usage %+v; want an error that cost nothing, saying the node failed without its words", rec)
	}
	events, err := env.Store.NodeEvents(ctx, env.Agents[0].NodeID(), 10)
	if err != nil || len(events) != 1 || events[0].Kind != store.EventEngineError || !strings.Contains(events[0].Detail, "CUDA out of memory") ||
		!strings.Contains(events[0].Detail, id) {
		t.Errorf("node events %+v, %v; want one engine_error with the node's words and the request", events, err)
	}
}

// A pinned request runs on the offer whose slot its caller took, and a deferred one leaves
// its hold open until the caller settles it: at most the completion it allows, the node
// flagged for claiming more. Settling again does nothing. (The prober's checks.)
func TestServe_PinnedDeferred(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2))
	ctx := context.Background()
	key := buyer(t, env)
	node := env.Agents[1].NodeID()
	var offer *fleet.Offer
	for _, o := range env.Coordinator().Fleet.Offers(model) {
		if o.Node.ID == node {
			offer = o
		}
	}
	if offer == nil || !offer.Acquire() {
		t.Fatalf("no slot on node %s's offer", node)
	}
	s := &sink{}
	id := requestid.New()
	out, err := env.Coordinator().Core.Serve(ctx, &core.Request{ID: id, Key: key, Job: chat(t, "Count to ten.", 3), Offer: offer, Defer: true, Answer: s.open})
	if err != nil || out.Usage.NodeID != node || out.Usage.Outcome != store.OutcomeOK {
		t.Fatalf("serve: %v, usage %+v; want an answer from the pinned node %s", err, out.Usage, node)
	}
	if out.Claimed.CompletionTokens <= 2 {
		t.Fatalf("claimed %+v; the test needs an answer of more than 2 tokens", out.Claimed)
	}
	time.Sleep(100 * time.Millisecond) // what a settlement queued would need to land
	if b, _ := env.Store.Balance(ctx, key.AccountID); b.Held == 0 {
		t.Fatal("the deferred request's hold was settled before its caller settled it")
	}
	flagged := func() int {
		n, err := env.Store.Node(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		return n.Overclaims
	}
	before := flagged()
	out.Settle(2)
	out.Settle(-1) // once only
	settled(t, env, key.AccountID)
	var rec *store.Usage
	env.WaitFor("the usage record", func() bool {
		rec, err = env.Store.UsageByRequest(ctx, id)
		return err == nil
	})
	if rec.CompletionTokens != 2 {
		t.Errorf("billed %d completion tokens; want the 2 the caller allowed", rec.CompletionTokens)
	}
	env.WaitFor("the node to be flagged", func() bool { return flagged() == before+1 })
	if sum, err := env.Store.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sum %d, %v; want 0", sum, err)
	}
}
