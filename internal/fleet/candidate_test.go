package fleet_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/reputation"
)

const candidateModel = "llama3.1:8b"

func candidateOffer(node string, slots int, price int64) *fleet.Offer {
	return &fleet.Offer{
		Offer: protocol.Offer{Model: candidateModel, MaxConcurrent: slots, InputPrice: price, OutputPrice: price},
		Node:  (&fleet.Node{ID: node, AccountID: "acct-" + node, Region: "DE"}).WithLevel("verified"),
	}
}

func TestCandidates(t *testing.T) {
	o := candidateOffer("a", 3, 150_000_000)
	o.Quantization = "Q4_K_M"
	if !o.Acquire() {
		t.Fatal("acquire")
	}
	o.Observe(true, 200*time.Millisecond, 40)
	o.Observe(false, 0, 0)
	got := fleet.Candidates([]*fleet.Offer{o, {Offer: protocol.Offer{MaxConcurrent: 1}, Node: (&fleet.Node{ID: "b", Region: "europe"}).WithLevel("verified")}})
	want := matcher.Candidate{Slot: o, NodeID: "a", ProviderID: "acct-a", Region: "de", InputPrice: money.Price(150_000_000), OutputPrice: money.Price(150_000_000),
		Reliability: 0.8, Running: 1, MaxConcurrent: 3, Quantization: "q4_k_m", TTFT: 200 * time.Millisecond, TokensPerSecond: 40, Warm: true, Surge: 10000}
	if got[0] != want {
		t.Errorf("got %+v; want %+v", got[0], want)
	}
	if got[1].Region != "" {
		t.Errorf("region %q from a node in \"europe\"; want \"\" (unknown)", got[1].Region)
	}
	if fleet.OfferOf(got[0]) != o || fleet.OfferOf(matcher.Candidate{}) != nil {
		t.Error("OfferOf does not return the candidate's offer")
	}
	// The candidate's slot is the offer's: the matcher takes it live.
	if c, err := matcher.Match(matcher.Request{Model: candidateModel}, got[:1]).Pick(); err != nil || o.Running() != 2 || fleet.OfferOf(c) != o {
		t.Errorf("pick %v: running %d; want the offer's second slot taken", err, o.Running())
	}
}

// The level the matcher sees is the offer's: a model not verified yet on a verified node, or
// quarantined there, gets no live traffic though the node does for its other models.
func TestCandidates_OfferLevel(t *testing.T) {
	node := (&fleet.Node{ID: "a", AccountID: "acct-a"}).WithLevel("trusted")
	for own, want := range map[string]matcher.Level{"verified": matcher.Trusted, "new": matcher.Unverified, "quarantined": matcher.Quarantined} {
		o := (&fleet.Offer{Offer: protocol.Offer{Model: candidateModel, MaxConcurrent: 1}, Node: node}).WithLevel(own)
		if got := o.Candidate().Level; got != want {
			t.Errorf("a model %s on a trusted node: level %v; want %v", own, got, want)
		}
	}
}

// A node the coordinator knows nothing of yet — no score, no job since it connected, as a
// node back from a crash was — ranks as a node with no record, not as a perfect one.
func TestReliability(t *testing.T) {
	scored, measured, fresh := candidateOffer("scored", 1, 1), candidateOffer("measured", 1, 1), candidateOffer("fresh", 1, 1)
	scored.Node.SetScore(0.6)
	measured.Observe(false, 0, 0)
	for _, tt := range []struct {
		o    *fleet.Offer
		want float64
	}{
		{scored, 0.6},
		{measured, 0.8}, // the moving average after one failure
		{fresh, reputation.Prior},
	} {
		if got := fleet.Reliability(tt.o.Node, tt.o.Stats()); got != tt.want {
			t.Errorf("%s: reliability %v; want %v", tt.o.Node.ID, got, tt.want)
		}
	}

	steady := candidateOffer("steady", 1, 1)
	steady.Node.SetScore(0.9)
	cands := fleet.Candidates([]*fleet.Offer{fresh, steady})
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		if c := matcher.Match(matcher.Request{Model: candidateModel, Rand: rng}, cands).Best()[0]; c.NodeID != "steady" {
			t.Fatalf("match ranks %s first; want the node scored 0.9 before one with no record", c.NodeID)
		}
	}
}

// An offer tells the index that tracks it when it frees a slot: the index skips it while its
// slots are all taken and takes it again once one is freed.
func TestOffer_Watch(t *testing.T) {
	cheap, dear := candidateOffer("cheap", 1, 100), candidateOffer("dear", 2, 200)
	ix := matcher.NewIndex(fleet.Candidates([]*fleet.Offer{cheap, dear}))
	ix.Track()
	req := matcher.Request{Model: candidateModel, Rand: rand.New(rand.NewPCG(1, 2))}
	for _, want := range []*fleet.Offer{cheap, dear} {
		if c, err := ix.Pick(req); err != nil || fleet.OfferOf(c) != want {
			t.Fatalf("pick %v, %v; want %s", c.NodeID, err, want.Node.ID)
		}
	}
	// dear has a slot free still: a pick that skipped cheap would take it.
	cheap.Release()
	if c, err := ix.Pick(req); err != nil || fleet.OfferOf(c) != cheap {
		t.Errorf("pick after cheap freed its slot: %v, %v; want cheap", c.NodeID, err)
	}
}
