package relay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

// Collect gathers a whole answer and writes it as one JSON object: a chat.completion or a
// text_completion.
type Collect struct {
	w         http.ResponseWriter
	a         Answer
	chat      bool
	text      strings.Builder
	reasoning strings.Builder
	calls     []api.ToolCall
	done      bool // End has written the answer
}

// NewChatCollect returns a sink for a non-streamed chat answer.
func NewChatCollect(w http.ResponseWriter, a Answer) *Collect {
	return &Collect{w: w, a: a, chat: true}
}

// NewCompletionCollect returns a sink for a non-streamed legacy completion.
func NewCompletionCollect(w http.ResponseWriter, a Answer) *Collect { return &Collect{w: w, a: a} }

// toolCallDelta is one element of a streamed tool_calls array.
type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Delta adds a piece of the answer.
func (c *Collect) Delta(d *protocol.Delta) error {
	c.text.WriteString(d.Text)
	c.reasoning.WriteString(d.Reasoning)
	if len(d.ToolCalls) == 0 {
		return nil
	}
	var tcs []toolCallDelta
	if err := json.Unmarshal(d.ToolCalls, &tcs); err != nil {
		return fmt.Errorf("node sent malformed tool calls: %w", err)
	}
	for _, tc := range tcs {
		if tc.Index < 0 || tc.Index > 128 {
			return fmt.Errorf("node sent tool call index %d", tc.Index)
		}
		for len(c.calls) <= tc.Index {
			c.calls = append(c.calls, api.ToolCall{Type: "function"})
		}
		call := &c.calls[tc.Index]
		if tc.ID != "" {
			call.ID = tc.ID
		}
		if tc.Type != "" {
			call.Type = tc.Type
		}
		call.Function.Name += tc.Function.Name
		call.Function.Arguments += tc.Function.Arguments
	}
	return nil
}

// Flush sends the answer once it is written whole, so the buyer has it before billing ends.
func (c *Collect) Flush() error {
	if !c.done {
		return nil
	}
	return http.NewResponseController(c.w).Flush()
}

// End writes the answer, its cost also in the X-Shareai-Cost header.
func (c *Collect) End(finishReason string, u protocol.Usage, cost money.Nanos) error {
	b := c.appendAnswer(make([]byte, 0, 384+c.text.Len()+c.reasoning.Len()), finishReason, u, cost)
	c.done = true
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set(HeaderCost, cost.String())
	_, err := c.w.Write(b)
	return err
}

// appendAnswer appends the answer to b as encoding/json writes an api.ChatCompletion or an
// api.TextCompletion, without escaping HTML, as the streams do (TestCollect_AsEncodingJSON).
func (c *Collect) appendAnswer(b []byte, finishReason string, u protocol.Usage, cost money.Nanos) []byte {
	object := api.ObjectTextCompletion
	if c.chat {
		object = api.ObjectChatCompletion
	}
	b = api.AppendString(append(b, `{"id":`...), c.a.ID)
	b = api.AppendString(append(b, `,"object":`...), object)
	b = strconv.AppendInt(append(b, `,"created":`...), c.a.Created, 10)
	b = api.AppendString(append(b, `,"model":`...), c.a.Model)
	if !c.chat {
		b = api.AppendString(append(b, `,"choices":[{"text":`...), c.text.String())
		b = api.AppendString(append(b, `,"index":0,"logprobs":null,"finish_reason":`...), finishReason)
		return append(appendUsage(append(b, `}],"usage":`...), u, cost), '}')
	}
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if text := c.text.String(); text != "" || len(c.calls) == 0 {
		b = api.AppendString(b, text)
	} else {
		b = append(b, "null"...) // tool calls alone
	}
	b = append(b, `,"refusal":null`...)
	if r := c.reasoning.String(); r != "" {
		b = api.AppendString(append(b, `,"reasoning_content":`...), r)
	}
	if len(c.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, tc := range c.calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = api.AppendString(append(b, `{"id":`...), tc.ID)
			b = api.AppendString(append(b, `,"type":`...), tc.Type)
			b = api.AppendString(append(b, `,"function":{"name":`...), tc.Function.Name)
			b = api.AppendString(append(b, `,"arguments":`...), tc.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = api.AppendString(append(b, `},"logprobs":null,"finish_reason":`...), finishReason)
	b = appendUsage(append(b, `}],"usage":`...), u, cost)
	if c.a.ServiceTier != "" {
		b = api.AppendString(append(b, `,"service_tier":`...), c.a.ServiceTier)
	}
	return append(b, '}')
}

// Fail answers with an error: nothing has been written yet.
func (c *Collect) Fail(cause error) error {
	failure(cause, "The node failed while answering: ").Write(c.w)
	return nil
}

// failure is the buyer's error for an answer cut short by cause: cause itself when it is the
// buyer's error already, else a 502 whose message is prefix and cause's.
func failure(cause error, prefix string) *api.Error {
	if ae, ok := cause.(*api.Error); ok { // itself, not one it wraps: the wrapper says more
		return ae
	}
	return &api.Error{Status: http.StatusBadGateway, Type: api.TypeServer, Code: api.CodeProviderError, Message: prefix + cause.Error()}
}
