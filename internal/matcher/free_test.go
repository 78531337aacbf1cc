package matcher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// unwatched is a slot that cannot watch (a node another replica holds): a tracked index never
// skips it.
type unwatched struct{ *testOffer }

func (unwatched) Watch(*FreeHint) bool { return false }

// TestTrack_SameDecisions holds a tracked index to the decisions of an index that is not, on
// the same live slots, through a random run of decisions and frees, some of them for a few
// countries, under a price cap or a reliability floor: the free map, and the bitmaps of the
// countries and thresholds, only skip nodes that cannot take the job, so every decision takes a node of the same group (the same
// standing and price, warm or cold), and when none can, both count the same reasons. Within
// the group the node may differ: an index not tracked also pairs the nodes its snapshot
// thinks free and finds full (take), which the tracked one skips.
func TestTrack_SameDecisions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var offers []*testOffer
	var cands []Candidate
	for i := range 300 {
		o := offer(fmt.Sprint("n", i), 1+rng.IntN(4), int64(1+rng.IntN(6))) // six prices: groups of equal nodes
		o.running = rng.IntN(o.c.MaxConcurrent + 1)
		o.gold = rng.IntN(2) * min(1, o.c.MaxConcurrent-1)
		o.noBronze = rng.IntN(8) == 0
		if i == 11 {
			o.c.MaxConcurrent, o.running, o.gold = 0, 0, 0 // no slots: busy to every request
		}
		offers = append(offers, o)
		c := candidates(o)[0]
		c.Continues = rng.IntN(4) != 0
		c.Level = []Level{Trusted, Verified, Verified, Verified, Quarantined, Unverified}[rng.IntN(6)]
		c.Region = []string{"de", "fr", "us", "jp", ""}[rng.IntN(5)]
		c.OutputPrice = money.Price(1 + rng.IntN(4))
		c.Reliability = 0.8 + rng.Float64()/5
		c.Paused = rng.IntN(10) == 0
		c.Warm = rng.IntN(3) != 0
		cands = append(cands, c)
	}
	cands[7].Slot = unwatched{offers[7]}
	plain, tracked := NewIndex(cands), NewIndex(cands)
	tracked.Track()
	groupOf := map[string]int{}
	for g := 0; g+1 < len(plain.groups); g++ {
		for _, c := range plain.cands[plain.groups[g]:plain.groups[g+1]] {
			groupOf[c.NodeID] = g
		}
	}
	rp, rt := rand.New(rand.NewPCG(3, 4)), rand.New(rand.NewPCG(3, 4)) // the same rotation
	tiers := []tier.Tier{tier.Gold, tier.Silver, tier.Bronze}
	regions := [][]string{nil, nil, {"eu"}, {"us", "jp"}} // the tracked walk skips the others' free nodes too
	caps := []PriceCap{{}, {}, {Prompt: ptr(money.Price(3))}, {Completion: ptr(money.Price(2))}}
	floors := []*float64{nil, nil, ptr(0.9)}
	defer func(n int) { intersectAfter = n }(intersectAfter)
	busy := 0
	for step := range 5000 {
		// The walk narrows to the thresholds, and asks the free map, after as many checks.
		intersectAfter = []int{0, 1, 5, 128}[step%4]
		if rng.IntN(3) == 0 { // free a random slot
			if o := offers[rng.IntN(len(offers))]; o.Running() > 0 {
				o.Release()
			}
			continue
		}
		req := Request{Model: model, Tier: tiers[rng.IntN(len(tiers))], Prefs: Prefs{Regions: regions[rng.IntN(len(regions))],
			MaxPrice: caps[rng.IntN(len(caps))], MinReliability: floors[rng.IntN(len(floors))]}, Continuation: rng.IntN(5) == 0}
		if rng.IntN(3) == 0 { // a retry: the nodes that failed it, and one gone from the index
			req.Excluded = map[string]bool{fmt.Sprint("n", rng.IntN(300)): true, fmt.Sprint("n", rng.IntN(300)): true, "gone": true}
		}
		byLatency := rng.IntN(4) == 0 // Take's walk, and its refusal
		if byLatency {
			req.Prefs.Sort = SortLatency
		}
		req.Rand = rt
		got, errT := decide(tracked, req)
		if errT == nil {
			got.Slot.(interface{ Release() }).Release() // as it was, for the index not tracked
		}
		req.Rand = rp
		want, errP := decide(plain, req)
		switch {
		case (errT == nil) != (errP == nil):
			t.Fatalf("step %d: tracked %v, %v; not tracked %v, %v", step, got.NodeID, errT, want.NodeID, errP)
		case errP != nil:
			busy++
			if errT.Error() != errP.Error() {
				t.Fatalf("step %d: tracked %q; not tracked %q", step, errT, errP)
			}
		case byLatency:
		case groupOf[got.NodeID] != groupOf[want.NodeID]:
			t.Fatalf("step %d: tracked took %s of group %d; not tracked %s of group %d", step, got.NodeID, groupOf[got.NodeID], want.NodeID, groupOf[want.NodeID])
		}
	}
	if busy < 100 || busy > 3000 {
		t.Errorf("%d of the decisions found no node; want the run to see both", busy)
	}
}

