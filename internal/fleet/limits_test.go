package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// onePiece answers with one piece of text larger than a delta may carry, as a server that
// ignores "stream": true does.
type onePiece struct {
	*sim.Engine
	text string
}

func (e onePiece) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	if err := out.Delta(protocol.Delta{Text: e.text}); err != nil {
		return engine.Result{}, err
	}
	return engine.Result{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 3, CompletionTokens: 1}}, nil
}

// An honest agent keeps within the limits whatever its engine does: an answer longer than a
// delta may carry arrives whole, and the node stays connected.
func TestLimits_HonestLongAnswer(t *testing.T) {
	text := strings.Repeat("naïve 東京 ", 3*protocol.MaxDeltaBytes/15)
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return onePiece{sim.New(sim.Config{}), text}, nil
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := env.Client()
	for _, stream := range []bool{false, true} {
		params := openai.ChatCompletionNewParams{Model: "sim/llama-3.1-8b",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a long one")}}
		var got strings.Builder
		if stream {
			s := c.Chat.Completions.NewStreaming(ctx, params)
			for s.Next() {
				if ch := s.Current(); len(ch.Choices) > 0 {
					got.WriteString(ch.Choices[0].Delta.Content)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
		} else {
			res, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			got.WriteString(res.Choices[0].Message.Content)
		}
		if got.String() != text {
			t.Errorf("stream %v: an answer of %d bytes; want the engine's %d, whole", stream, got.Len(), len(text))
		}
	}
	if n := env.Agents[0].Registrations(); n != 1 {
		t.Errorf("the node registered %d times; want once, never refused", n)
	}
}
