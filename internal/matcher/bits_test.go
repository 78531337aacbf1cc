package matcher

import (
	"slices"
	"testing"
)

// setBits returns the places set in b.
func setBits(b []uint64, n int) []int {
	var ps []int
	for p := nextSet(b, 0, n); p < n; p = nextSet(b, p+1, n) {
		ps = append(ps, p)
	}
	return ps
}

// A threshold's bitmap below m holds exactly the places of the m best candidates by the
// attribute, for every m: whole steps and the part of a step.
func TestThresholdBits_Below(t *testing.T) {
	cands := fleetOf(1000)
	ix := NewIndex(cands)
	si := ix.sorted(byLatency)
	n := len(si.order)
	for _, a := range []int{attrInput, attrReliability} {
		ao := ix.attrOrder(a)
		tb := si.thresholdOf(ao, a)
		dst := make([]uint64, (n+63)/64)
		for i := range dst {
			dst[i] = ^uint64(0) // below overwrites whatever the bitmap held
		}
		for m := 0; m <= n; m++ {
			tb.below(dst, m, ao, si.place)
			var want []int
			for _, i := range ao.byValue[:m] {
				want = append(want, int(si.place[i]))
			}
			slices.Sort(want)
			if got := setBits(dst, n); !slices.Equal(got, want) {
				t.Fatalf("attribute %d, the best %d: places %v, want %v", a, m, got, want)
			}
		}
	}
}

// A set of countries' bitmap holds exactly the places of their candidates, and the cache
// answers the same set with the same bitmap.
func TestRegionBits(t *testing.T) {
	ix := NewIndex(fleetOf(2000))
	si := ix.sorted(byPrice)
	set := allowed([]string{"eu"})
	b := si.regionBits(&set)
	var want []int
	for p, i := range si.order {
		if set.contains(ix.cands[i].Region) {
			want = append(want, p)
		}
	}
	if got := setBits(b, len(si.order)); len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("eu's places: %d set, want %d", len(got), len(want))
	}
	if again := si.regionBits(&set); &again[0] != &b[0] {
		t.Error("the same set built its bitmap again")
	}
}

// nextSet finds each set bit from any place, across words, and n past the last.
func TestNextSet(t *testing.T) {
	b := make([]uint64, 4)
	for _, p := range []int{0, 63, 64, 130, 200} {
		setBit(b, p)
	}
	for _, c := range []struct{ j, n, want int }{
		{0, 256, 0}, {1, 256, 63}, {64, 256, 64}, {65, 256, 130}, {131, 256, 200}, {201, 256, 256}, {131, 150, 150}, {300, 256, 256},
	} {
		if got := nextSet(b, c.j, c.n); got != c.want {
			t.Errorf("nextSet from %d (n %d) = %d, want %d", c.j, c.n, got, c.want)
		}
	}
}
