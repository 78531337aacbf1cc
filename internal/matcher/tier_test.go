package matcher

import (
	"errors"
	"testing"

	"github.com/shareai/shareai/internal/tier"
)

// A node's gold slots are left to gold, and a node that refuses bronze gets none, both by
// Match and by the index's walk.
func TestTierSlots(t *testing.T) {
	o := offer("a", 2, 1)
	o.gold = 1
	for _, walk := range []bool{false, true} {
		pick := func(tr tier.Tier) error {
			req := Request{Model: model, Tier: tr, Rand: seeded()}
			cands := candidates(o)
			if walk {
				_, err := NewIndex(cands).Pick(req)
				return err
			}
			_, err := Match(req, cands).Pick()
			return err
		}
		if err := pick(tier.Silver); err != nil {
			t.Fatalf("walk %v: silver takes the free slot: %v", walk, err)
		}
		err := pick(tier.Bronze)
		if np, ok := errors.AsType[*NoProvider](err); !ok || np.Reasons[ReasonBusy] != 1 {
			t.Errorf("walk %v: bronze took the gold slot: %v", walk, err)
		}
		if err := pick(tier.Gold); err != nil {
			t.Errorf("walk %v: gold did not get its slot: %v", walk, err)
		}
		if o.Running() != 2 {
			t.Fatalf("running %d; want 2", o.Running())
		}
		o.Release()
		o.Release()
	}
	o.noBronze = true
	_, err := Match(Request{Model: model, Tier: tier.Bronze}, candidates(o)).Pick()
	if np, ok := errors.AsType[*NoProvider](err); !ok || np.Reasons[ReasonNoBronze] != 1 || np.Busy() {
		t.Errorf("a node refusing bronze: %v; want 1 refuses bronze, not busy", err)
	}
}

// max_price caps what the buyer pays: the ask times the tier's multiplier.
func TestTierMaxPrice(t *testing.T) {
	o := offer("a", 1, 100_000_000) // $0.10 per 1M tokens
	p := Prefs{}
	p.MaxPrice.Prompt = ptr(usd("0.12"))
	cands := candidates(o)
	if _, err := Match(Request{Model: model, Prefs: p, Multiplier: 15000}, cands).Pick(); err == nil {
		t.Error("gold at ×1.5 ($0.15) passed a $0.12 cap")
	}
	if _, err := Match(Request{Model: model, Prefs: p, Multiplier: 10000}, cands).Pick(); err != nil {
		t.Errorf("silver at $0.10 under a $0.12 cap: %v", err)
	}
}

// Batch work goes to the idlest node first, even a dearer one, and never to a node that
// refuses it.
func TestBatchWork(t *testing.T) {
	busyCheap, idleDear, refuser := offer("busy-cheap", 4, 1), offer("idle-dear", 4, 2), offer("refuser", 8, 1)
	busyCheap.running = 3
	cands := candidates(busyCheap, idleDear, refuser)
	cands[2].NoBatch = true
	c, err := Match(Request{Model: model, Tier: tier.Bronze, Batch: true, Rand: seeded()}, cands).Pick()
	if err != nil || c.NodeID != "idle-dear" {
		t.Fatalf("batch work went to %s, %v; want the idle node", c.NodeID, err)
	}
	idleDear.running = 4
	cands = candidates(busyCheap, idleDear, refuser)
	cands[2].NoBatch = true
	busyCheap.running = 4
	cands[0].Running = 4
	_, err = Match(Request{Model: model, Tier: tier.Bronze, Batch: true, Rand: seeded()}, cands).Pick()
	if np, ok := errors.AsType[*NoProvider](err); !ok || np.Reasons[ReasonNoBatch] != 1 {
		t.Errorf("every node busy or refusing: %v; want the refuser counted as %q", err, ReasonNoBatch)
	}
	// Live work ranks as before: the cheap node first, the refuser eligible.
	busyCheap.running = 0
	c, err = Match(Request{Model: model, Rand: seeded()}, candidates(busyCheap, idleDear, refuser)).Pick()
	if err != nil || c.NodeID == "idle-dear" {
		t.Errorf("live work went to %s, %v; want a cheap node", c.NodeID, err)
	}
}
