package relay

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

// answerJSON is the answer as encoding/json writes the api types, without escaping HTML.
func answerJSON(t testing.TB, c *Collect, finishReason string, u protocol.Usage, cost money.Nanos) []byte {
	t.Helper()
	usage := api.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens,
		Cost: api.USD(cost)}
	var v any
	if c.chat {
		msg := api.Message{Role: "assistant", ReasoningContent: c.reasoning.String(), ToolCalls: c.calls}
		if text := c.text.String(); text != "" || len(c.calls) == 0 {
			msg.Content = &text
		}
		v = &api.ChatCompletion{
			ID: c.a.ID, Object: api.ObjectChatCompletion, Created: c.a.Created, Model: c.a.Model, ServiceTier: c.a.ServiceTier,
			Choices: []api.ChatChoice{{Message: msg, Logprobs: api.Null(), FinishReason: finishReason}},
			Usage:   usage,
		}
	} else {
		v = &api.TextCompletion{
			ID: c.a.ID, Object: api.ObjectTextCompletion, Created: c.a.Created, Model: c.a.Model,
			Choices: []api.TextChoice{{Text: c.text.String(), Logprobs: api.Null(), FinishReason: &finishReason}},
			Usage:   &usage,
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func collectOf(chat bool, a Answer, text, reasoning string, calls []api.ToolCall) *Collect {
	c := &Collect{a: a, chat: chat, calls: calls}
	c.text.WriteString(text)
	c.reasoning.WriteString(reasoning)
	return c
}

// The answer a Collect writes is the api types' JSON, byte for byte.
func TestCollect_AsEncodingJSON(t *testing.T) {
	a := Answer{ID: "chatcmpl-1", Model: "m<1>&", Created: 1795990461}
	tiered := a
	tiered.ServiceTier = "priority"
	calls := []api.ToolCall{{ID: "call_1", Type: "function", Function: api.FunctionCall{Name: "get", Arguments: `{"a":"<b>"}`}},
		{Type: "function", Function: api.FunctionCall{Name: "two"}}}
	u, cost := protocol.Usage{PromptTokens: 12, CompletionTokens: 34}, money.Nanos(1234567)
	for _, tt := range []struct {
		name            string
		chat            bool
		a               Answer
		text, reasoning string
		calls           []api.ToolCall
	}{
		{"chat", true, a, "Hello, <world> & \"friends\"\n\t\u2028 é 東京 \x01", "", nil},
		{"chat, empty", true, a, "", "", nil},
		{"chat, reasoning and tier", true, tiered, "answer", "I think", nil},
		{"chat, tool calls alone", true, a, "", "", calls},
		{"chat, text and tool calls", true, tiered, "text", "r", calls},
		{"chat, invalid UTF-8", true, a, "a\xffb\xe6\x88", "\xc0", nil},
		{"completion", false, a, " city of <lights>", "", nil},
		{"completion, empty, tier unused", false, tiered, "", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := collectOf(tt.chat, tt.a, tt.text, tt.reasoning, tt.calls)
			got := c.appendAnswer(nil, "stop", u, cost)
			if want := answerJSON(t, c, "stop", u, cost); !bytes.Equal(got, want) {
				t.Errorf("appendAnswer =\n%s\nencoding/json:\n%s", got, want)
			}
		})
	}
}

func FuzzCollect_AsEncodingJSON(f *testing.F) {
	f.Add(true, "hi", "", "stop", "call", "{}", int64(5))
	f.Add(false, "<&>", "x", "length", "", "", int64(-1))
	f.Fuzz(func(t *testing.T, chat bool, text, reasoning, finish, callName, args string, cost int64) {
		var calls []api.ToolCall
		if callName != "" {
			calls = []api.ToolCall{{ID: callName, Type: "function", Function: api.FunctionCall{Name: callName, Arguments: args}}}
		}
		c := collectOf(chat, Answer{ID: text, Model: finish, Created: cost, ServiceTier: reasoning}, text, reasoning, calls)
		u := protocol.Usage{PromptTokens: int(cost % 1000), CompletionTokens: len(text)}
		if got, want := c.appendAnswer(nil, finish, u, money.Nanos(cost)), answerJSON(t, c, finish, u, money.Nanos(cost)); !bytes.Equal(got, want) {
			t.Errorf("appendAnswer =\n%s\nencoding/json:\n%s", got, want)
		}
	})
}
