package matcher

import (
	"math/bits"
	"sync/atomic"
)

// A tracked index (Index.Track) keeps a bitmap of the candidates that may take a job: a bit
// per candidate, clear while its slots are all taken, or while it can take none for as long
// as the index lives (paused, quarantined, not verified yet). Pick's walk reads it 64
// candidates at a time, so that at 100,000 nodes under load a decision costs about as many
// checks as there are better nodes that are free but not eligible, not one per full node.
//
// A bit is cleared by the walk that finds its node full, and set again by the node's slot
// when it frees one (FreeHint.Freed), so that it is never clear while a slot is free for
// long: the walk reads the count again after clearing it, and the slot frees before it sets
// it, so one of the two sees the other.

// FreeHint is where a watched slot tells the index that tracks it that it freed a slot.
type FreeHint struct {
	word *atomic.Uint64
	mask uint64
}

// Freed tells the index that the slot freed one: call it after the slot's count went down.
// A nil FreeHint does nothing.
func (h *FreeHint) Freed() {
	if h != nil {
		h.word.Or(h.mask)
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

// freeMap is a tracked index's bitmap: see the top of this file.
type freeMap struct {
	free    []atomic.Uint64 // bit i: candidate i may take a job
	tracked []uint64        // bit i: candidate i's slot is watched, so its bit may be cleared
	hints   []FreeHint      // candidate i's slot's hint
}

// Track makes the index keep which of its candidates are full, live (see FreeHint), for
// Pick. Call it once, before the index is shared, and only on the index decisions use: a
// slot tells only the last index that tracked it. An index not tracked checks every node.
func (ix *Index) Track() {
	n := len(ix.cands)
	words := (n + 63) / 64
	fm := &freeMap{free: make([]atomic.Uint64, words), tracked: make([]uint64, words), hints: make([]FreeHint, n)}
	for i := range ix.cands {
		c := &ix.cands[i]
		w, m := i/64, uint64(1)<<(i%64)
		fm.hints[i] = FreeHint{word: &fm.free[w], mask: m}
		s, ok := c.Slot.(Watched)
		if !ok || !s.Watch(&fm.hints[i]) {
			fm.free[w].Or(m)
			continue
		}
		fm.tracked[w] |= m
		// Read after Watch: a slot freed since then has set the bit already.
		if !c.Paused && c.Level != Quarantined && c.Level != Unverified && s.Running() < c.MaxConcurrent {
			fm.free[w].Or(m)
		}
	}
	ix.fm = fm
}

// mayTake reports whether candidate i may take a job: true for an index not tracked.
func (ix *Index) mayTake(i int) bool {
	return ix.fm == nil || ix.fm.free[i/64].Load()&(1<<(i%64)) != 0
}

// nextFree returns the first candidate from i up to end whose bit is set, and set in the
// bitmap in unless it is nil, or end.
func (fm *freeMap) nextFree(i, end int, in []uint64) int {
	for i < end {
		word := fm.free[i/64].Load()
		if in != nil {
			word &= in[i/64]
		}
		if word >>= i % 64; word != 0 {
			return min(i+bits.TrailingZeros64(word), end)
		}
		i = (i/64 + 1) * 64
	}
	return end
}

// clear clears candidate i's bit while it can take no job, if its slot is watched: for good
// when why says it never can in this index (paused, quarantined, not verified), else while
// all its slots are taken, read again after the clear.
func (ix *Index) clear(i int, why reason) {
	fm := ix.fm
	if fm == nil || fm.tracked[i/64]&(1<<(i%64)) == 0 {
		return
	}
	c := &ix.cands[i]
	w, m := &fm.free[i/64], uint64(1)<<(i%64)
	switch why {
	case paused, quarantined, unverified:
		w.And(^m)
	case busy:
		if c.Slot.Running() < c.MaxConcurrent {
			return
		}
		w.And(^m)
		if c.Slot.Running() < c.MaxConcurrent { // freed since
			w.Or(m)
		}
	}
}
