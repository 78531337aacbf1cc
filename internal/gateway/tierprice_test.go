package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/shareai/shareai/internal/testenv"
	"github.com/shareai/shareai/internal/tier"
)

// /v1/models and /v1/models/{id}/endpoints price every service tier at the operator's
// multipliers of the asks ($0.05 and $0.10 per million tokens in testenv), and keep their
// price fields as the default tier's.
func TestModels_TierPrices(t *testing.T) {
	prices, err := tier.ParseMultipliers("gold=2,silver=1.2,bronze=0.25")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Core.TierPrices = prices })
	type priceRange struct {
		PromptMin     json.Number `json:"prompt_min"`
		PromptMax     json.Number `json:"prompt_max"`
		CompletionMin json.Number `json:"completion_min"`
		CompletionMax json.Number `json:"completion_max"`
	}
	type price struct {
		Prompt     json.Number `json:"prompt_price"`
		Completion json.Number `json:"completion_price"`
	}
	want := map[string]price{
		"priority": {"0.1", "0.2"},
		"default":  {"0.06", "0.12"},
		"flex":     {"0.0125", "0.025"},
	}

	var list struct {
		Data []struct {
			ID           string                `json:"id"`
			Pricing      priceRange            `json:"pricing"`
			ServiceTiers map[string]priceRange `json:"service_tiers"`
		} `json:"data"`
	}
	raw := getJSON(t, env, "/models", &list)
	if len(list.Data) == 0 {
		t.Fatalf("/models lists nothing: %s", raw)
	}
	for _, m := range list.Data {
		if m.Pricing != (priceRange{"0.06", "0.06", "0.12", "0.12"}) {
			t.Errorf("%s: pricing %+v; want the default tier's, 0.06 and 0.12", m.ID, m.Pricing)
		}
		if len(m.ServiceTiers) != len(want) {
			t.Errorf("%s: service_tiers %v; want %d tiers", m.ID, m.ServiceTiers, len(want))
		}
		for name, p := range want {
			if got := m.ServiceTiers[name]; got != (priceRange{p.Prompt, p.Prompt, p.Completion, p.Completion}) {
				t.Errorf("%s: service_tiers.%s = %+v; want %s and %s", m.ID, name, got, p.Prompt, p.Completion)
			}
		}
	}

	model := list.Data[0].ID
	var one struct {
		ServiceTiers map[string]priceRange `json:"service_tiers"`
	}
	getJSON(t, env, "/models/"+model, &one)
	if got := one.ServiceTiers["flex"]; got.PromptMin != "0.0125" {
		t.Errorf("/models/%s: service_tiers.flex %+v; want 0.0125 per million prompt tokens", model, got)
	}

	var eps struct {
		Data struct {
			Endpoints []struct {
				NodeID string `json:"node_id"`
				price
				ServiceTiers map[string]price `json:"service_tiers"`
			} `json:"endpoints"`
		} `json:"data"`
	}
	raw = getJSON(t, env, "/models/"+model+"/endpoints", &eps)
	if len(eps.Data.Endpoints) != 1 {
		t.Fatalf("endpoints: %s; want the one node", raw)
	}
	e := eps.Data.Endpoints[0]
	if e.price != want["default"] {
		t.Errorf("endpoint %s: prices %+v; want the default tier's %+v", e.NodeID, e.price, want["default"])
	}
	for name, p := range want {
		if got := e.ServiceTiers[name]; got != p {
			t.Errorf("endpoint %s: service_tiers.%s = %+v; want %+v", e.NodeID, name, got, p)
		}
	}
}
