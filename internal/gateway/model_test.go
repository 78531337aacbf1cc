package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/testenv"
)

// A buyer's min_reliability filters on the reliability GET /v1/models/{id}/endpoints shows for
// each node, whether that is the node's reputation score or, before one is computed, its
// measured reliability: a node shown below the minimum is skipped, one shown at it serves.
func TestEndpoints_ReliabilityIsWhatMinReliabilityFilters(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) { c.Coordinator.Prober.ScoreEvery = time.Hour }) // scores as the test sets them
	const model = "sim/llama-3.1-8b"
	scored, measured := env.Agents[0].NodeID(), env.Agents[1].NodeID()
	fl := env.Coordinator().Fleet
	fl.Node(scored).SetScore(0.6) // its measured reliability stays 1: no answers yet
	for _, o := range fl.Offers(model) {
		if o.Node.ID == measured {
			o.Observe(false, 0, 0) // no score: one failure leaves it at 0.8
		}
	}

	shown := func() map[string]float64 {
		t.Helper()
		var eps struct {
			Data struct {
				Endpoints []struct {
					NodeID      string  `json:"node_id"`
					Reliability float64 `json:"reliability"`
				} `json:"endpoints"`
			} `json:"data"`
		}
		getJSON(t, env, "/models/"+model+"/endpoints", &eps)
		m := map[string]float64{}
		for _, e := range eps.Data.Endpoints {
			m[e.NodeID] = e.Reliability
		}
		return m
	}
	rel := shown()
	if rel[scored] != 0.6 || rel[measured] != 0.8 {
		t.Errorf("endpoints show reliability %v; want %s at its score 0.6 and %s at its measured 0.8", rel, scored, measured)
	}
	only := func(node string, min float64) string {
		return fmt.Sprintf(`,"provider":{"only":[%q],"min_reliability":%v}`, node, min)
	}
	for _, node := range []string{scored, measured} {
		above := rel[node] + 0.01
		if above > 1 {
			continue // not a minimum a buyer can ask for
		}
		if status, _, _, code, msg := routed(t, env, only(node, above)); status != 503 || !strings.Contains(msg, "1 below min reliability") {
			t.Errorf("%s shown at %v, min_reliability %v: %d %s %q; want 503, below min reliability", node, rel[node], above, status, code, msg)
		}
	}
	for _, node := range []string{scored, measured} {
		if status, served, _, _, msg := routed(t, env, only(node, rel[node])); status != 200 || served != node {
			t.Errorf("%s shown at %v, min_reliability %v: %d from %q (%s); want it to serve", node, rel[node], rel[node], status, served, msg)
		}
	}
	// Between the two: the node shown below is skipped every time.
	between := (rel[scored] + rel[measured]) / 2
	for range 5 {
		if status, served, _, _, msg := routed(t, env, fmt.Sprintf(`,"provider":{"min_reliability":%v}`, between)); status != 200 || served != measured {
			t.Fatalf("min_reliability %v with reliabilities %v: %d from %q (%s); want %s", between, shown(), status, served, msg, measured)
		}
	}
}
