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
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/requestid"
	"github.com/shareai/shareai/internal/testenv"
)

// Flat ask $0.05 / $0.10 per 1M tokens (testenv's), and $0.40 / $0.80 at peak.
const peakIn, peakOut = 400_000_000, 800_000_000

var peakSchedule = &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{
	{Name: "peak", When: "mon-fri 09:00-18:00", InputPrice: peakIn, OutputPrice: peakOut}}}

// monday9 is a Monday 09:00 UTC: peak opens.
var monday9 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

// pricedNetwork is a network of one provider asking by peakSchedule, its coordinator on clk,
// set a minute before peak.
func pricedNetwork(t *testing.T, clk *testenv.Clock, opts ...testenv.Option) *testenv.Env {
	return testenv.New(t, append([]testenv.Option{testenv.Providers(1), testenv.WithClock(clk, monday9.Add(-time.Minute)),
		func(c *testenv.Config) { c.Agent.AskSchedule = peakSchedule }}, opts...)...)
}

// At the peak window's edge the price changes, in the matcher's candidates, in /v1/models and
// in what a request pays; a request that took its node before the edge settles at the ask it
// took it at, though it ends after; each part records its ask.
func TestDynamicPricing_AskChangesAtTheEdge(t *testing.T) {
	clk := &testenv.Clock{}
	env := pricedNetwork(t, clk, func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 200} })
	ctx := context.Background()
	co := env.Coordinator()
	key := buyer(t, env)
	fee := func(net money.Nanos) money.Nanos { return net + money.Fee(net, 500) }

	candidate := func() fleet.Price { return co.Fleet.Offers(model)[0].Price() }
	if p := candidate(); p.Input != 50_000_000 || p.Window != "" || !p.Until.Equal(monday9) {
		t.Fatalf("before the edge: %+v; want the flat ask until %s", p, monday9)
	}
	if got := modelPricing(t, env); got.PromptMin != 50_000_000 || got.CompletionMax != 100_000_000 {
		t.Errorf("/v1/models before the edge: %+v; want the flat ask", got)
	}

	// A request takes the node before the edge, and the edge passes while it streams.
	s := &sink{}
	var once sync.Once
	s.onPiece = func(n int) { once.Do(func() { clk.Jump(2 * time.Minute) }) }
	before, err := co.Core.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: chat(t, "a long answer across the edge", 1), Stream: true, Answer: s.open})
	if err != nil || s.failed != nil {
		t.Fatalf("serve: %v, %v", err, s.failed)
	}
	flat := fee(money.Price(50_000_000).Cost(before.Bill.PromptTokens) + money.Price(100_000_000).Cost(before.Bill.CompletionTokens))
	if before.Bill.Cost() != flat || before.Bill.Settlement.Parts[0].AskWindow != "" {
		t.Errorf("held before the edge: cost %s, part %+v; want the flat ask's %s", before.Bill.Cost(), before.Bill.Settlement.Parts[0], flat)
	}

	// After the edge: the candidates, /v1/models and a new request see the peak ask.
	if p := candidate(); p.Input != peakIn || p.Output != peakOut || p.Window != "peak" || !p.Until.Equal(monday9.Add(9*time.Hour)) {
		t.Errorf("after the edge: %+v; want peak until 18:00", p)
	}
	if got := modelPricing(t, env); got.PromptMin != peakIn || got.CompletionMax != peakOut {
		t.Errorf("/v1/models after the edge: %+v; want the peak ask", got)
	}
	after, err := co.Core.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: chat(t, "after the edge", 2), Answer: (&sink{}).open})
	if err != nil {
		t.Fatal(err)
	}
	peak := fee(money.Price(peakIn).Cost(after.Bill.PromptTokens) + money.Price(peakOut).Cost(after.Bill.CompletionTokens))
	if after.Bill.Cost() != peak || after.Bill.Settlement.Parts[0].AskWindow != "peak" || after.Bill.Settlement.Parts[0].Surge != 10000 {
		t.Errorf("after the edge: cost %s, part %+v; want peak's %s, ×1 surge", after.Bill.Cost(), after.Bill.Settlement.Parts[0], peak)
	}
}

// A buyer's max_price holds across an edge: a request priced within it a millisecond before
// peak is served, and one a millisecond after is refused, not billed at peak, although the
// candidates read for the first are well within their cache time (the edge makes them stale).
func TestDynamicPricing_MaxPriceHoldsAcrossTheEdge(t *testing.T) {
	clk := &testenv.Clock{}
	env := pricedNetwork(t, clk)
	ctx := context.Background()
	co := env.Coordinator()
	key := buyer(t, env)
	capped := api.Routing{Provider: json.RawMessage(`{"max_price":{"prompt":0.1,"completion":0.2}}`)}
	serve := func() (*core.Outcome, error) {
		return co.Core.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: chat(t, "capped", 3), Routing: capped, Answer: (&sink{}).open})
	}
	clk.Freeze(monday9.Add(-time.Millisecond))
	if out, err := serve(); err != nil || out.Bill.Settlement.Parts[0].AskWindow != "" {
		t.Fatalf("before the edge: %v; want served at the flat ask", err)
	}
	clk.Freeze(monday9)
	out, err := serve()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("after the edge: %v (outcome %+v); want 503, no node within max_price", err, out)
	}
	if !strings.Contains(strings.ToLower(ae.Message), "price") {
		t.Errorf("refusal %q; want it to say the price is over the cap", ae.Message)
	}
}

// modelPricing is the model's pricing as GET /v1/models shows it.
func modelPricing(t *testing.T, env *testenv.Env) api.PriceRange {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.BaseURL()+"/models", nil)
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list api.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Data {
		if m.ID == model && m.Pricing != nil {
			return *m.Pricing
		}
	}
	t.Fatalf("%s not in /v1/models: %+v", model, list)
	return api.PriceRange{}
}

// Surge multiplies the ask: buyers pay and the node earns ask × surge (fee on top), the part
// records the multiplier, and max_price bounds the surged price. (A floor above 1 surges an
// idle network, so that the test needs no load.)
func TestDynamicPricing_Surge(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Fleet.Surge = pricing.SurgeConfig{Enabled: true, Floor: 1.5, Ceiling: 2, Target: 0.7, Smoothing: time.Minute}
	})
	ctx := context.Background()
	co := env.Coordinator()
	key := buyer(t, env)
	co.Fleet.SampleSurge()
	out, err := co.Core.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: chat(t, "surged", 4), Answer: (&sink{}).open})
	if err != nil {
		t.Fatal(err)
	}
	net := money.Price(75_000_000).Cost(out.Bill.PromptTokens) + money.Price(150_000_000).Cost(out.Bill.CompletionTokens)
	part := out.Bill.Settlement.Parts[0]
	if out.Bill.Cost() != net+money.Fee(net, 500) || part.Earned != net || part.Surge != 15000 {
		t.Errorf("cost %s, part %+v; want ×1.5 the ask: %s earned, the fee on top", out.Bill.Cost(), part, net)
	}
	capped := api.Routing{Provider: json.RawMessage(`{"max_price":{"prompt":0.06}}`)} // the ask, not the surged price
	_, err = co.Core.Serve(ctx, &core.Request{ID: requestid.New(), Key: key, Job: chat(t, "capped", 5), Routing: capped, Answer: (&sink{}).open})
	if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Status != http.StatusServiceUnavailable {
		t.Errorf("max_price under the surged price: %v; want 503", err)
	}
}
