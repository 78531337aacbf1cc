package matcher

import (
	"errors"
	"testing"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

// Trusted nodes come first in the auction, even at a higher ask; new and quarantined nodes get
// no live traffic, and the 503 says why.
func TestLevels(t *testing.T) {
	cands := []Candidate{
		{NodeID: "verified-cheap", InputPrice: money.Price(1), MaxConcurrent: 1, Reliability: 1, Level: Verified},
		{NodeID: "trusted-dear", InputPrice: money.Price(5), MaxConcurrent: 1, Reliability: 1, Level: Trusted},
		{NodeID: "new-cheapest", MaxConcurrent: 1, Reliability: 1, Level: Unverified},
		{NodeID: "quarantined-cheapest", MaxConcurrent: 1, Reliability: 1, Level: Quarantined},
	}
	for name, pick := range map[string]func(Request) (Candidate, error){
		"Match": func(r Request) (Candidate, error) { rk := Match(r, cands); return rk.Pick() },
		"Index": func(r Request) (Candidate, error) { return NewIndex(cands).Pick(r) },
	} {
		got, err := pick(Request{Model: "m"})
		if err != nil || got.NodeID != "trusted-dear" {
			t.Errorf("%s: picked %q, %v; want the trusted node", name, got.NodeID, err)
		}
		_, err = pick(Request{Model: "m", Excluded: map[string]bool{"trusted-dear": true, "verified-cheap": true}})
		np, ok := errors.AsType[*NoProvider](err)
		if !ok || np.Reasons[ReasonUnverified] != 1 || np.Reasons[ReasonQuarantined] != 1 {
			t.Errorf("%s: %v; want 1 not verified yet, 1 quarantined", name, err)
		}
	}
}

// The level the matcher sees is the offer's: a model not verified yet on a verified node, or
// quarantined there, gets no live traffic though the node does for its other models.
func TestFromOffers_OfferLevel(t *testing.T) {
	node := (&fleet.Node{ID: "a", AccountID: "acct-a"}).WithLevel("trusted")
	for own, want := range map[string]Level{"verified": Trusted, "new": Unverified, "quarantined": Quarantined} {
		o := (&fleet.Offer{Offer: protocol.Offer{Model: model, MaxConcurrent: 1}, Node: node}).WithLevel(own)
		if got := FromOffers([]*fleet.Offer{o})[0].Level; got != want {
			t.Errorf("a model %s on a trusted node: level %v; want %v", own, got, want)
		}
	}
}
