package matcher

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Reasons a serving node is not eligible, as NoProvider counts them. A node counts under the
// first that applies, in this order; the region reason names the allowed regions, as in
// "outside region eu" or "outside regions de/ch".
const (
	ReasonExcluded    = "excluded" // by the caller: tried already for this request
	ReasonIgnored     = "ignored"
	ReasonNotOnly     = "not in only"
	ReasonNotOrder    = "not in order" // with allow_fallbacks false
	ReasonRegion      = "outside region"
	ReasonQuantized   = "other quantization"
	ReasonPrice       = "over max price"
	ReasonReliability = "below min reliability"
	ReasonBusy        = "busy" // no free slot
	// ReasonPaused: the node takes no new jobs for now: outside its availability windows,
	// paused by its owner, its GPU in use by another program, or too hot.
	ReasonPaused   = "paused"
	ReasonContinue = "cannot continue an answer"
	// ReasonNoBronze: the node refuses bronze requests (service_tier flex).
	ReasonNoBronze = "refuses bronze"
	// ReasonNoBatch: the node refuses batch work (no_batch).
	ReasonNoBatch = "refuses batch work"
	// ReasonUnverified: a new node that has not passed its onboarding checks yet.
	ReasonUnverified = "not verified yet"
	// ReasonQuarantined: a node quarantined (or suspended) for its reputation or by an
	// operator.
	ReasonQuarantined = "quarantined"
)

// reason indexes the counters of a Ranking; eligible is not a reason.
type reason uint8

const (
	eligible reason = iota
	excluded
	ignored
	notOnly
	notOrder
	outsideRegion
	quantized
	overPrice
	unreliable
	noContinue
	noBronze
	noBatch
	paused
	quarantined
	unverified
	busy
	numReasons
)

var reasonText = [numReasons]string{
	excluded: ReasonExcluded, quarantined: ReasonQuarantined, unverified: ReasonUnverified, ignored: ReasonIgnored, notOnly: ReasonNotOnly, notOrder: ReasonNotOrder,
	outsideRegion: ReasonRegion, quantized: ReasonQuantized, overPrice: ReasonPrice,
	unreliable: ReasonReliability, noContinue: ReasonContinue, noBronze: ReasonNoBronze, noBatch: ReasonNoBatch, paused: ReasonPaused, busy: ReasonBusy,
}

// NoProvider says why no node could take a request: how many serve the model, and how many
// of those were not eligible for each reason.
type NoProvider struct {
	Model   string
	Serving int            // nodes serving the model
	Reasons map[string]int // reason text → nodes; see the Reason constants
}

// newNoProvider names the counted reasons.
func newNoProvider(model string, serving int, counts *[numReasons]int, regions []string) *NoProvider {
	e := &NoProvider{Model: model, Serving: serving, Reasons: make(map[string]int)}
	for r, n := range counts {
		if n == 0 {
			continue
		}
		text := reasonText[r]
		if reason(r) == outsideRegion {
			text = regionReason(regions)
		}
		e.Reasons[text] += n
	}
	return e
}

func regionReason(regions []string) string {
	if len(regions) == 1 {
		return ReasonRegion + " " + regions[0]
	}
	return ReasonRegion + "s " + strings.Join(regions, "/")
}

// Error reads like "3 nodes serve llama3.1:8b: 2 busy, 1 outside region eu": the reasons
// most nodes share first, then by name.
func (e *NoProvider) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s %s", e.Serving, plural(e.Serving, "node", "nodes"), plural(e.Serving, "serves", "serve"), e.Model)
	reasons := slices.SortedFunc(maps.Keys(e.Reasons), func(x, y string) int {
		return cmp.Or(cmp.Compare(e.Reasons[y], e.Reasons[x]), cmp.Compare(x, y))
	})
	for i, r := range reasons {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", e.Reasons[r], r)
	}
	return b.String()
}

// Busy reports whether every serving node was refused only for being busy or paused for now,
// so retrying later may succeed.
func (e *NoProvider) Busy() bool {
	return e.Serving > 0 && e.Reasons[ReasonBusy]+e.Reasons[ReasonPaused]+e.Reasons[ReasonUnverified] == e.Serving
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
