package gateway

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

// modelOf is a model as /v1/models shows it, priced at the tiers' multipliers (tierprice.go).
func modelOf(mi fleet.ModelInfo, prices tier.Multipliers) api.Model {
	pricing := priceRangeAt(prices, mi, tier.Silver)
	m := api.Model{
		ID: mi.ID, Object: "model", Created: mi.Since.Unix(), OwnedBy: "shareai",
		Nodes: mi.Nodes, ContextLength: mi.ContextLength, Simulated: mi.Simulated, Regions: mi.Regions,
		Pricing: &pricing, ServiceTiers: priceRanges(prices, mi),
		LatencyMS: millis(mi.TTFT), Throughput: positive(mi.TokensPerSecond),
	}
	if !mi.Until.IsZero() {
		m.PricingUntil = mi.Until.Unix()
	}
	return m
}

// surgeFactor is a surge multiplier as a number, or nil for ×1.
func surgeFactor(bp int64) *float64 {
	if bp == 10000 || bp == 0 {
		return nil
	}
	f := float64(bp) / 10000
	return &f
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// millis is a duration in milliseconds, or nil when unmeasured.
func millis(d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	ms := float64(d.Microseconds()) / 1000
	return &ms
}

func positive(f float64) *float64 {
	if f <= 0 {
		return nil
	}
	return &f
}

func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request, c *call) error {
	list := api.ModelList{Object: "list", Data: []api.Model{}}
	for _, mi := range g.cfg.Fleet.Models() {
		if mayUse(c.key, mi.ID) {
			list.Data = append(list.Data, modelOf(mi, g.core.TierPrices()))
		}
	}
	return writeJSON(w, list)
}

// mayUse says whether a key may use a model: a key with allowed models sees only those in the
// market, as the gateway serves it only those (keyRules). A model it may not use is answered
// as one that does not exist, as OpenAI answers for a model a key has no access to.
func mayUse(k *store.Key, model string) bool {
	return len(k.Models) == 0 || slices.Contains(k.Models, model)
}

func (g *Gateway) getModel(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if mi, ok := g.cfg.Fleet.Model(id); ok && mayUse(c.key, id) {
		return writeJSON(w, modelOf(mi, g.core.TierPrices()))
	}
	// Model ids hold slashes, so /v1/models/{id}/endpoints arrives here too.
	if model, ok := strings.CutSuffix(id, "/endpoints"); ok {
		if offers := g.cfg.Fleet.LiveOffers(model); len(offers) > 0 && mayUse(c.key, model) {
			return writeJSON(w, endpointsOf(model, offers, g.core.TierPrices(), g.cfg.Now()))
		}
		id = model
	}
	return &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "model", Code: api.CodeModelNotFound,
		Message: fmt.Sprintf("The model '%s' does not exist or no node serves it now.", id)}
}

func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
	return nil
}

// endpointsOf lists a model's offers, priced at the tiers' multipliers (tierprice.go).
func endpointsOf(model string, offers []*fleet.Offer, prices tier.Multipliers, now time.Time) api.EndpointList {
	var list api.EndpointList
	list.Data.ID = model
	list.Data.Endpoints = make([]api.Endpoint, 0, len(offers))
	for _, o := range offers {
		st := o.Stats()
		p := o.Price()
		price := endpointPriceAt(prices, p, tier.Silver)
		list.Data.Endpoints = append(list.Data.Endpoints, api.Endpoint{
			NodeID: o.Node.ID, Region: o.Node.Region, Quantization: o.Quantization,
			Prompt: price.Prompt, Completion: price.Completion,
			ContextLength: o.ContextLength, MaxConcurrent: o.MaxConcurrent, Running: o.Running(),
			UptimeSeconds: int64(now.Sub(o.Node.Connected).Seconds()),
			LatencyMS:     millis(st.TTFT), Throughput: positive(st.TokensPerSecond), Reliability: fleet.Reliability(o.Node, st),
			Warm: o.Warm(), Simulated: o.Node.Hardware.Simulated, ServiceTiers: endpointPrices(prices, p),
			AskWindow: p.Window, Surge: surgeFactor(p.Surge), PriceUntil: unixOrZero(p.Until),
		})
	}
	slices.SortFunc(list.Data.Endpoints, func(a, b api.Endpoint) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return list
}
