package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// counter is an engine that sends n numbered pieces, each in its own frame.
type counter struct{ n int }

func (counter) Name() string { return "counter" }
func (counter) Models(context.Context) ([]engine.Model, error) {
	return []engine.Model{{Name: "counter", ContextLength: 1024}}, nil
}
func (c counter) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	for i := range c.n {
		if err := out.Delta(protocol.Delta{Text: fmt.Sprintf("%d ", i)}); err != nil {
			return engine.Result{}, err
		}
		if err := out.Flush(); err != nil {
			return engine.Result{}, err
		}
	}
	return engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 1, CompletionTokens: c.n}}, nil
}

// An answer of many more frames than the credit window arrives whole and in order: the
// coordinator grants credit as the buyer reads.
func TestStream_LongerThanCreditWindow(t *testing.T) {
	n := 4*protocol.Window + 7
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.NewEngine = func(int) (engine.Engine, error) { return counter{n}, nil } })
	client := env.Client()
	// Without credit the agent would stop after one window: the deadline turns that hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, chatParamsFor("counter", "count", 1))
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "%d ", i)
	}
	if text.String() != want.String() {
		t.Errorf("got %d bytes, want %d: pieces lost, repeated or out of order", text.Len(), want.Len())
	}
}
