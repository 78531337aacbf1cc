package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/bench"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

func TestBench_ParseMemory(t *testing.T) {
	b, err := os.ReadFile("testdata/metrics.prom")
	if err != nil {
		t.Fatal(err)
	}
	m, err := bench.ParseMemory(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	streams := 3.0
	want := bench.Memory{RSSBytes: 1.103872e+07, HeapInuseBytes: 1.47456e+06, HeapAllocBytes: 233456, StackInuseBytes: 327680,
		SysBytes: 7.821576e+06, Goroutines: 9, StreamsActive: &streams}
	if m.StreamsActive == nil || *m.StreamsActive != streams {
		t.Errorf("streams active %v, want 3", m.StreamsActive)
	}
	m.StreamsActive, want.StreamsActive = nil, nil
	if *m != want {
		t.Errorf("got %+v\nwant %+v", *m, want)
	}

	without := regexp.MustCompile(`(?m)^.*shareai_streams_active.*\n`).ReplaceAll(b, nil)
	if m, err := bench.ParseMemory(bytes.NewReader(without)); err != nil || m.StreamsActive != nil {
		t.Errorf("without shareai_streams_active: %+v, %v; want no streams and no error", m, err)
	}
	noRSS := regexp.MustCompile(`(?m)^.*process_resident_memory_bytes.*\n`).ReplaceAll(b, nil)
	if _, err := bench.ParseMemory(bytes.NewReader(noRSS)); err == nil || !strings.Contains(err.Error(), "process_resident_memory_bytes") {
		t.Errorf("without RSS: %v; want an error naming it", err)
	}
	if _, err := bench.ParseMemory(strings.NewReader("not { metrics")); err == nil {
		t.Error("garbage parsed")
	}
}

// fakeMetrics serves the recorded exposition, with RSS, heap and goroutines raised by what
// streams() open streams would cost at perStream bytes (and 3 goroutines) each.
func fakeMetrics(t *testing.T, streams func() int, perStream int) *httptest.Server {
	t.Helper()
	b, err := os.ReadFile("testdata/metrics.prom")
	if err != nil {
		t.Fatal(err)
	}
	set := func(text []byte, name string, v float64) []byte {
		return regexp.MustCompile(`(?m)^`+name+` .*$`).ReplaceAll(text, fmt.Appendf(nil, "%s %g", name, v))
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := float64(streams())
		text := set(b, "process_resident_memory_bytes", 1.103872e+07+n*float64(perStream))
		text = set(text, "go_memstats_heap_inuse_bytes", 1.47456e+06+n*float64(perStream)/2)
		text = set(text, "go_goroutines", 9+3*n)
		text = set(text, "shareai_streams_active", n)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(text)
	}))
}

func TestBench_Hold(t *testing.T) {
	// Two tokens a second and 100 of them: every stream stays open for the whole test.
	env := testenv.New(t, func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 2} })
	const streams = 24
	metrics := fakeMetrics(t, func() int {
		if c := env.Coordinator(); c != nil {
			return c.Fleet.Running()
		}
		return 0
	}, 50_000)
	defer metrics.Close()
	var progress cancelAfter
	progress.n, progress.cancel = 1<<62, func() {}
	rep, err := bench.RunHold(context.Background(), bench.HoldConfig{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Streams: streams, MaxTokens: 100, Prompt: prompt,
		MetricsURL: metrics.URL, Settle: 50 * time.Millisecond, Dialing: 5, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := rep.Hold
	if h == nil || h.Opened != streams || h.Failed != 0 || h.EndedEarly != 0 || h.OpenAtReading != streams || rep.OK != streams || rep.Failed != 0 {
		t.Fatalf("hold %+v, ok %d, failed %d; want all %d streams open at the reading", h, rep.OK, rep.Failed, streams)
	}
	if h.PerStream == nil || h.PerStream.RSSBytes != 50_000 || h.PerStream.HeapInuseBytes != 25_000 || h.PerStream.Goroutines != 3 ||
		h.PerStream.StreamsActive == nil || *h.PerStream.StreamsActive != 1 {
		t.Errorf("per stream %+v; want 50000 B RSS, 25000 B heap, 3 goroutines, 1 stream", h.PerStream)
	}
	if h.After == nil {
		t.Error("no reading after the streams closed")
	}
	if rep.TTFT == nil || rep.TTFT.N != streams || h.OpenSeconds <= 0 {
		t.Errorf("ttft %+v, open in %vs", rep.TTFT, h.OpenSeconds)
	}
	if progress.last.Done != streams || !progress.last.Holding {
		t.Errorf("last progress %+v", progress.last)
	}
	env.WaitFor("the streams to be cancelled", func() bool { c, a := env.Running(); return c == 0 && a == 0 })

	var text strings.Builder
	rep.WriteText(&text)
	for _, want := range []string{"Held 24 streams: 24 opened", "per stream", "48.8 KiB", "goroutines"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text has no %q:\n%s", want, text.String())
		}
	}
	b, _ := json.Marshal(rep)
	var back bench.Report
	if err := json.Unmarshal(b, &back); err != nil || back.Hold == nil || back.Hold.PerStream.RSSBytes != 50_000 {
		t.Errorf("JSON round trip: %v, %s", err, b)
	}
}

// TestBench_HoldTooFast holds streams that end before the reading: the report says so.
func TestBench_HoldTooFast(t *testing.T) {
	env := testenv.New(t)
	var scrapes atomic.Int32
	metrics := fakeMetrics(t, func() int { scrapes.Add(1); return 0 }, 0)
	defer metrics.Close()
	rep, err := bench.RunHold(context.Background(), bench.HoldConfig{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Streams: 4, MaxTokens: 4, Prompt: prompt,
		MetricsURL: metrics.URL, Settle: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if h := rep.Hold; h.Opened != 4 || h.EndedEarly != 4 || h.OpenAtReading != 0 || h.PerStream != nil || scrapes.Load() != 3 {
		t.Errorf("hold %+v after %d scrapes; want 4 ended early, no per-stream figure, 3 readings", h, scrapes.Load())
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "too fast") {
		t.Errorf("text does not warn:\n%s", text.String())
	}
}

// TestBench_HoldLiveMetrics reads the coordinator's own Prometheus endpoint: it counts the
// streams held open.
func TestBench_HoldLiveMetrics(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 2} })
	metrics := httptest.NewServer(env.Coordinator().MetricsHandler())
	defer metrics.Close()
	const streams = 16
	rep, err := bench.RunHold(context.Background(), bench.HoldConfig{
		BaseURL: env.BaseURL(), APIKey: env.APIKey, Model: model, Streams: streams, MaxTokens: 100, Prompt: prompt,
		MetricsURL: metrics.URL, Settle: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := rep.Hold
	if h.OpenAtReading != streams || h.Before == nil || h.During == nil || h.During.StreamsActive == nil {
		t.Fatalf("hold %+v; want readings with %d streams open", h, streams)
	}
	if got := *h.During.StreamsActive - *h.Before.StreamsActive; got != streams {
		t.Errorf("shareai_streams_active rose by %v, want %d", got, streams)
	}
	if h.During.RSSBytes == 0 || h.During.HeapInuseBytes == 0 || h.PerStream.Goroutines <= 0 {
		t.Errorf("during %+v, per stream %+v; want memory and goroutines read", h.During, h.PerStream)
	}
}
