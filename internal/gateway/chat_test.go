package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

const model = "sim/llama-3.1-8b"

// want is the simulated engine's whole answer to a one-message chat.
func want(t *testing.T, prompt string, seed int64) string {
	t.Helper()
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": prompt}})
	return sim.New(sim.Config{}).Answer(&protocol.Request{Kind: protocol.KindChat, Model: model, Messages: msgs, Seed: &seed})
}

// wantN is the simulated engine's answer to a one-message chat, cut at maxTokens tokens (0: none).
func wantN(t *testing.T, prompt string, seed int64, maxTokens int) string {
	t.Helper()
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": prompt}})
	req := &protocol.Request{Kind: protocol.KindChat, Model: model, Messages: msgs, Seed: &seed, MaxTokens: maxTokens}
	var b strings.Builder
	if _, err := sim.New(sim.Config{}).Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error {
		b.WriteString(d.Text)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func chatParams(prompt string, seed int64) openai.ChatCompletionNewParams {
	return chatParamsFor(model, prompt, seed)
}

func chatParamsFor(model, prompt string, seed int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		Seed:     openai.Int(seed),
	}
}

func TestChat_NonStreaming(t *testing.T) {
	env := testenv.New(t)
	client := env.Client()
	var resp *http.Response
	got, err := client.Chat.Completions.New(context.Background(), chatParams("Tell me about GPUs.", 7), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if got.Object != "chat.completion" || got.Model != model || !strings.HasPrefix(got.ID, "chatcmpl-") {
		t.Errorf("object, model, id = %q, %q, %q; want chat.completion, %q, chatcmpl-…", got.Object, got.Model, got.ID, model)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("got %d choices, want 1", len(got.Choices))
	}
	c := got.Choices[0]
	if w := want(t, "Tell me about GPUs.", 7); c.Message.Content != w {
		t.Errorf("content = %q\nwant %q", c.Message.Content, w)
	}
	if c.Message.Role != "assistant" || c.FinishReason != "stop" {
		t.Errorf("role, finish_reason = %q, %q; want assistant, stop", c.Message.Role, c.FinishReason)
	}
	u := got.Usage
	if u.PromptTokens == 0 || u.CompletionTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v; want counted tokens adding up", u)
	}
	if id := resp.Header.Get(gateway.HeaderRequestID); !strings.HasPrefix(id, "req_") {
		t.Errorf("x-request-id = %q, want req_…", id)
	}
	node := resp.Header.Get(gateway.HeaderNode)
	if node != env.Agents[0].NodeID() && node != env.Agents[1].NodeID() {
		t.Errorf("x-shareai-node = %q, want one of the network's nodes", node)
	}
}

func TestChat_StreamingEqualsNonStreaming(t *testing.T) {
	env := testenv.New(t)
	client := env.Client()
	params := chatParams("Write a haiku about idle GPUs.", 42)
	whole, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var (
		text   strings.Builder
		ids    = map[string]bool{}
		chunks int
		finish string
		first  = true
	)
	for stream.Next() {
		ch := stream.Current()
		chunks++
		ids[ch.ID] = true
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("object = %q, want chat.completion.chunk", ch.Object)
		}
		if ch.Usage.TotalTokens != 0 {
			t.Errorf("usage in a chunk without include_usage: %+v", ch.Usage)
		}
		if len(ch.Choices) == 0 {
			continue
		}
		if first && ch.Choices[0].Delta.Role != "assistant" {
			t.Errorf("first chunk's role = %q, want assistant", ch.Choices[0].Delta.Role)
		}
		first = false
		text.WriteString(ch.Choices[0].Delta.Content)
		if fr := ch.Choices[0].FinishReason; fr != "" {
			finish = fr
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text.String() != whole.Choices[0].Message.Content {
		t.Errorf("streamed text = %q\nnon-streamed = %q", text.String(), whole.Choices[0].Message.Content)
	}
	if len(ids) != 1 || chunks < 3 || finish != "stop" {
		t.Errorf("ids %v, %d chunks, finish %q; want one id, several chunks, stop", ids, chunks, finish)
	}
}

func TestChat_StreamUsageChunk(t *testing.T) {
	env := testenv.New(t)
	params := chatParams("Count to ten.", 3)
	params.MaxTokens = openai.Int(9)
	client := env.Client()
	whole, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var last openai.ChatCompletionChunk
	var text strings.Builder
	for stream.Next() {
		last = stream.Current()
		if len(last.Choices) > 0 {
			text.WriteString(last.Choices[0].Delta.Content)
			if last.Usage.TotalTokens != 0 {
				t.Errorf("usage in a content chunk: %+v", last.Usage)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(last.Choices) != 0 {
		t.Errorf("last chunk has %d choices, want the usage chunk with none", len(last.Choices))
	}
	if text.String() != whole.Choices[0].Message.Content {
		t.Errorf("streamed %q, non-streamed %q", text.String(), whole.Choices[0].Message.Content)
	}
	if u := last.Usage; u.CompletionTokens != 9 || u.PromptTokens != whole.Usage.PromptTokens || u.TotalTokens != u.PromptTokens+9 {
		t.Errorf("usage %+v; want 9 completion tokens (max_tokens) and the non-streamed prompt tokens %d", u, whole.Usage.PromptTokens)
	}
}

func TestChat_Passthrough(t *testing.T) {
	env := testenv.New(t)
	client := env.Client()
	ctx := context.Background()

	t.Run("content parts equal string content", func(t *testing.T) {
		parts := openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(5), Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("Hello there")}),
		}}
		plain := openai.ChatCompletionNewParams{Model: model, Seed: openai.Int(5), Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."), openai.UserMessage("Hello there"),
		}}
		a, err := client.Chat.Completions.New(ctx, parts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := client.Chat.Completions.New(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		if a.Choices[0].Message.Content != b.Choices[0].Message.Content {
			t.Errorf("content parts answer %q, string answer %q", a.Choices[0].Message.Content, b.Choices[0].Message.Content)
		}
	})

	t.Run("tool call", func(t *testing.T) {
		params := chatParams("What is the weather in Zürich?", 1)
		params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"},
		})}
		params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt("required")}
		got, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		c := got.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
			t.Fatalf("finish %q with %d tool calls; want tool_calls with 1", c.FinishReason, len(c.Message.ToolCalls))
		}
		call := c.Message.ToolCalls[0]
		if call.Function.Name != "get_weather" || !json.Valid([]byte(call.Function.Arguments)) || call.ID == "" {
			t.Errorf("tool call = %+v; want get_weather with JSON arguments and an id", call)
		}

		// Streamed, the same call arrives in pieces the SDK's accumulator puts together.
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		sc := acc.Choices[0].Message.ToolCalls
		if len(sc) != 1 || sc[0].Function.Arguments != call.Function.Arguments || sc[0].ID != call.ID {
			t.Errorf("streamed tool calls %+v; want %+v", sc, call)
		}
	})

	t.Run("stop and response_format", func(t *testing.T) {
		params := chatParams("Reply in JSON.", 9)
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &openai.ResponseFormatJSONObjectParam{}}
		got, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if content := got.Choices[0].Message.Content; !json.Valid([]byte(content)) {
			t.Errorf("json_object answer is not JSON: %q", content)
		}
		full := want(t, "Tell me about GPUs.", 7)
		stop := full[10:14]
		params = chatParams("Tell me about GPUs.", 7)
		params.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{stop}}
		got, err = client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if w := full[:strings.Index(full, stop)]; got.Choices[0].Message.Content != w || got.Choices[0].FinishReason != "stop" {
			t.Errorf("with stop %q: %q (%s); want %q", stop, got.Choices[0].Message.Content, got.Choices[0].FinishReason, w)
		}
	})
}

