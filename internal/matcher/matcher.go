// Package matcher decides which node serves a request. It is a pure pipeline over a snapshot
// of the fleet's offers, like nomad's scheduler iterators: filter the eligible (counting why
// the others are not), rank them in a reverse auction weighted by reliability and the buyer's
// preferences, and pick: take a slot on the best. It does no I/O; randomness is handed in.
//
// It imports nothing with I/O: candidates come from the fleet (fleet.Candidates), and a
// candidate's live slot is a Slot.
package matcher

import (
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// Candidate is what the matcher sees of one offer for the requested model.
type Candidate struct {
	// The fields the filter reads on every candidate come first, to touch less memory.
	NodeID     string
	ProviderID string // the provider's account
	Region     string // lower-case ISO 3166-1 alpha-2 country code; "" unknown

	InputPrice, OutputPrice money.Price // the ask in effect per million tokens, surge included
	// AskWindow and Surge say where the price comes from, for the provider's report: the
	// ask schedule's window ("" the flat ask) and the surge multiplier (basis points; 0 or
	// 10000: ×1). PriceUntil is when the ask may change next (zero: never).
	AskWindow              string
	Surge                  int64
	PriceUntil             time.Time
	Running, MaxConcurrent int     // slots in use and in all
	GoldSlots              int     // of MaxConcurrent, kept for gold requests
	NoBronze               bool    // the node refuses bronze requests
	NoBatch                bool    // the node refuses batch work
	Reliability            float64 // 0..1: see Reliability
	Quantization           string  // such as "fp8", "q4_k_m"; "" unknown

	RTT             time.Duration // coordinator to node; 0 unknown
	TTFT            time.Duration // time to first token for the model; 0 unknown
	TokensPerSecond float64       // 0 unknown
	Warm            bool          // the model is loaded
	Continues       bool          // the node can take over a partial answer
	Paused          bool          // the node takes no new jobs for now
	Level           Level         // the node's trust level

	// Slot is where Pick takes a slot. A candidate without one (a what-if ranking, a test)
	// is taken without a slot.
	Slot Slot
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

// Slots is how many of the candidate's slots a request of tier t may fill (tier.Slots).
func (c *Candidate) Slots(t tier.Tier) int {
	return tier.Slots(c.MaxConcurrent, c.GoldSlots, c.NoBronze, t)
}

// A Slot is where a picked candidate takes a slot, live: the matcher ranks a snapshot, and
// the slot decides. fleet.Offer is the local one; a node another process holds is another.
type Slot interface {
	Running() int                // slots in use now
	AcquireFor(t tier.Tier) bool // takes a slot for a job of tier t, if one is free to it
}

// Country returns a region code in lower case if it is a country code, else "" (unknown):
// a candidate's Region.
func Country(code string) string { return country(code) }

// LevelOf reads the store's level names (store.Level*) as a candidate's Level.
func LevelOf(s string) Level { return levelOf(s) }

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
