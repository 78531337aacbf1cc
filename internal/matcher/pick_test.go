package matcher

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/tier"
)

// testOffer is a node's offer as the matcher's tests see it: the candidate it snapshots, and
// its live slots, as a fleet.Offer keeps them.
type testOffer struct {
	c        Candidate // Running, GoldSlots and NoBronze are read at the snapshot
	mu       sync.Mutex
	running  int
	gold     int
	noBronze bool
	hint     *FreeHint // the tracking index's, once Watch
}

func offer(node string, slots int, price int64) *testOffer {
	return &testOffer{c: Candidate{NodeID: node, ProviderID: "acct-" + node, Region: "de", MaxConcurrent: slots,
		InputPrice: money.Price(price), OutputPrice: money.Price(price), Reliability: 1}}
}

func (o *testOffer) Running() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running
}

func (o *testOffer) AcquireFor(t tier.Tier) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running >= tier.Slots(o.c.MaxConcurrent, o.gold, o.noBronze, t) {
		return false
	}
	o.running++
	return true
}

func (o *testOffer) Acquire() bool { return o.AcquireFor(tier.Silver) }

func (o *testOffer) Release() {
	o.mu.Lock()
	o.running--
	h := o.hint
	o.mu.Unlock()
	h.Freed()
}

func (o *testOffer) Watch(h *FreeHint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hint = h
	return true
}

// candidates snapshots offers, as fleet.Candidates does.
func candidates(offers ...*testOffer) []Candidate {
	cs := make([]Candidate, len(offers))
	for i, o := range offers {
		cs[i] = o.c
		cs[i].Slot, cs[i].Running, cs[i].GoldSlots, cs[i].NoBronze = o, o.Running(), o.gold, o.noBronze
	}
	return cs
}

func TestRanking_Pick(t *testing.T) {
	cheap, dear := offer("cheap", 1, 1), offer("dear", 1, 2)
	r := Match(Request{Model: model, Rand: seeded()}, candidates(dear, cheap))
	c, err := r.Pick()
	if err != nil || c.Slot != cheap {
		t.Fatalf("first pick %v, %v; want cheap", c.NodeID, err)
	}
	if cheap.Running() != 1 {
		t.Errorf("cheap runs %d; want the slot taken", cheap.Running())
	}
	// The cheap node refused the job: the next Pick goes on to the next.
	c, err = r.Pick()
	if err != nil || c.Slot != dear {
		t.Fatalf("second pick %v, %v; want dear", c.NodeID, err)
	}
	_, err = r.Pick()
	np, ok := errors.AsType[*NoProvider](err)
	if !ok || np.Error() != "2 nodes serve llama3.1:8b: 2 excluded" {
		t.Errorf("third pick: %v; want both excluded as taken", err)
	}
}

// A slot taken since the snapshot is skipped and counted busy.
func TestRanking_PickRace(t *testing.T) {
	a, b := offer("a", 1, 1), offer("b", 1, 2)
	r := Match(Request{Model: model}, candidates(a, b))
	a.Acquire()
	c, err := r.Pick()
	if err != nil || c.Slot != b {
		t.Fatalf("pick %v, %v; want b", c.NodeID, err)
	}
	b.Release()
	b.Acquire()
	r = Match(Request{Model: model}, candidates(offer("c", 1, 1)))
	r.cands[0].Slot.AcquireFor(tier.Silver)
	if _, err := r.Pick(); err == nil || err.Error() != "1 node serves llama3.1:8b: 1 busy" {
		t.Errorf("got %v; want 1 busy", err)
	}
}

// When every ranked candidate is taken since the snapshot, Pick ranks the rest.
func TestRanking_PickBeyondDepth(t *testing.T) {
	var offers []*testOffer
	for i := range 10 {
		offers = append(offers, offer(fmt.Sprint("n", i), 1, int64(i)))
	}
	r := Match(Request{Model: model, Depth: 3}, candidates(offers...))
	for _, o := range offers[:7] {
		o.Acquire()
	}
	c, err := r.Pick()
	if err != nil || c.NodeID != "n7" {
		t.Fatalf("got %v, %v; want n7", c.NodeID, err)
	}
	offers[8].Acquire()
	offers[9].Acquire()
	_, err = r.Pick()
	if err == nil || err.Error() != "10 nodes serve llama3.1:8b: 9 busy, 1 excluded" {
		t.Errorf("got %v; want 9 busy, 1 excluded", err)
	}
}
