package mesh_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/testenv"
)

// cpuNow is the process's CPU time, user and system: both replicas and the agent are in it.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRemote is one non-streamed request, one at a time, served by the node that replica
// B holds: asked of B itself (local), or of replica A (remote: slot, job and frames over
// NATS). CPU is the whole process's per request (both replicas, the agent, the engine); p50
// is the request's wall time.
//
//	go test -run '^$' -bench BenchmarkRemote -benchtime 500x ./internal/mesh
func BenchmarkRemote(b *testing.B) {
	r := twoReplicas(b, 1, func(c *testenv.Config) { c.Sim.TokensPerSecond = 0 })
	client := &http.Client{}
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"Say twenty words."}],"max_tokens":20}`
	for _, path := range []struct{ name, url string }{{"local", r.env.URL}, {"remote", r.aURL}} {
		b.Run(path.name, func(b *testing.B) {
			var took []time.Duration
			cpu := cpuNow()
			b.ResetTimer()
			for range b.N {
				req, _ := http.NewRequest(http.MethodPost, path.url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+r.env.APIKey)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuNow()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
		})
	}
}

// BenchmarkViewStaleness is how long a change of a node on replica B (its score, published
// with the next second's records, as every field is) takes to reach replica A's view.
func BenchmarkViewStaleness(b *testing.B) {
	r := twoReplicas(b, 1, func(c *testenv.Config) { c.Coordinator.Prober.ScoreEvery = time.Hour }) // scores as the benchmark sets them
	id := r.env.Agents[0].NodeID()
	local := r.env.Coordinator().Fleet
	var took []time.Duration
	for i := range b.N {
		want := 0.5 + float64(i%40)/100
		start := time.Now()
		local.Node(id).SetScore(want)
		for r.a.Fleet.Node(id) == nil || r.a.Fleet.Node(id).Score() != want {
			time.Sleep(time.Millisecond)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
