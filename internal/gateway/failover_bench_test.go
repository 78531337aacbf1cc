package gateway_test

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

// BenchmarkFailoverGap measures the failover gap: the time from a node's connection dropping
// mid-stream to the next piece of the answer reaching the buyer, from another node.
//
//	go test -run '^$' -bench FailoverGap -benchtime 100x ./internal/gateway
func BenchmarkFailoverGap(b *testing.B) {
	env := testenv.New(b, testenv.Providers(3), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 200} })
	gaps := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		resp := env.Post("/chat/completions", fmt.Sprintf(
			`{"model":"sim/llama-3.1-8b","stream":true,"seed":%d,"messages":[{"role":"user","content":"a long story %d"}]}`, i, i))
		node := resp.Header.Get("X-Shareai-Node")
		sc := bufio.NewScanner(resp.Body)
		chunks := 0
		var dropped time.Time
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"content":"`) || strings.Contains(sc.Text(), `"content":""`) {
				continue
			}
			chunks++
			if chunks == 3 {
				for _, a := range env.Agents {
					if a.NodeID() == node {
						dropped = time.Now()
						a.Drop()
					}
				}
				continue
			}
			if !dropped.IsZero() {
				gaps = append(gaps, time.Since(dropped))
				break
			}
		}
		resp.Body.Close()
		// Let the dropped node reconnect before the next round.
		testenv.WaitFor(b, "the node to reconnect", func() bool { return len(env.Coordinator().Fleet.Nodes()) == 3 })
	}
	b.StopTimer()
	if len(gaps) == 0 {
		b.Fatal("no failover measured")
	}
	slices.Sort(gaps)
	b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds())/1000, "gap-p50-ms")
	b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds())/1000, "gap-p99-ms")
	b.ReportMetric(float64(len(gaps))/float64(b.N), "failovers/op")
}