func TestCompletions(t *testing.T) {
	env := testenv.New(t)
	client := env.Client()
	ctx := context.Background()
	params := openai.CompletionNewParams{
		Model:     model,
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("The capital of France is")},
		MaxTokens: openai.Int(20),
		Seed:      openai.Int(11),
	}
	whole, err := client.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	if whole.Object != "text_completion" || whole.Choices[0].Text == "" || whole.Usage.CompletionTokens == 0 {
		t.Errorf("completion = %+v; want a text_completion with text and usage", whole)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var usage openai.CompletionUsage
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Text)
		}
		if c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text.String() != whole.Choices[0].Text {
		t.Errorf("streamed %q, non-streamed %q", text.String(), whole.Choices[0].Text)
	}
	if usage.CompletionTokens != whole.Usage.CompletionTokens {
		t.Errorf("streamed usage %+v, non-streamed %+v", usage, whole.Usage)
	}
}

func TestModels(t *testing.T) {
	env := testenv.New(t, testenv.Providers(3))
	ctx := context.Background()
	client := env.Client()
	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 {
		t.Fatalf("got %d models, want the sim's 2", len(page.Data))
	}
	var ext struct {
		Nodes         int  `json:"nodes"`
		ContextLength int  `json:"context_length"`
		Simulated     bool `json:"simulated"`
	}
	if err := json.Unmarshal([]byte(page.Data[0].RawJSON()), &ext); err != nil {
		t.Fatal(err)
	}
	if page.Data[0].ID != model || ext.Nodes != 3 || ext.ContextLength != 8192 || !ext.Simulated {
		t.Errorf("first model %s %+v; want %s on 3 simulated nodes with context 8192", page.Data[0].ID, ext, model)
	}
	m, err := client.Models.Get(ctx, model)
	if err != nil || m.ID != model {
		t.Errorf("get %s = %v, %v", model, m, err)
	}
	_, err = client.Models.Get(ctx, "no/such-model")
	assertAPIError(t, err, http.StatusNotFound, "model_not_found")
}

// Each of 100 concurrent streams over 2 nodes gets its own, correct answer.
func TestChat_100ConcurrentStreams(t *testing.T) {
	env := testenv.New(t, func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 2000} })
	client := env.Client()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		nodes = map[string]int{}
	)
	for i := range 100 {
		wg.Go(func() {
			prompt := fmt.Sprintf("Question number %d?", i)
			var resp *http.Response
			stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams(prompt, int64(i)), option.WithResponseInto(&resp))
			var text strings.Builder
			for stream.Next() {
				if ch := stream.Current(); len(ch.Choices) > 0 {
					text.WriteString(ch.Choices[0].Delta.Content)
				}
			}
			if err := stream.Err(); err != nil {
				t.Errorf("stream %d: %v", i, err)
				return
			}
			if w := want(t, prompt, int64(i)); text.String() != w {
				t.Errorf("stream %d: got %q\nwant %q", i, text.String(), w)
			}
			mu.Lock()
			nodes[resp.Header.Get(gateway.HeaderNode)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(nodes) != 2 {
		t.Errorf("streams per node %v; want both nodes used", nodes)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// mustJSON returns the messages of params as the gateway passes them on.
func mustJSON(t *testing.T, params openai.ChatCompletionNewParams) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	return body.Messages
}
