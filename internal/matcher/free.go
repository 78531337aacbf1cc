package matcher

import (
	"math/bits"
	"sync/atomic"

	"github.com/shareai/shareai/internal/tier"
)

// A tracked index (Index.Track) keeps, for each tier, a bitmap of the candidates that may
// take a job of that tier: a bit per candidate, clear while the slots the tier may fill are
// all taken (a node keeping a slot for gold is full to silver and bronze first), or while it
// can take none for as long as the index lives (paused, quarantined, not verified yet; for
// bronze, refusing it). Pick's walk reads its tier's 64 candidates at a time, so that at
// 100,000 nodes under load a decision costs about as many checks as there are better nodes
// that are free but not eligible, not one per full node.
//
// A bit is cleared by the walk that finds its node full, and set again by the node's slot
// when it frees one (FreeHint.Freed, every tier's), so that it is never clear while a slot
// is free for long: the walk reads the count again after clearing it, and the slot frees
// before it sets it, so one of the two sees the other.

// FreeHint is where a watched slot tells the index that tracks it that it freed a slot.
type FreeHint struct {
	words *[numTiers]atomic.Uint64 // the word of the slot's bit in each tier's map
	mask  uint64
}

// Freed tells the index that the slot freed one: call it after the slot's count went down.
// It sets the slot's bit for every tier: the walk that finds one still full clears it again.
// A nil FreeHint does nothing.
func (h *FreeHint) Freed() {
	if h != nil {
		for k := range h.words {
			h.words[k].Or(h.mask)
		}
	}
}

// A Watched slot tells one index when it frees a slot: it keeps the hint Watch gives it,
// replacing the one before (the last index to track it is the one decisions use), and calls
// its Freed after each slot it frees. Watch reports false for a slot that cannot (one whose
// count another process changes): the index then never skips it.
type Watched interface {
	Slot
	Watch(h *FreeHint) bool
}

// numTiers is how many free maps a tracked index keeps: one per tier, since a node whose
// slots are all taken but those kept for gold is full to silver and bronze, not to gold.
const numTiers = len(tier.All)

// freeMap is a tracked index's bitmaps: see the top of this file.
type freeMap struct {
	// free holds each tier's map, interleaved: word w of tier t's at w*numTiers+t. Bit i of
	// tier t's: candidate i may take a job of tier t.
	free    []atomic.Uint64
	tracked []uint64   // bit i: candidate i's slot is watched, so its bits may be cleared
	hints   []FreeHint // candidate i's slot's hint
}

// words returns the words of candidate i's bits, by tier.
func (fm *freeMap) words(i int) *[numTiers]atomic.Uint64 {
	return (*[numTiers]atomic.Uint64)(fm.free[i/64*numTiers:])
}

// Track makes the index keep which of its candidates are full, live (see FreeHint), for
// Pick. Call it once, before the index is shared, and only on the index decisions use: a
// slot tells only the last index that tracked it. An index not tracked checks every node.
func (ix *Index) Track() {
	n := len(ix.cands)
	words := (n + 63) / 64
	fm := &freeMap{free: make([]atomic.Uint64, words*numTiers), tracked: make([]uint64, words), hints: make([]FreeHint, n)}
	for i := range ix.cands {
		c := &ix.cands[i]
		w, m := i/64, uint64(1)<<(i%64)
		fm.hints[i] = FreeHint{words: fm.words(i), mask: m}
		s, ok := c.Slot.(Watched)
		if !ok || !s.Watch(&fm.hints[i]) {
			fm.hints[i].Freed() // every tier's bit, for good
			continue
		}
		fm.tracked[w] |= m
		// Read after Watch: a slot freed since then has set the bits already.
		if c.Paused || c.Level == Quarantined || c.Level == Unverified {
			continue
		}
		running := s.Running()
		for _, t := range tier.All {
			if running < c.Slots(t) {
				fm.hints[i].words[t].Or(m)
			}
		}
	}
	ix.fm = fm
}

// mayTake reports whether candidate i may take a job of tier t: true for an index not
// tracked.
func (ix *Index) mayTake(i int, t tier.Tier) bool {
	return ix.fm == nil || ix.fm.free[i/64*numTiers+int(t)].Load()&(1<<(i%64)) != 0
}

// nextFree returns the first candidate from i up to end whose bit in tier t's map is set, and
// set in each of the bitmaps in, or end.
func (fm *freeMap) nextFree(i, end int, t tier.Tier, in [][]uint64) int {
	for i < end {
		word := fm.free[i/64*numTiers+int(t)].Load()
		for _, b := range in {
			word &= b[i/64]
		}
		if word >>= i % 64; word != 0 {
			return min(i+bits.TrailingZeros64(word), end)
		}
		i = (i/64 + 1) * 64
	}
	return end
}

// clear clears candidate i's bits while it can take no job, if its slot is watched: every
// tier's for good when why says it never can in this index (paused, quarantined, not
// verified), bronze's for a node that refuses bronze, else each tier's whose slots are all
// taken, read again after the clear.
func (ix *Index) clear(i int, why reason) {
	fm := ix.fm
	if fm == nil || fm.tracked[i/64]&(1<<(i%64)) == 0 {
		return
	}
	c := &ix.cands[i]
	words, m := fm.words(i), uint64(1)<<(i%64)
	switch why {
	case paused, quarantined, unverified:
		for t := range words {
			words[t].And(^m)
		}
	case noBronze:
		words[tier.Bronze].And(^m)
	case busy:
		var full [numTiers]bool
		running := c.Slot.Running()
		for _, t := range tier.All {
			if full[t] = running >= c.Slots(t); full[t] {
				words[t].And(^m)
			}
		}
		running = c.Slot.Running() // freed since: set again
		for _, t := range tier.All {
			if full[t] && running < c.Slots(t) {
				words[t].Or(m)
			}
		}
	}
}
