package matcher

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
)

func offer(node string, slots int, price int64) *fleet.Offer {
	return &fleet.Offer{
		Offer: protocol.Offer{Model: model, MaxConcurrent: slots, InputPrice: price, OutputPrice: price},
		Node:  (&fleet.Node{ID: node, AccountID: "acct-" + node, Region: "DE"}).WithLevel("verified"),
	}
}

func TestFromOffers(t *testing.T) {
	o := offer("a", 3, 150_000_000)
	o.Quantization = "Q4_K_M"
	if !o.Acquire() {
		t.Fatal("acquire")
	}
	o.Observe(true, 200*time.Millisecond, 40)
	o.Observe(false, 0, 0)
	got := FromOffers([]*fleet.Offer{o, {Offer: protocol.Offer{MaxConcurrent: 1}, Node: (&fleet.Node{ID: "b", Region: "europe"}).WithLevel("verified")}})
	want := Candidate{Offer: o, NodeID: "a", ProviderID: "acct-a", Region: "de", InputPrice: usd("0.15"), OutputPrice: usd("0.15"),
		Reliability: 0.8, Running: 1, MaxConcurrent: 3, Quantization: "q4_k_m", TTFT: 200 * time.Millisecond, TokensPerSecond: 40, Warm: true}
	if got[0] != want {
		t.Errorf("got %+v; want %+v", got[0], want)
	}
	if got[1].Region != "" {
		t.Errorf("region %q from a node in \"europe\"; want \"\" (unknown)", got[1].Region)
	}
}

func TestRanking_Pick(t *testing.T) {
	cheap, dear := offer("cheap", 1, 1), offer("dear", 1, 2)
	r := Match(Request{Model: model, Rand: seeded()}, FromOffers([]*fleet.Offer{dear, cheap}))
	c, err := r.Pick()
	if err != nil || c.Offer != cheap {
		t.Fatalf("first pick %v, %v; want cheap", c.NodeID, err)
	}
	if cheap.Running() != 1 {
		t.Errorf("cheap runs %d; want the slot taken", cheap.Running())
	}
	// The cheap node refused the job: the next Pick goes on to the next.
	c, err = r.Pick()
	if err != nil || c.Offer != dear {
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
	r := Match(Request{Model: model}, FromOffers([]*fleet.Offer{a, b}))
	a.Acquire()
	c, err := r.Pick()
	if err != nil || c.Offer != b {
		t.Fatalf("pick %v, %v; want b", c.NodeID, err)
	}
	b.Release()
	b.Acquire()
	r = Match(Request{Model: model}, FromOffers([]*fleet.Offer{offer("c", 1, 1)}))
	r.cands[0].Offer.Acquire()
	if _, err := r.Pick(); err == nil || err.Error() != "1 node serves llama3.1:8b: 1 busy" {
		t.Errorf("got %v; want 1 busy", err)
	}
}

// When every ranked candidate is taken since the snapshot, Pick ranks the rest.
func TestRanking_PickBeyondDepth(t *testing.T) {
	var offers []*fleet.Offer
	for i := range 10 {
		offers = append(offers, offer(fmt.Sprint("n", i), 1, int64(i)))
	}
	r := Match(Request{Model: model, Depth: 3}, FromOffers(offers))
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

// The package-level Pick keeps the gateway's wording.
func TestPick(t *testing.T) {
	o := offer("a", 1, 1)
	got, np := Pick("sim/llama-3.1-8b", []*fleet.Offer{o})
	if np != nil || got != o {
		t.Fatalf("got %v, %v; want the only offer", got, np)
	}
	_, np = Pick("sim/llama-3.1-8b", []*fleet.Offer{o})
	if np == nil || np.Error() != "1 node serves sim/llama-3.1-8b: 1 busy" || !np.Busy() {
		t.Errorf("got %v; want 1 node serves sim/llama-3.1-8b: 1 busy", np)
	}
}
