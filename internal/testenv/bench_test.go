package testenv_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/openaicompat"
	"github.com/shareai/shareai/internal/testenv"
)

// instantUpstream is an OpenAI-compatible engine that answers at once: 20 content chunks per
// streamed answer, then usage and [DONE].
func instantUpstream() *httptest.Server {
	var stream bytes.Buffer
	stream.WriteString(`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := range 20 {
		fmt.Fprintf(&stream, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word%d"},"finish_reason":null}]}`+"\n\n", i)
	}
	stream.WriteString(`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	stream.WriteString(`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}` + "\n\n")
	stream.WriteString("data: [DONE]\n\n")
	whole := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"word0 word1 word2 word3 word4 word5 word6 word7 word8 word9 word10 word11 word12 word13 word14 word15 word16 word17 word18 word19"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}`)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			w.Write([]byte(`{"object":"list","data":[{"id":"m","object":"model","max_model_len":8192}]}`))
			return
		}
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(stream.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(whole)
	}))
}

// BenchmarkPath measures what the coordinator + agent path adds over calling the engine
// directly: CPU per request (both hops, in this process, less the direct run's) and latency
// percentiles, streamed (20 chunks) and not, at 1 and 50 requests at a time.
//
//	go test -run '^$' -bench BenchmarkPath -benchtime 2000x ./internal/testenv
func BenchmarkPath(b *testing.B) {
	up := instantUpstream()
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
			for _, path := range []struct{ name, url, key string }{
				{"direct", up.URL + "/v1/chat/completions", ""},
				{"shareai", env.BaseURL() + "/chat/completions", env.APIKey},
			} {
				name := fmt.Sprintf("stream=%v/conc=%d/%s", stream, conc, path.name)
				b.Run(name, func(b *testing.B) {
					body := `{"model":"m","messages":[{"role":"user","content":"Say twenty words."}],"stream":` + fmt.Sprint(stream) + `}`
					runPath(b, client, path.url, path.key, body, stream, conc)
				})
			}
		}
	}
}

func runPath(b *testing.B, client *http.Client, url, key, body string, stream bool, conc int) {
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
	samples = samples[:0]
	cpu0 := cpuTime()
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
	b.StopTimer()
	cpu := cpuTime() - cpu0
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

// cpuTime is the CPU this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