// A node that freed a slot is taken again at once: its slot sets its bit.
func TestTrack_FreedNodeTaken(t *testing.T) {
	cheap, dear := offer("cheap", 1, 1), offer("dear", 4, 2)
	ix := NewIndex(candidates(cheap, dear))
	ix.Track()
	req := Request{Model: model, Rand: seeded()}
	if c, err := ix.Pick(req); err != nil || c.NodeID != "cheap" {
		t.Fatalf("first pick %v, %v; want cheap", c.NodeID, err)
	}
	if ix.mayTake(0, tier.Silver) || ix.mayTake(0, tier.Gold) {
		t.Error("cheap's bit is set with its only slot taken")
	}
	if c, err := ix.Pick(req); err != nil || c.NodeID != "dear" {
		t.Fatalf("second pick %v, %v; want dear, cheap being full", c.NodeID, err)
	}
	cheap.Release()
	if !ix.mayTake(0, tier.Silver) || !ix.mayTake(0, tier.Gold) {
		t.Error("cheap's bit is clear after its slot was freed")
	}
	if c, err := ix.Pick(req); err != nil || c.NodeID != "cheap" {
		t.Fatalf("pick after the free %v, %v; want cheap again", c.NodeID, err)
	}
	// A paused node's bit is cleared for good; an unwatched one's never is.
	p, u := offer("paused", 1, 1), offer("remote", 1, 1)
	cs := candidates(p, u)
	cs[0].Paused, cs[1].Slot = true, unwatched{u}
	u.running = 1
	ix = NewIndex(cs)
	ix.Track()
	if ix.mayTake(0, tier.Gold) || !ix.mayTake(1, tier.Silver) {
		t.Errorf("tracked: paused may take %v, full unwatched %v; want false, true", ix.mayTake(0, tier.Gold), ix.mayTake(1, tier.Silver))
	}
	_, err := ix.Pick(req)
	if np, ok := errors.AsType[*NoProvider](err); !ok || np.Error() != "2 nodes serve llama3.1:8b: 1 busy, 1 paused" {
		t.Errorf("pick: %v; want both counted", err)
	}
}

// TestTrack_Concurrent takes and frees slots from many goroutines at once: once all are free,
// no node's bit is clear (a free racing a clear must not be lost), and no slot was taken
// past its count.
func TestTrack_Concurrent(t *testing.T) {
	var offers []*testOffer
	for i := range 200 {
		o := offer(fmt.Sprint("n", i), 2, int64(1+i%3))
		o.gold = i % 2 // one of two slots kept for gold: full to silver and bronze at one
		o.noBronze = i%5 == 0
		offers = append(offers, o)
	}
	ix := NewIndex(candidates(offers...))
	ix.Track()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			req := Request{Model: model, Rand: rng, Tier: tier.All[g%len(tier.All)]}
			var held []*testOffer
			for range 3000 {
				if len(held) > 0 && rng.IntN(2) == 0 {
					k := rng.IntN(len(held))
					held[k].Release()
					held = append(held[:k], held[k+1:]...)
					continue
				}
				if c, err := ix.Pick(req); err == nil {
					held = append(held, c.Slot.(*testOffer))
				}
			}
			for _, o := range held {
				o.Release()
			}
		})
	}
	wg.Wait()
	for i, c := range ix.cands {
		if r := c.Slot.Running(); r != 0 {
			t.Errorf("%s runs %d after every slot was freed", c.NodeID, r)
		}
		for _, tr := range tier.All {
			if !ix.mayTake(i, tr) && !(tr == tier.Bronze && c.NoBronze) {
				t.Errorf("%s's bit for %s is clear with its slots free", c.NodeID, tr)
			}
		}
	}
}

