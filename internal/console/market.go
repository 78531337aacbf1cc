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
	// Prices are the range of what a request pays per 1M tokens at the default tier (as a
	// request that names no tier runs), from the cheapest node to the dearest: the nodes' asks in
	// effect now (their ask schedules, the operator's surge) times the tier's multiplier, plus
	// the platform fee; Tiers the range at each tier, first served first. Until is when a
	// node's ask changes next by its schedule (zero: none has one).
	Prices          priceRange
	Tiers           []marketTier
	Until           time.Time
	Regions         []string // "" when a node did not say, left out
	TTFTMillis      int64    // median time to first token; 0 unmeasured
	TokensPerSecond int64    // median throughput; 0 unmeasured
}

// priceRange is the cheapest and the dearest price per 1M tokens at one tier, fee included.
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
				Prices: c.pricesAt(mi, tier.Silver), Until: mi.Until,
				TTFTMillis: mi.TTFT.Round(time.Millisecond).Milliseconds(), TokensPerSecond: int64(mi.TokensPerSecond + 0.5)}
			for _, t := range tier.All {
				m.Tiers = append(m.Tiers, marketTier{Name: t.String(), priceRange: c.pricesAt(mi, t)})
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

// pricesAt is what a request pays for a model at tier t: the range of asks in effect priced at
// the tier, as GET /v1/models prices them, plus the platform fee.
func (c *Console) pricesAt(mi fleet.ModelInfo, t tier.Tier) priceRange {
	at := func(ask int64) money.Price {
		p := c.cfg.TierPrices.Price(money.Price(ask), t)
		if c.cfg.Ledger != nil {
			p = c.cfg.Ledger.BuyerPrice(p)
		}
		return p
	}
	return priceRange{MinInput: at(mi.MinInput), MaxInput: at(mi.MaxInput), MinOutput: at(mi.MinOutput), MaxOutput: at(mi.MaxOutput)}
}
