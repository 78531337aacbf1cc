package testenv_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/openaicompat"
	"github.com/shareai/shareai/internal/testenv"
)

// BenchmarkPath measures what the coordinator + agent path adds over calling the engine
// directly: CPU per request (both hops, in this process, less the direct run's) and latency
// percentiles, streamed (20 chunks) and not, at 1 and 50 requests at a time.
//
//	go test -run '^$' -bench BenchmarkPath -benchtime 2000x ./internal/testenv
func BenchmarkPath(b *testing.B) {
	up := httptest.NewServer(bench.Mock()) // 20 chunks a stream, at once
	defer up.Close()
	env := testenv.New(b, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 256
		c.NewEngine = func(int) (engine.Engine, error) {
			return openaicompat.New(openaicompat.Config{BaseURL: up.URL + "/v1"})
		}
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	for _, stream := range []bool{false, true} {
		for _, conc := range []int{1, 50} {
			for _, path := range []struct {
				name, url, key string
				settle         func(context.Context) error
			}{
				{"direct", up.URL + "/v1/chat/completions", "", nil},
				{"shareai", env.BaseURL() + "/chat/completions", env.APIKey, env.Coordinator().Ledger.Flush},
			} {
				name := fmt.Sprintf("stream=%v/conc=%d/%s", stream, conc, path.name)
				b.Run(name, func(b *testing.B) {
					body := `{"model":"` + bench.MockModel + `","messages":[{"role":"user","content":"Say twenty words."}],"stream":` + fmt.Sprint(stream) + `}`
					runPath(b, client, path.url, path.key, body, stream, conc, path.settle)
				})
			}
		}
	}
}

// runPath sends b.N requests, conc at a time, and reports the process's CPU per request and
// the latency; settle, if set, runs before each reading of the CPU (the ledger's group commit,
// so that the run's settlements count in the run, and the warm-up's do not).
func runPath(b *testing.B, client *http.Client, url, key, body string, stream bool, conc int, settle func(context.Context) error) {
	type sample struct{ ttft, total time.Duration }
	samples := make([]sample, 0, b.N)
	var mu sync.Mutex
	one := func() {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		var ttft time.Duration
		if stream {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line := sc.Bytes()
				if ttft == 0 && bytes.Contains(line, []byte(`"content":" word`)) {
					ttft = time.Since(start)
				}
				if bytes.Equal(line, []byte("data: [DONE]")) {
					break
				}
			}
		} else {
			io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
		total := time.Since(start)
		if resp.StatusCode != 200 {
			b.Errorf("status %d", resp.StatusCode)
		}
		if ttft == 0 {
			ttft = total
		}
		mu.Lock()
		samples = append(samples, sample{ttft, total})
		mu.Unlock()
	}
	for range 20 { // warm connections
		one()
	}
	if settle != nil {
		if err := settle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	samples = samples[:0]
	cpu0, err := bench.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	next := make(chan struct{})
	for range conc {
		wg.Go(func() {
			for range next {
				one()
			}
		})
	}
	for range b.N {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if settle != nil {
		if err := settle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1, err := bench.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	cpu := cpu1 - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	ttfts := make([]time.Duration, len(samples))
	totals := make([]time.Duration, len(samples))
	for i, s := range samples {
		ttfts[i], totals[i] = s.ttft, s.total
	}
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		if len(ds) == 0 {
			return
		}
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), name+"-p50-µs")
		b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), name+"-p99-µs")
	}
	if stream {
		report("ttft", ttfts)
	}
	report("total", totals)
}
