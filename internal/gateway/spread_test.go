package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// Nodes with equal asks and reputation scores a few points apart share the traffic: over 300
// requests each serves within 15% of its fair share, rather than the best scored serving all.
func TestSpread_EqualNodesShare(t *testing.T) {
	env := testenv.New(t, testenv.Providers(4), func(c *testenv.Config) { c.Coordinator.Prober.ScoreEvery = time.Hour }) // scores as the test sets them
	fl := env.Coordinator().Fleet
	scores := map[string]float64{}
	for i, a := range env.Agents {
		scores[a.NodeID()] = 0.96 + float64(i)/100 // 0.96 to 0.99: effective prices within 3.2%
		fl.Node(a.NodeID()).SetScore(scores[a.NodeID()])
	}

	const requests = 300
	served := map[string]int{}
	for range requests {
		status, node, _, _, msg := routed(t, env, "")
		if status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		served[node]++
	}
	t.Logf("served of %d: %v", requests, served)
	fair := float64(requests) / float64(len(scores))
	for id, score := range scores {
		if n := float64(served[id]); n < 0.85*fair || n > 1.15*fair {
			t.Errorf("node %s scored %v served %v of %d; want %v ± 15%%", id, score, n, requests, fair)
		}
		if got := fl.Node(id).Score(); got != score {
			t.Fatalf("node %s's score is %v, not the %v the test set: the scorer ran", id, got, score)
		}
	}
}

// A node that connects again, as after a crash, starts from its stored reputation score, not
// from a perfect record: the auction ranks it by what its record says until the next scoring.
func TestSpread_ReconnectKeepsScore(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Prober.ScoreEvery = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const model = "spread-test-model"
	reg := protocol.Register{Name: "crashy", Region: "de", Engine: "hand", Agent: "test",
		Offers: []protocol.Offer{{Model: model, MaxConcurrent: 1, InputPrice: 50_000_000, OutputPrice: 100_000_000}}}
	first, err := env.DialHostile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	id, fl := first.NodeID, env.Coordinator().Fleet
	// As the scorer leaves it: its record's score, stored and live.
	const stored = 0.6
	if err := env.Store.SetNodeScores(ctx, map[string]float64{id: stored}, time.Now()); err != nil {
		t.Fatal(err)
	}
	fl.Node(id).SetScore(stored)

	first.Close() // the crash
	env.WaitFor("the node to leave", func() bool { return fl.Node(id) == nil })
	again, err := env.DialHostile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again.Key = first.Key // the same node
	if _, err := again.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if again.NodeID != id {
		t.Fatalf("registered again as %s; want %s", again.NodeID, id)
	}
	cands := fleet.Candidates(fl.Offers(model))
	if len(cands) != 1 || cands[0].Reliability != stored {
		t.Errorf("after reconnecting, the auction sees %+v; want its stored score %v as its reliability", cands, stored)
	}
}
