package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
)

func newTestAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	cfg.Coordinator, cfg.Token, cfg.DataDir = "http://127.0.0.1:1", "spt-test", t.TempDir()
	if cfg.Engine == nil {
		cfg.Engine = sim.New(sim.Config{Models: []engine.Model{
			{Name: "llama3.1:8b", ContextLength: 8192, Continues: true, Quantization: "Q4_K_M", Parameters: 8},
			{Name: "llama3.1:70b", ContextLength: 8192, Quantization: "Q4_K_M", Parameters: 70},
		}})
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Without offers configured, the node offers every model the engine serves at its settings.
func TestOffers_EveryModel(t *testing.T) {
	a := newTestAgent(t, Config{MaxConcurrent: 3, InputPrice: 1, OutputPrice: 2})
	got, err := a.offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Offer{
		{Model: "llama3.1:8b", ContextLength: 8192, MaxConcurrent: 3, Continues: true, Quantization: "Q4_K_M", InputPrice: 1, OutputPrice: 2},
		{Model: "llama3.1:70b", ContextLength: 8192, MaxConcurrent: 3, Continues: true, Quantization: "Q4_K_M", InputPrice: 1, OutputPrice: 2},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("offers = %+v\nwant %+v", got, want)
	}
}

// Configured offers take their own settings, the engine's for the rest.
func TestOffers_Configured(t *testing.T) {
	a := newTestAgent(t, Config{MaxConcurrent: 3, Offers: []protocol.Offer{
		{Model: "llama3.1:8b", ContextLength: 4096, InputPrice: 5, OutputPrice: 6},
	}})
	got, err := a.offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Offer{{Model: "llama3.1:8b", ContextLength: 4096, MaxConcurrent: 3, Continues: true, Quantization: "Q4_K_M", InputPrice: 5, OutputPrice: 6}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("offers = %+v\nwant %+v", got, want)
	}
}

// An offer the engine does not serve, or one that does not fit, stops the agent at start with
// a message saying so, without retrying.
func TestOffers_Refused(t *testing.T) {
	a := newTestAgent(t, Config{WaitForEngine: true, Offers: []protocol.Offer{{Model: "llama3.1:8b"}, {Model: "mistral:7b"}}})
	_, err := a.waitForEngine(context.Background())
	if !errors.Is(err, errFatal) || !strings.Contains(err.Error(), "the engine does not serve mistral:7b; it serves llama3.1:8b, llama3.1:70b") {
		t.Errorf("err = %v; want a fatal error naming the model and what the engine serves", err)
	}
	tooBig := func(m engine.Model, ctx int) error {
		if m.Parameters > 24 {
			return fmt.Errorf("%s does not fit", m.Name)
		}
		return nil
	}
	a = newTestAgent(t, Config{WaitForEngine: true, CheckFit: tooBig, Offers: []protocol.Offer{{Model: "llama3.1:70b"}}})
	_, err = a.waitForEngine(context.Background())
	if !errors.Is(err, errFatal) || !strings.Contains(err.Error(), "llama3.1:70b does not fit") {
		t.Errorf("err = %v; want a fatal error saying the 70B model does not fit", err)
	}

	// Offered by default, a model that does not fit is left out, unless none fits.
	a = newTestAgent(t, Config{WaitForEngine: true, CheckFit: tooBig})
	got, err := a.waitForEngine(context.Background())
	if err != nil || len(got) != 1 || got[0].Model != "llama3.1:8b" {
		t.Errorf("default offers = %+v, %v; want the 8B model alone", got, err)
	}
	a = newTestAgent(t, Config{WaitForEngine: true, CheckFit: func(m engine.Model, _ int) error { return fmt.Errorf("%s does not fit", m.Name) }})
	if _, err = a.waitForEngine(context.Background()); !errors.Is(err, errFatal) {
		t.Errorf("nothing fits: err = %v; want a fatal error", err)
	}
}

// A node offers at most protocol.MaxOffers models: the first the engine serves, when it serves
// more; and it refuses to start when told to offer more.
func TestOffers_AtMostMaxOffers(t *testing.T) {
	var models []engine.Model
	var named []protocol.Offer
	for i := range protocol.MaxOffers + 10 {
		models = append(models, engine.Model{Name: fmt.Sprintf("m%d", i), ContextLength: 8192})
		named = append(named, protocol.Offer{Model: fmt.Sprintf("m%d", i)})
	}
	a := newTestAgent(t, Config{MaxConcurrent: 1, Engine: sim.New(sim.Config{Models: models})})
	got, err := a.offers(context.Background())
	if err != nil || len(got) != protocol.MaxOffers || got[0].Model != "m0" {
		t.Errorf("%d offers, first %+v, err %v; want the first %d", len(got), got[0], err, protocol.MaxOffers)
	}
	a = newTestAgent(t, Config{MaxConcurrent: 1, Engine: sim.New(sim.Config{Models: models}), Offers: named})
	if _, err := a.offers(context.Background()); !errors.Is(err, errFatal) || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("%d named offers: %v; want a fatal error saying at most 64", len(named), err)
	}
}

// A provider's gold share keeps that share of every offer's slots for gold, to the nearest
// slot; no_bronze refuses bronze on every offer.
func TestOffers_Tiers(t *testing.T) {
	a := newTestAgent(t, Config{MaxConcurrent: 4, GoldShare: 0.25, NoBronze: true, Offers: []protocol.Offer{
		{Model: "llama3.1:8b"}, {Model: "llama3.1:70b", MaxConcurrent: 1},
	}})
	got, err := a.offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got[0].GoldSlots != 1 || !got[0].NoBronze || got[1].GoldSlots != 0 || !got[1].NoBronze {
		t.Errorf("offers = %+v; want 1 of 4 slots kept for gold, none of 1, bronze refused on both", got)
	}
}

// The node's ask schedule (the provider file's price.windows) reaches every offer it makes of
// the engine's models; a configured offer carries its own.
func TestOffers_AskSchedule(t *testing.T) {
	node := &protocol.AskSchedule{Timezone: "Europe/Berlin", Windows: []protocol.AskWindow{{Name: "peak", When: "mon-fri 09:00-18:00", InputPrice: 3, OutputPrice: 6}}}
	a := newTestAgent(t, Config{InputPrice: 1, OutputPrice: 2, AskSchedule: node})
	got, err := a.offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range got {
		if o.AskSchedule != node || o.InputPrice != 1 {
			t.Errorf("offer %s: schedule %+v, ask %d; want the node's schedule over the flat ask 1", o.Model, o.AskSchedule, o.InputPrice)
		}
	}
	own := &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{{Name: "night", When: "daily 00:00-06:00", InputPrice: 1, OutputPrice: 1}}}
	a = newTestAgent(t, Config{AskSchedule: node, Offers: []protocol.Offer{{Model: "llama3.1:8b", AskSchedule: own}}})
	if got, err = a.offers(context.Background()); err != nil || got[0].AskSchedule != own {
		t.Errorf("configured offer: %+v, %v; want its own schedule", got, err)
	}
}
