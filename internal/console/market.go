package console

import (
	"net/http"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// marketModel is one row of /models: a model served now, as GET /v1/models describes it.
type marketModel struct {
	ID            string
	Nodes         int
	ContextLength int
	Simulated     bool
	// Prices are the range of the nodes' asks per 1M tokens at the default tier, as a request
	// that names no tier pays them; Tiers the range at each tier, first served first.
	Prices          priceRange
	Tiers           []marketTier
	Regions         []string // "" when a node did not say, left out
	TTFTMillis      int64    // median time to first token; 0 unmeasured
	TokensPerSecond int64    // median throughput; 0 unmeasured
}

// priceRange is the cheapest and the dearest ask per 1M tokens, priced at one tier.
type priceRange struct {
	MinInput, MaxInput, MinOutput, MaxOutput money.Price
}

// marketTier is a model's prices at one service tier.
type marketTier struct {
	Name string // tier.Tier's String: gold, silver or bronze
	priceRange
}

// tierHead is a service tier as the tier prices' table heads it.
type tierHead struct {
	Name   string  // tier.Tier's String
	Factor float64 // its multiplier of the asks
}

// marketPage is /models's data.
type marketPage struct {
	Models []marketModel
	Tiers  []tierHead // first served first, as each model's Tiers
}

// models serves GET /models, the marketplace: every model served now, with its nodes, prices,
// regions and speed. Any logged-in user may see it.
func (c *Console) models(w http.ResponseWriter, r *http.Request) error {
	var p marketPage
	for _, t := range tier.All {
		p.Tiers = append(p.Tiers, tierHead{Name: t.String(), Factor: c.cfg.TierPrices.Factor(t)})
	}
	if c.cfg.Fleet != nil {
		for _, mi := range c.cfg.Fleet.Models() {
			m := marketModel{ID: mi.ID, Nodes: mi.Nodes, ContextLength: mi.ContextLength, Simulated: mi.Simulated,
				Prices:     pricesAt(c.cfg.TierPrices, mi, tier.Silver),
				TTFTMillis: mi.TTFT.Round(time.Millisecond).Milliseconds(), TokensPerSecond: int64(mi.TokensPerSecond + 0.5)}
			for _, t := range tier.All {
				m.Tiers = append(m.Tiers, marketTier{Name: t.String(), priceRange: pricesAt(c.cfg.TierPrices, mi, t)})
			}
			for _, reg := range mi.Regions {
				if reg != "" {
					m.Regions = append(m.Regions, reg)
				}
			}
			p.Models = append(p.Models, m)
		}
	}
	c.render(w, r, http.StatusOK, "models", p)
	return nil
}

// pricesAt is a model's range of asks priced at tier t, as GET /v1/models prices it.
func pricesAt(m tier.Multipliers, mi fleet.ModelInfo, t tier.Tier) priceRange {
	at := func(ask int64) money.Price { return m.Price(money.Price(ask), t) }
	return priceRange{MinInput: at(mi.MinInput), MaxInput: at(mi.MaxInput), MinOutput: at(mi.MinOutput), MaxOutput: at(mi.MaxOutput)}
}
