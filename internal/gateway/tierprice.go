package gateway

import (
	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// Prices per service tier, as /v1/models and /v1/models/{id}/endpoints show them. A request
// pays its tier's multiplier (Config.TierPrices) of a node's ask. The existing price fields
// stay the price of the default tier, which clients without tiers pay; service_tiers adds
// every tier's, by OpenAI's service_tier names:
//
//	"service_tiers": {"default": {...}, "flex": {...}, "priority": {...}}
//
// in the same USD per million tokens, before the platform fee. They are the prices in effect
// now: the nodes' asks by their ask schedules, times the operator's surge (fleet.Offer.Price).

// priceRangeAt is a model's range of asks priced at tier t.
func priceRangeAt(m tier.Multipliers, mi fleet.ModelInfo, t tier.Tier) api.PriceRange {
	at := func(ask int64) api.USD { return api.USD(m.Price(money.Price(ask), t)) }
	return api.PriceRange{PromptMin: at(mi.MinInput), PromptMax: at(mi.MaxInput),
		CompletionMin: at(mi.MinOutput), CompletionMax: at(mi.MaxOutput)}
}

// priceRanges is a model's range of asks at every tier, by OpenAI's names.
func priceRanges(m tier.Multipliers, mi fleet.ModelInfo) map[string]api.PriceRange {
	out := make(map[string]api.PriceRange, len(tier.All))
	for _, t := range tier.All {
		out[t.OpenAI()] = priceRangeAt(m, mi, t)
	}
	return out
}

// endpointPriceAt is an offer's price in effect (fleet.Offer.Price) at tier t.
func endpointPriceAt(m tier.Multipliers, p fleet.Price, t tier.Tier) api.TierPrice {
	return api.TierPrice{Prompt: api.USD(m.Price(p.Input, t)), Completion: api.USD(m.Price(p.Output, t))}
}

// endpointPrices is an offer's price in effect at every tier, by OpenAI's names.
func endpointPrices(m tier.Multipliers, p fleet.Price) map[string]api.TierPrice {
	out := make(map[string]api.TierPrice, len(tier.All))
	for _, t := range tier.All {
		out[t.OpenAI()] = endpointPriceAt(m, p, t)
	}
	return out
}