// A tracked index's decision for a few countries walks only their free nodes: Pick keeps the
// countries' bitmap over the index's candidates (exactly theirs), and nextFree skips the free
// nodes whose bit in it is clear as it skips the full ones.
func TestTrack_RegionSkipsForeignFreeNodes(t *testing.T) {
	var offers []*testOffer
	for i := range 300 {
		offers = append(offers, offer(fmt.Sprint("n", i), 1, 1)) // one group, all free
	}
	cands := candidates(offers...)
	for i := range cands {
		cands[i].Region = "us"
		if i%100 == 42 {
			cands[i].Region = "de"
		}
	}
	ix := NewIndex(cands)
	ix.Track()
	req := Request{Model: model, Prefs: Prefs{Regions: []string{"eu"}}, Rand: seeded()}
	c, err := ix.Pick(req)
	if err != nil || c.Region != "de" {
		t.Fatalf("pick for eu: %v (%s), %v", c.NodeID, c.Region, err)
	}
	f := newFilter(req)
	w := ix.newPickWalk(&f)
	if len(w.bitmaps()) != 1 {
		t.Fatalf("the tracked walk for eu skips with %d bitmaps, want its countries'", len(w.bitmaps()))
	}
	in := w.bitmaps()[0]
	var want []int
	for i := range ix.cands {
		if ix.cands[i].Region == "de" {
			want = append(want, i)
		}
	}
	var walked []int
	ins := [][]uint64{in}
	for i := ix.fm.nextFree(0, len(ix.cands), tier.Silver, ins); i < len(ix.cands); i = ix.fm.nextFree(i+1, len(ix.cands), tier.Silver, ins) {
		walked = append(walked, i)
	}
	if got := setBits(in, len(ix.cands)); !slices.Equal(got, want) {
		t.Errorf("eu's bitmap holds %v, want %v", got, want)
	}
	// The node Pick took is full: its bit is clear, and the walk meets the two others only.
	if len(walked) != 2 || ix.cands[walked[0]].Region != "de" || ix.cands[walked[1]].Region != "de" {
		t.Errorf("the walk for eu meets %v; want the 2 free German nodes of %v", walked, want)
	}
}

// A tracked walk that has checked intersectAfter nodes it could not take narrows to the
// candidates within the request's thresholds, in its countries: exactly those, whichever
// place in a threshold step the bound falls at.
func TestTrack_NarrowWalk(t *testing.T) {
	ix := NewIndex(fleetOf(3000))
	ix.Track()
	for _, p := range []Prefs{
		{MaxPrice: PriceCap{Prompt: ptr(usd("0.1"))}},
		{MaxPrice: PriceCap{Prompt: ptr(usd("0.2")), Completion: ptr(usd("0.3"))}, MinReliability: ptr(0.95)},
		{Regions: []string{"eu"}, MinReliability: ptr(0.9)},
	} {
		f := newFilter(Request{Model: model, Prefs: p})
		w := ix.newPickWalk(&f)
		ix.narrowWalk(&f, &w)
		let, missed, extra := 0, 0, 0
		for i := range ix.cands {
			in := true
			for _, b := range w.bitmaps() {
				in = in && b[i/64]&(1<<(i%64)) != 0
			}
			why, _ := f.check(&ix.cands[i])
			switch {
			case why == eligible || why == busy:
				let++
				if !in {
					missed++
				}
			case in && (why == overPrice || why == unreliable):
				extra++
			}
		}
		if let == 0 || missed > 0 || extra > 0 {
			t.Errorf("%+v: of the %d candidates its filters let through the narrowed walk misses %d, and keeps %d over its thresholds",
				p, let, missed, extra)
		}
		w.release()
	}
}

// Each tier has its own map: a node whose slots are all taken but the one kept for gold is
// skipped by silver and bronze walks, not by gold's, and a node that refuses bronze only by
// bronze's.
func TestTrack_TierMaps(t *testing.T) {
	kept, picky := offer("kept", 2, 1), offer("picky", 1, 2)
	kept.gold, picky.noBronze = 1, true
	ix := NewIndex(candidates(kept, picky))
	ix.Track()
	if !ix.mayTake(0, tier.Silver) || ix.mayTake(1, tier.Bronze) || !ix.mayTake(1, tier.Silver) {
		t.Fatalf("at the start: kept may take silver %v, picky bronze %v, silver %v; want true, false, true",
			ix.mayTake(0, tier.Silver), ix.mayTake(1, tier.Bronze), ix.mayTake(1, tier.Silver))
	}
	pick := func(tr tier.Tier) string {
		c, err := ix.Pick(Request{Model: model, Tier: tr, Rand: seeded()})
		if err != nil {
			return err.Error()
		}
		return c.NodeID
	}
	if got := pick(tier.Silver); got != "kept" {
		t.Fatalf("silver took %s, want kept", got)
	}
	if ix.mayTake(0, tier.Silver) || ix.mayTake(0, tier.Bronze) || !ix.mayTake(0, tier.Gold) {
		t.Errorf("kept with its shared slot taken: may take silver %v, bronze %v, gold %v; want false, false, true",
			ix.mayTake(0, tier.Silver), ix.mayTake(0, tier.Bronze), ix.mayTake(0, tier.Gold))
	}
	if got := pick(tier.Bronze); got != "2 nodes serve llama3.1:8b: 1 busy, 1 refuses bronze" {
		t.Errorf("bronze: %s; want both counted", got)
	}
	if got := pick(tier.Gold); got != "kept" {
		t.Errorf("gold took %s, want kept's gold slot", got)
	}
	if ix.mayTake(0, tier.Gold) {
		t.Error("kept's gold bit is set with both its slots taken")
	}
	kept.Release()
	for _, tr := range tier.All {
		if !ix.mayTake(0, tr) {
			t.Errorf("kept's %s bit is clear after a slot was freed", tr)
		}
	}
}
