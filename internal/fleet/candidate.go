package fleet

import (
	"strings"

	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/reputation"
)

// The fleet's side of the matcher: the candidates it ranks, read from live offers, whose
// slots are the offers' own (an *Offer is a matcher.Slot).

var _ matcher.Watched = (*Offer)(nil)

// Candidates returns the matcher's candidates of a fleet snapshot, with what the fleet has
// measured of each: ask in effect (Offer.Price), region, slots, reliability, round trip, time to first token, output
// rate, warmth.
func Candidates(offers []*Offer) []matcher.Candidate {
	cs := make([]matcher.Candidate, len(offers))
	for i, o := range offers {
		cs[i] = o.Candidate()
	}
	return cs
}

// Candidate returns the offer as the matcher sees it (see Candidates), its slot the offer.
func (o *Offer) Candidate() matcher.Candidate {
	st := o.Stats()
	p := o.Price()
	c := matcher.Candidate{
		Slot:            o,
		InputPrice:      p.Input,
		OutputPrice:     p.Output,
		AskWindow:       p.Window,
		Surge:           p.Surge,
		PriceUntil:      p.Until,
		Reliability:     Reliability(o.Node, st),
		Running:         o.Running(),
		MaxConcurrent:   o.MaxConcurrent,
		GoldSlots:       o.GoldSlots,
		NoBronze:        o.NoBronze,
		NoBatch:         o.NoBatch,
		Quantization:    strings.ToLower(o.Quantization),
		TTFT:            st.TTFT,
		TokensPerSecond: st.TokensPerSecond,
		Warm:            o.Warm(),
		Continues:       o.Continues,
	}
	if n := o.Node; n != nil {
		c.NodeID, c.ProviderID, c.Region, c.RTT = n.ID, n.AccountID, matcher.Country(n.Region), n.RTT()
		c.Paused = n.Paused() != ""
		c.Level = matcher.LevelOf(o.Level()) // the node's, unless the model is not verified on it
	}
	return c
}

// OfferOf returns the offer of a candidate read from this fleet; nil for one without (a
// what-if ranking).
func OfferOf(c matcher.Candidate) *Offer {
	o, _ := c.Slot.(*Offer)
	return o
}

// Reliability is how reliable an offer's node is, 0..1: the one number min_reliability
// compares, the auction divides asks by, and GET /v1/models/{id}/endpoints shows, so that a
// buyer filters on what they see. It is the node's reputation score (docs/reputation.md), which
// weighs its measured reliability with its record and verification, once computed (a node
// that connects again starts from its stored score); before that, the offer's moving average
// of answers completed; and with neither, reputation.Prior, what a node with no record
// scores: a node the coordinator knows nothing of yet must not outrank every node it has
// measured, as it would at the moving average's start of 1.
func Reliability(n *Node, st Stats) float64 {
	if n != nil {
		if s := n.Score(); s > 0 {
			return s
		}
	}
	if st.Completed+st.Failed > 0 {
		return st.Reliability
	}
	return reputation.Prior
}
