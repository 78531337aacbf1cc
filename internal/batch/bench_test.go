package batch_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/testenv"
)

// BenchmarkBatch_10k runs a batch of 10,000 chat lines on a local network (two simulated
// providers of 64 slots, 20 ms to the first token, 500 tokens/s, max_tokens 16) and reports its
// throughput, and live streamed requests' time to first token without and with the batch
// running. Run it once, for the closing figures:
//
//	go test -run '^$' -bench BenchmarkBatch_10k -benchtime 1x ./internal/batch/
//
// SHAREAI_BENCH_LINES changes the number of lines.
func BenchmarkBatch_10k(b *testing.B) {
	lines := 10_000
	if s := os.Getenv("SHAREAI_BENCH_LINES"); s != "" {
		lines, _ = strconv.Atoi(s)
	}
	for range b.N {
		env := testenv.New(b, func(c *testenv.Config) {
			c.Sim.TTFT = 20 * time.Millisecond
			c.Sim.TokensPerSecond = 500
		})
		c := env.Client()
		idle := liveTTFT(b, c, 50)
		f, err := c.Files.New(context.Background(), openai.FileNewParams{
			File: openai.File(strings.NewReader(input("/v1/chat/completions", lines)), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		bt, err := c.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: f.ID,
			Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil {
			b.Fatal(err)
		}
		env.WaitFor("the batch running", func() bool { coord, _ := env.Running(); return coord > 0 })
		busy := liveTTFT(b, c, 50)
		for {
			got, err := c.Batches.Get(context.Background(), bt.ID)
			if err != nil {
				b.Fatal(err)
			}
			if got.Status == openai.BatchStatusCompleted {
				if got.RequestCounts.Completed != int64(lines) {
					b.Fatalf("%d of %d lines answered", got.RequestCounts.Completed, lines)
				}
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		b.ReportMetric(float64(lines)/took.Seconds(), "lines/s")
		b.ReportMetric(ms(pct(idle, 50)), "idle_ttft_p50_ms")
		b.ReportMetric(ms(pct(idle, 99)), "idle_ttft_p99_ms")
		b.ReportMetric(ms(pct(busy, 50)), "batch_ttft_p50_ms")
		b.ReportMetric(ms(pct(busy, 99)), "batch_ttft_p99_ms")
	}
}

// liveTTFT sends n streamed live chats one after another and returns their times to first
// token.
func liveTTFT(b *testing.B, c openai.Client, n int) []time.Duration {
	var out []time.Duration
	for i := range n {
		start := time.Now()
		s := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(4),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("live %d", i))}})
		first := time.Duration(0)
		for s.Next() {
			if first == 0 && len(s.Current().Choices) > 0 && s.Current().Choices[0].Delta.Content != "" {
				first = time.Since(start)
			}
		}
		if err := s.Err(); err != nil {
			b.Fatalf("live request: %v", err)
		}
		out = append(out, first)
	}
	return out
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
