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
// percentiles, streamed (20 chunks) and not, at 1 and 50 requests at a time; and, not
// streamed at 50 at a time, with a 16 KB conversation, as real chats and retrieval send, for
// what each byte of a request costs on the way.
//
//	go test -run '^$' -bench BenchmarkPath -benchtime 2000x ./internal/testenv
func BenchmarkPath(b *testing.B) {
	up := httptest.NewServer(bench.Mock()) // 20 chunks a stream, at once
	defer up.Close()
	env := testenv.New(b, testenv.Providers(1), func(c *testenv.Config) {
		// A running coordinator's background work, not a test network's: it records nodes'
		// activity each minute, not each 100ms (a transaction each time), and scores them and
		// samples their slots at its own pace.
		c.Coordinator.SlotSampleEvery, c.Coordinator.Fleet.RecordInterval = 0, 0
		c.Coordinator.Prober.ScoreEvery, c.Coordinator.Prober.Tick = 0, 0
		c.Agent.MaxConcurrent = 256
		c.NewEngine = func(int) (engine.Engine, error) {
			return openaicompat.New(openaicompat.Config{BaseURL: up.URL + "/v1"})
		}
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	paths := []struct {
		name, url, key string
		settle         func(context.Context) error
	}{
		{"direct", up.URL + "/v1/chat/completions", "", nil},
		{"shareai", env.BaseURL() + "/chat/completions", env.APIKey, env.Coordinator().Ledger.Flush},
	}
	short := `[{"role":"user","content":"Say twenty words."}]`
	for _, stream := range []bool{false, true} {
		for _, conc := range []int{1, 50} {
			for _, path := range paths {
				b.Run(fmt.Sprintf("stream=%v/conc=%d/%s", stream, conc, path.name), func(b *testing.B) {
					runPath(b, client, path.url, path.key, chatBody(short, stream), stream, conc, path.settle)
				})
			}
		}
	}
	long := conversation(16 << 10)
	for _, path := range paths {
		b.Run("prompt=16KB/stream=false/conc=50/"+path.name, func(b *testing.B) {
			runPath(b, client, path.url, path.key, chatBody(long, false), false, 50, path.settle)
		})
	}
}

// chatBody is a chat completion request for the mock's model with these messages.
func chatBody(messages string, stream bool) string {
	return `{"model":"` + bench.MockModel + `","messages":` + messages + `,"stream":` + fmt.Sprint(stream) + `}`
}

// conversation returns a chat's messages of about size bytes of JSON: a system prompt, then
// turns of prose with quotes, new lines and a few non-ASCII words, as a long chat or a
// retrieval prompt has them.
func conversation(size int) string {
	const prose = `The keeper wrote in the log: \"Wind from the north-east, rising.\" He lit the lamp at dusk, ` +
		`trimmed the wick twice before midnight and watched the Æolian harp on the gallery sing. ` +
		`Ships passed at 02:10 and 03:45; one signalled — he answered, and noted the time.\n\n`
	b := []byte(`[{"role":"system","content":"You are a careful assistant. Answer from the documents below.\n"}`)
	for i := 0; len(b) < size; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b = append(b, `,{"role":"`+role+`","content":"`...)
		for range 4 {
			b = append(b, prose...)
		}
		b = append(b, `"}`...)
	}
	return string(append(b, ']'))
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
