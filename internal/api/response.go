package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

// Object names.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectTextCompletion      = "text_completion"
)

// Usage is a response's token counts, and what they cost the buyer in USD.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	Cost             USD `json:"cost"`
}

// USD is an amount of money shown in dollars as an exact JSON number: 0.000000368, never the
// float 3.68e-07.
type USD money.Nanos

// MarshalJSON writes the amount as a decimal number.
func (u USD) MarshalJSON() ([]byte, error) { return []byte(money.Nanos(u).String()), nil }

// UnmarshalJSON reads a decimal number (or a string holding one) exactly.
func (u *USD) UnmarshalJSON(b []byte) error {
	n, err := money.ParseUSD(strings.Trim(string(b), `"`))
	if err != nil {
		return fmt.Errorf("api: %s is not an amount of USD: %w", b, err)
	}
	*u = USD(n)
	return nil
}

// String writes the amount as a decimal, such as 0.05.
func (u USD) String() string { return money.Nanos(u).String() }

// ChatCompletion is a non-streamed chat answer.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
	// ServiceTier is the tier that served it: priority, default or flex.
	ServiceTier string `json:"service_tier,omitempty"`
}

// ChatChoice is one answer of a ChatCompletion.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      Message         `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

// Message is an assistant's message.
type Message struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// Refusal is always null: engines answer a refusal as content. OpenAI's schema requires
	// the member.
	Refusal          *string    `json:"refusal"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a whole tool call in a non-streamed answer.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function a tool call calls.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// TextCompletion is a non-streamed legacy completion, and also each chunk of a streamed one.
type TextCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []TextChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// TextChoice is one answer of a TextCompletion.
type TextChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// Model is one entry of GET /v1/models, with ShareAI's extension fields.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Nodes is how many nodes serve the model now.
	Nodes int `json:"nodes"`
	// ContextLength is the longest context a node offers for the model.
	ContextLength int `json:"context_length"`
	// Simulated is true when every node serving the model is a simulated GPU.
	Simulated bool `json:"simulated,omitempty"`
	// Pricing is the range of the nodes' prices at the default tier, USD per million tokens
	// (before the platform fee); ServiceTiers the range at each tier, by OpenAI's
	// service_tier names (priority, default, flex).
	Pricing      *PriceRange           `json:"pricing,omitempty"`
	ServiceTiers map[string]PriceRange `json:"service_tiers,omitempty"`
	// PricingUntil is when a node's ask may next change by its ask schedule (Unix seconds);
	// absent when none has one. The prices are those in effect now, surge included.
	PricingUntil int64 `json:"pricing_until,omitempty"`
	// Regions where nodes serve the model; "" for nodes that did not say.
	Regions []string `json:"regions,omitempty"`
	// LatencyMS and Throughput are medians over the nodes measured so far: time to first
	// token in milliseconds, output tokens per second.
	LatencyMS  *float64 `json:"latency_ms"`
	Throughput *float64 `json:"throughput"`
}

// PriceRange is the lowest and highest ask for a model, USD per million tokens.
type PriceRange struct {
	PromptMin     USD `json:"prompt_min"`
	PromptMax     USD `json:"prompt_max"`
	CompletionMin USD `json:"completion_min"`
	CompletionMax USD `json:"completion_max"`
}

// Endpoint is one node's offer of a model, in GET /v1/models/{id}/endpoints.
type Endpoint struct {
	NodeID        string   `json:"node_id"`
	Region        string   `json:"region"`
	Quantization  string   `json:"quantization,omitempty"`
	Prompt        USD      `json:"prompt_price"`     // USD per million input tokens
	Completion    USD      `json:"completion_price"` // USD per million output tokens
	ContextLength int      `json:"context_length"`
	MaxConcurrent int      `json:"max_concurrent"`
	Running       int      `json:"running"`
	UptimeSeconds int64    `json:"uptime_seconds"` // connected for
	LatencyMS     *float64 `json:"latency_ms"`     // moving average of time to first token
	Throughput    *float64 `json:"throughput"`     // moving average of output tokens per second
	Reliability   float64  `json:"reliability"`    // 0..1: what min_reliability compares (the reputation score, or before one the moving average of answers completed)
	Warm          bool     `json:"warm"`
	Simulated     bool     `json:"simulated,omitempty"`
	// ServiceTiers are the prices at each tier, by OpenAI's service_tier names; Prompt and
	// Completion are the default tier's.
	ServiceTiers map[string]TierPrice `json:"service_tiers,omitempty"`
	// The prices are those in effect now: AskWindow names the node's ask schedule window they
	// come from (absent: its flat ask), Surge the operator's surge multiplier in them (absent:
	// ×1), PriceUntil when the ask may next change by the schedule (Unix seconds; absent:
	// never).
	AskWindow  string   `json:"ask_window,omitempty"`
	Surge      *float64 `json:"surge,omitempty"`
	PriceUntil int64    `json:"price_until,omitempty"`
}

// TierPrice is an offer's price at one service tier, USD per million tokens.
type TierPrice struct {
	Prompt     USD `json:"prompt_price"`
	Completion USD `json:"completion_price"`
}

// EndpointList is the body of GET /v1/models/{id}/endpoints.
type EndpointList struct {
	Data struct {
		ID        string     `json:"id"`
		Endpoints []Endpoint `json:"endpoints"`
	} `json:"data"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

var null = json.RawMessage("null")

// Null is the JSON null, for fields that OpenAI sends as null.
func Null() json.RawMessage { return null }

// AppendString appends s to b as a JSON string. Like encoding/json it writes invalid UTF-8 as
// U+FFFD and escapes U+2028 and U+2029; unlike it, it leaves <, > and & alone.
func AppendString(b []byte, s string) []byte { return protocol.AppendString(b, s, false) }
