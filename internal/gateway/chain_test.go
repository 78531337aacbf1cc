package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/openaicompat"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/testenv"
)

// The openai engine against a real OpenAI-compatible server: the gateway of a second network
// serves as the first network's upstream. Models are discovered with GET /v1/models, and
// answers pass through both networks unchanged.
func TestOpenAIEngine_AgainstAnotherNetwork(t *testing.T) {
	upstream := testenv.New(t, testenv.Providers(1))
	front := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return openaicompat.New(openaicompat.Config{BaseURL: upstream.BaseURL(), APIKey: upstream.APIKey})
		}
	})
	ctx := context.Background()
	client := front.Client()
	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 2 || models.Data[0].ID != model {
		t.Fatalf("front network serves %v; want the upstream's two sim models", models.Data)
	}

	got, err := client.Chat.Completions.New(ctx, chatParams("Through two networks.", 4))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if w := want(t, "Through two networks.", 4); got.Choices[0].Message.Content != w {
		t.Errorf("content = %q\nwant %q", got.Choices[0].Message.Content, w)
	}
	if got.Usage.PromptTokens == 0 || got.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v; want the upstream's counts", got.Usage)
	}

	params := chatParams("Through two networks.", 4)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var usage openai.CompletionUsage
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
		if c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text.String() != got.Choices[0].Message.Content || usage.TotalTokens != got.Usage.TotalTokens {
		t.Errorf("streamed %q %+v; non-streamed %q %+v", text.String(), usage, got.Choices[0].Message.Content, got.Usage)
	}

	// An error the upstream engine gives about the request reaches the buyer as a 400, through
	// both networks: here a prompt longer than the model's context.
	_, err = client.Chat.Completions.New(ctx, chatParams(strings.Repeat("word ", 9000), 1))
	e := assertAPIError(t, err, 400, "rejected_by_engine")
	if !strings.Contains(e.Message, "context") {
		t.Errorf("message %q does not say the prompt exceeds the context", e.Message)
	}
}

// The openai engine continues an answer on a real OpenAI-compatible server: the front network's
// nodes run on the gateway of a second network, which continues a trailing assistant message.
// A front node drops mid-stream; the other front node continues, and the answer is whole.
func TestOpenAIEngine_ContinuesAfterFailover(t *testing.T) {
	upstream := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 100} })
	front := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return openaicompat.New(openaicompat.Config{BaseURL: upstream.BaseURL(), APIKey: upstream.APIKey, Continue: openaicompat.ContinuePrefill})
		}
	})
	const prompt = "A long answer through two networks."
	resp := streamReq(t, front, prompt)
	defer resp.Body.Close()
	first := resp.Header.Get("X-Shareai-Node")
	a := readStream(t, resp, func(n int) {
		if n == 4 {
			front.StopAgent(agentIndex(front, first))
		}
	})
	if w := want(t, prompt, 5); a.text.String() != w || !a.done || len(a.ids) != 1 {
		t.Errorf("answer %q (done %v, ids %v)\nwant %q", a.text.String(), a.done, a.ids, w)
	}
}
