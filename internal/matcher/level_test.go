package matcher

import (
	"errors"
	"testing"

	"github.com/shareai/shareai/internal/money"
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
