package matcher

import (
	"strings"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// filter holds what check and key need, prepared once per Match.
type filter struct {
	p         Prefs
	excluded  map[string]bool
	order     idSet
	only      idSet
	ignore    idSet
	strictOrd bool
	regions   regionSet
	inRegions bool // Regions given
	sort      string
	continues bool // only nodes that can take over a partial answer
	tier      tier.Tier
	mult      int64 // the tier's price multiplier, basis points; 0: ×1
	batch     bool  // a batch line's: idle nodes first, none that refuses batch work
}

func newFilter(req Request) filter {
	p := req.Prefs
	f := filter{
		p: p, excluded: req.Excluded,
		order: newIDSet(p.Order), only: newIDSet(p.Only), ignore: newIDSet(p.Ignore),
		strictOrd: len(p.Order) > 0 && !p.FallbacksAllowed(),
		regions:   allowed(p.Regions), inRegions: len(p.Regions) > 0,
		sort: p.Sort, continues: req.Continuation, tier: req.Tier, mult: req.Multiplier, batch: req.Batch,
	}
	if f.mult == 10000 {
		f.mult = 0
	}
	return f
}

// price is what the buyer pays per million tokens on an ask at the request's tier.
func (f *filter) price(ask money.Price) money.Price {
	if f.mult == 0 {
		return ask
	}
	return tier.Scale(ask, f.mult)
}

// check returns why c is not eligible, or eligible and its position in Order (len(Order)
// when unlisted).
func (f *filter) check(c *Candidate) (reason, int) {
	p := &f.p
	if len(f.excluded) > 0 && f.excluded[c.NodeID] {
		return excluded, 0
	}
	if f.ignore.n > 0 && f.ignore.has(c) {
		return ignored, 0
	}
	if f.only.n > 0 && !f.only.has(c) {
		return notOnly, 0
	}
	pos := f.order.n
	if f.order.n > 0 {
		pos = f.order.index(c)
		if pos < 0 {
			if f.strictOrd {
				return notOrder, 0
			}
			pos = f.order.n
		}
	}
	if f.inRegions && !f.regions.contains(c.Region) {
		return outsideRegion, 0
	}
	if len(p.Quantizations) > 0 && !quantizationIn(c.Quantization, p.Quantizations) {
		return quantized, 0
	}
	if p.MaxPrice.Prompt != nil && f.price(c.InputPrice) > *p.MaxPrice.Prompt ||
		p.MaxPrice.Completion != nil && f.price(c.OutputPrice) > *p.MaxPrice.Completion {
		return overPrice, 0
	}
	if f.tier == tier.Bronze && c.NoBronze {
		return noBronze, 0
	}
	if f.batch && c.NoBatch {
		return noBatch, 0
	}
	if p.MinReliability != nil && !(c.Reliability >= *p.MinReliability) {
		return unreliable, 0
	}
	if f.continues && !c.Continues {
		return noContinue, 0
	}
	if c.Paused {
		return paused, 0
	}
	switch c.Level {
	case Quarantined:
		return quarantined, 0
	case Unverified:
		return unverified, 0
	}
	if c.Running >= c.Slots(f.tier) {
		return busy, 0
	}
	return eligible, pos
}

func quantizationIn(q string, allowed []string) bool {
	if q == "" {
		q = "unknown"
	}
	for _, a := range allowed {
		if strings.EqualFold(q, a) {
			return true
		}
	}
	return false
}

// idSet matches node or provider ids against a list: by scanning a short one, by a map built
// once a long one.
type idSet struct {
	list []string
	m    map[string]int // id → first position, for long lists
	n    int
}

const idSetScan = 8

func newIDSet(list []string) idSet {
	s := idSet{list: list, n: len(list)}
	if len(list) > idSetScan {
		s.m = make(map[string]int, len(list))
		for i := len(list) - 1; i >= 0; i-- {
			s.m[list[i]] = i
		}
	}
	return s
}

func (s *idSet) has(c *Candidate) bool { return s.index(c) >= 0 }

// index returns the first position of c's node or provider id in the list, or -1.
func (s *idSet) index(c *Candidate) int {
	if s.m != nil {
		i, ok := s.m[c.NodeID]
		j, ok2 := s.m[c.ProviderID]
		switch {
		case ok && ok2:
			return min(i, j)
		case ok:
			return i
		case ok2:
			return j
		}
		return -1
	}
	for i, id := range s.list {
		if id == c.NodeID || id == c.ProviderID {
			return i
		}
	}
	return -1
}
