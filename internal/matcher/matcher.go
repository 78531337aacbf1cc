// Package matcher decides which node serves a request. It is a pure pipeline over a snapshot
// of the fleet's offers: filter the eligible, rank them, take a slot on the best. It does no
// I/O and must not import the store, gateway or relay.
package matcher

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/shareai/shareai/internal/fleet"
)

// NoProvider says why no node could take a request.
type NoProvider struct {
	Model   string
	Serving int // nodes serving the model
	Busy    int // of those, nodes with no free slot
}

func (e *NoProvider) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s %s", e.Serving, plural(e.Serving, "node", "nodes"), plural(e.Serving, "serves", "serve"), e.Model)
	if e.Busy > 0 {
		fmt.Fprintf(&b, ": %d busy", e.Busy)
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Pick takes a slot on the best of offers for model and returns it. Nodes with the lowest share
// of their slots in use come first; equal nodes share traffic at random.
func Pick(model string, offers []*fleet.Offer) (*fleet.Offer, *NoProvider) {
	type ranked struct {
		o    *fleet.Offer
		load float64
	}
	cands := make([]ranked, 0, len(offers))
	for _, o := range offers {
		cands = append(cands, ranked{o, float64(o.Running()) / float64(o.MaxConcurrent)})
	}
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	slices.SortStableFunc(cands, func(a, b ranked) int { return cmp.Compare(a.load, b.load) })
	for _, c := range cands {
		if c.o.Acquire() {
			return c.o, nil
		}
	}
	return nil, &NoProvider{Model: model, Serving: len(offers), Busy: len(offers)}
}
