// Package matcher decides which node serves a request. It is a pure pipeline over a snapshot
// of the fleet's offers, like nomad's scheduler iterators: filter the eligible (counting why
// the others are not), rank them in a reverse auction weighted by reliability and the buyer's
// preferences, and pick: take a slot on the best. It does no I/O; randomness is handed in.
//
// It must not import the store, gateway, relay or ledger.
package matcher

import (
	"strings"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/tier"
)

// Candidate is what the matcher sees of one offer for the requested model.
type Candidate struct {
	// The fields the filter reads on every candidate come first, to touch less memory.
	NodeID     string
	ProviderID string // the provider's account
	Region     string // lower-case ISO 3166-1 alpha-2 country code; "" unknown

	InputPrice, OutputPrice money.Price // the ask per million tokens
	Running, MaxConcurrent  int         // slots in use and in all
	GoldSlots               int         // of MaxConcurrent, kept for gold requests
	NoBronze                bool        // the node refuses bronze requests
	Reliability             float64     // 0..1: see Reliability
	Quantization            string      // such as "fp8", "q4_k_m"; "" unknown

	RTT             time.Duration // coordinator to node; 0 unknown
	TTFT            time.Duration // time to first token for the model; 0 unknown
	TokensPerSecond float64       // 0 unknown
	Warm            bool          // the model is loaded
	Continues       bool          // the node can take over a partial answer
	Paused          bool          // the node takes no new jobs for now
	Level           Level         // the node's trust level

	// Offer is where Pick takes a slot. A candidate without one (a what-if ranking, a test)
	// is taken without a slot.
	Offer *fleet.Offer
}

// Level is an offer's trust level as the matcher sees it (docs/reputation.md): its node's,
// unless the model is not verified on the node yet, or quarantined there (each model a node
// serves is verified on its own). Trusted nodes rank before verified ones; new nodes or
// models (not verified yet) and quarantined or suspended ones get no live traffic. The zero
// value is Verified.
type Level uint8

const (
	Verified Level = iota
	Trusted
	Unverified
	Quarantined // or suspended
)

// levelOf reads the store's level names (store.Level*).
func levelOf(s string) Level {
	switch s {
	case "trusted":
		return Trusted
	case "verified":
		return Verified
	case "quarantined", "suspended":
		return Quarantined
	}
	return Unverified
}

// standing orders levels in the auction: trusted first.
func (l Level) standing() int {
	if l == Trusted {
		return 0
	}
	return 1
}

// Slots is how many of the candidate's slots a request of tier t may fill (fleet.Slots).
func (c *Candidate) Slots(t tier.Tier) int {
	return fleet.Slots(&protocol.Offer{MaxConcurrent: c.MaxConcurrent, GoldSlots: c.GoldSlots, NoBronze: c.NoBronze}, t)
}

// FromOffers returns the candidates of a fleet snapshot, with what the fleet has measured of
// each: ask, region, slots, reliability, round trip, time to first token, output rate, warmth.
func FromOffers(offers []*fleet.Offer) []Candidate {
	cs := make([]Candidate, len(offers))
	for i, o := range offers {
		cs[i] = FromOffer(o)
	}
	return cs
}

// FromOffer returns the candidate of one offer (see FromOffers).
func FromOffer(o *fleet.Offer) Candidate {
	st := o.Stats()
	c := Candidate{
		Offer:           o,
		InputPrice:      money.Price(o.InputPrice),
		OutputPrice:     money.Price(o.OutputPrice),
		Reliability:     Reliability(o.Node, st),
		Running:         o.Running(),
		MaxConcurrent:   o.MaxConcurrent,
		GoldSlots:       o.GoldSlots,
		NoBronze:        o.NoBronze,
		Quantization:    strings.ToLower(o.Quantization),
		TTFT:            st.TTFT,
		TokensPerSecond: st.TokensPerSecond,
		Warm:            o.Warm(),
		Continues:       o.Continues,
	}
	if n := o.Node; n != nil {
		c.NodeID, c.ProviderID, c.Region, c.RTT = n.ID, n.AccountID, country(n.Region), n.RTT()
		c.Paused = n.Paused() != ""
		c.Level = levelOf(o.Level()) // the node's, unless the model is not verified on it
	}
	return c
}

// Fit tells whether single candidates are eligible for a request, as Match would decide: for a
// slot freed on a node, which waiting request it may go to.
type Fit struct{ f filter }

// NewFit prepares the checks of req.
func NewFit(req Request) *Fit { return &Fit{newFilter(req)} }

// Admits reports whether c is eligible, a free slot included.
func (f *Fit) Admits(c *Candidate) bool {
	why, _ := f.f.check(c)
	return why == eligible
}

// Pick takes a slot on the best of offers for model with no preferences and returns it.
func Pick(model string, offers []*fleet.Offer) (*fleet.Offer, *NoProvider) {
	r := Match(Request{Model: model}, FromOffers(offers))
	c, np := r.pick()
	if np != nil {
		return nil, np
	}
	return c.Offer, nil
}
