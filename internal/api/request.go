package api

import (
	"encoding/json"
	"slices"

	"github.com/shareai/shareai/internal/protocol"
)

// ChatRequest is the body of POST /v1/chat/completions: every field of OpenAI's
// CreateChatCompletionRequest, and ShareAI's routing extensions (Routing). Decode refuses any
// other member. Fields ShareAI passes to engines without looking inside stay raw, so they
// reach the engine intact.
type ChatRequest struct {
	Model    string          `json:"model"`
	Messages json.RawMessage `json:"messages"`
	Sampling
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`

	// No engine receives what follows. What asks for an answer no node gives (audio, a web
	// search, moderation, the deprecated functions) is refused when set; the hints, whose
	// answer is as valid without them, are checked and ignored, as OpenAI ignores them for
	// the models that do not use them.
	Functions        json.RawMessage `json:"functions"`
	FunctionCall     json.RawMessage `json:"function_call"`
	Audio            json.RawMessage `json:"audio"`
	Modalities       []string        `json:"modalities"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
	Moderation       json.RawMessage `json:"moderation"`
	Hints
	Routing
}

// Sampling holds the fields that chat and legacy completions share.
type Sampling struct {
	Stream        bool            `json:"stream"`
	StreamOptions *StreamOptions  `json:"stream_options"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	N             *int            `json:"n"`
	// The penalties reach the engine; logit_bias does not, so only no bias is taken: it names
	// token ids of OpenAI's tokenizers, which the open models on this network do not share.
	FrequencyPenalty *float64       `json:"frequency_penalty"`
	PresencePenalty  *float64       `json:"presence_penalty"`
	LogitBias        map[string]int `json:"logit_bias"`
	// User identifies the buyer's end user: the session key for affinity when the request
	// has no X-Session-Id.
	User string `json:"user"`
}

// Hints are OpenAI's chat fields that leave a valid answer valid when ignored: engines do not
// receive them. Their types and documented values are checked all the same.
type Hints struct {
	ParallelToolCalls    *bool             `json:"parallel_tool_calls"`
	ReasoningEffort      *string           `json:"reasoning_effort"`
	Verbosity            *string           `json:"verbosity"`
	Prediction           json.RawMessage   `json:"prediction"`
	Store                *bool             `json:"store"`
	Metadata             map[string]string `json:"metadata"`
	PromptCacheKey       *string           `json:"prompt_cache_key"`
	PromptCacheRetention *string           `json:"prompt_cache_retention"`
	PromptCacheOptions   json.RawMessage   `json:"prompt_cache_options"`
	SafetyIdentifier     *string           `json:"safety_identifier"`
}

// Routing is how a buyer steers a request, in OpenRouter's names: routing preferences in a
// provider object, and fallback models. The gateway reads them; engines never see them.
type Routing struct {
	Provider json.RawMessage `json:"provider"`
	Models   []string        `json:"models"`
	// Route is OpenRouter's older way to ask for the fallback models: "fallback", which is
	// what models does anyway.
	Route *string `json:"route"`
	// ServiceTier is OpenAI's service_tier: "priority" (gold), "default" or "auto" (silver),
	// "flex" (bronze); "" takes the key's default (see package tier).
	ServiceTier string `json:"service_tier"`
	// Split is the model roulette (split.go): shares of the requests sent to other models, the
	// request's model the default arm. The core draws the arm.
	Split json.RawMessage `json:"split"`
}

// CompletionRequest is the body of POST /v1/completions (legacy text completions): every
// field of OpenAI's CreateCompletionRequest, and the routing extensions.
type CompletionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	Sampling
	Echo     bool    `json:"echo"`
	Logprobs *int    `json:"logprobs"`
	Suffix   *string `json:"suffix"`
	BestOf   *int    `json:"best_of"`
	Routing
}

// StreamOptions are the options of a streamed answer.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
	// IncludeObfuscation is taken and ignored: chunks carry no obfuscation padding.
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

// Job validates the request and turns it into the work a node does.
func (c *ChatRequest) Job() (*protocol.Request, *Error) {
	if c.Model == "" {
		return nil, missing("model")
	}
	if err := validateMessages(c.Messages); err != nil {
		return nil, err
	}
	maxTokens, err := pickMaxTokens(c.MaxTokens, c.MaxCompletionTokens)
	if err != nil {
		return nil, err
	}
	stop, err := c.Sampling.validate()
	if err != nil {
		return nil, err
	}
	if err := c.validateChat(); err != nil {
		return nil, err
	}
	if err := c.Routing.validate(); err != nil {
		return nil, err
	}
	req := c.Sampling.request(protocol.KindChat, c.Model, maxTokens, stop)
	req.Messages = c.Messages
	req.Tools, req.ToolChoice, req.ResponseFormat = setOrNil(c.Tools), setOrNil(c.ToolChoice), setOrNil(c.ResponseFormat)
	return req, nil
}

// validateChat checks the fields of a chat that a legacy completion does not have.
func (c *ChatRequest) validateChat() *Error {
	for _, f := range []rawField{
		{"tools", c.Tools, "["}, {"tool_choice", c.ToolChoice, `"{`}, {"response_format", c.ResponseFormat, "{"},
		{"functions", c.Functions, "["}, {"function_call", c.FunctionCall, `"{`}, {"audio", c.Audio, "{"},
		{"web_search_options", c.WebSearchOptions, "{"}, {"moderation", c.Moderation, "{"},
		{"prediction", c.Prediction, "{"}, {"prompt_cache_options", c.PromptCacheOptions, "{"},
	} {
		if err := f.check(); err != nil {
			return err
		}
	}
	if err := validateResponseFormat(c.ResponseFormat); err != nil {
		return err
	}
	if err := intIn("top_logprobs", c.TopLogprobs, 0, 20); err != nil {
		return err
	}
	for i, m := range c.Modalities {
		if err := oneOf(indexed("modalities", i), m, "text", "audio"); err != nil {
			return err
		}
	}
	switch {
	case c.Logprobs != nil && *c.Logprobs:
		return Unsupported("logprobs", "'logprobs' is not supported on this network.")
	case c.TopLogprobs != nil && *c.TopLogprobs > 0:
		return Unsupported("top_logprobs", "'top_logprobs' is not supported on this network: it needs 'logprobs', which is not.")
	case isSet(c.Functions), isSet(c.FunctionCall):
		param := "functions"
		if isSet(c.FunctionCall) {
			param = "function_call"
		}
		return Unsupported(param, "'%s' is not supported on this network; use 'tools' and 'tool_choice'.", param)
	case isSet(c.Audio) || slices.Contains(c.Modalities, "audio"):
		param := "audio"
		if !isSet(c.Audio) {
			param = "modalities"
		}
		return Unsupported(param, "Audio output is not supported on this network.")
	case isSet(c.WebSearchOptions):
		return Unsupported("web_search_options", "'web_search_options' is not supported on this network: nodes do not search the web.")
	case isSet(c.Moderation):
		return Unsupported("moderation", "'moderation' is not supported on this network.")
	}
	return c.Hints.validate()
}

// validate checks the hints' documented values.
func (h *Hints) validate() *Error {
	for _, f := range []struct {
		param string
		v     *string
		allow []string
	}{
		{"reasoning_effort", h.ReasoningEffort, []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}},
		{"verbosity", h.Verbosity, []string{"low", "medium", "high"}},
		{"prompt_cache_retention", h.PromptCacheRetention, []string{"in_memory", "24h"}},
	} {
		if f.v == nil {
			continue
		}
		if err := oneOf(f.param, *f.v, f.allow...); err != nil {
			return err
		}
	}
	return nil
}

// serviceTiers are the values of service_tier: OpenAI's names of the tiers this network has
// (package tier maps them to gold, silver and bronze).
var serviceTiers = []string{"auto", "default", "flex", "priority"}

// validate checks the routing fields' shapes; the gateway reads what they mean.
func (rt *Routing) validate() *Error {
	if err := (rawField{"provider", rt.Provider, "{"}).check(); err != nil {
		return err
	}
	if rt.Route != nil {
		if err := oneOf("route", *rt.Route, "fallback"); err != nil {
			return err
		}
	}
	if _, err := ParseSplit(rt.Split); err != nil {
		return err
	}
	if rt.ServiceTier != "" {
		return oneOf("service_tier", rt.ServiceTier, serviceTiers...)
	}
	return nil
}

// Job validates the request and turns it into the work a node does.
func (c *CompletionRequest) Job() (*protocol.Request, *Error) {
	if c.Model == "" {
		return nil, missing("model")
	}
	prompt, err := parsePrompt(c.Prompt)
	if err != nil {
		return nil, err
	}
	maxTokens, err := pickMaxTokens(c.MaxTokens, nil)
	if err != nil {
		return nil, err
	}
	if maxTokens == 0 {
		// OpenAI's legacy default.
		maxTokens = 16
	}
	stop, err := c.Sampling.validate()
	if err != nil {
		return nil, err
	}
	if err := intIn("logprobs", c.Logprobs, 0, 5); err != nil {
		return nil, err
	}
	if err := intIn("best_of", c.BestOf, 0, 20); err != nil {
		return nil, err
	}
	switch {
	case c.Echo:
		return nil, Unsupported("echo", "'echo' is not supported on this network.")
	case c.Logprobs != nil:
		return nil, Unsupported("logprobs", "'logprobs' is not supported on this network.")
	case c.Suffix != nil && *c.Suffix != "":
		return nil, Unsupported("suffix", "'suffix' is not supported on this network.")
	case c.BestOf != nil && *c.BestOf > 1:
		return nil, Unsupported("best_of", "Invalid 'best_of': only best_of=1 is supported on this network, got %d.", *c.BestOf)
	}
	if err := c.Routing.validate(); err != nil {
		return nil, err
	}
	req := c.Sampling.request(protocol.KindCompletion, c.Model, maxTokens, stop)
	req.Prompt = prompt
	return req, nil
}

// request is the engine's request of a kind with the sampling fields both kinds share.
func (s *Sampling) request(kind, model string, maxTokens int, stop []string) *protocol.Request {
	return &protocol.Request{
		Kind: kind, Model: model, MaxTokens: maxTokens, Stop: stop,
		Temperature: s.Temperature, TopP: s.TopP, Seed: s.Seed,
		FrequencyPenalty: nonZero(s.FrequencyPenalty), PresencePenalty: nonZero(s.PresencePenalty),
	}
}

// nonZero is f, or nil for 0, the neutral value engines need not be sent.
func nonZero(f *float64) *float64 {
	if f == nil || *f == 0 {
		return nil
	}
	return f
}

// validate checks the shared sampling fields by their documented ranges, and returns the stop
// strings.
func (s *Sampling) validate() ([]string, *Error) {
	for _, f := range []struct {
		param  string
		v      *float64
		lo, hi float64
	}{
		{"temperature", s.Temperature, 0, 2},
		{"top_p", s.TopP, 0, 1},
		{"frequency_penalty", s.FrequencyPenalty, -2, 2},
		{"presence_penalty", s.PresencePenalty, -2, 2},
	} {
		if err := numberIn(f.param, f.v, f.lo, f.hi); err != nil {
			return nil, err
		}
	}
	if err := intIn("n", s.N, 1, 128); err != nil {
		return nil, err
	}
	if err := validateLogitBias(s.LogitBias); err != nil {
		return nil, err
	}
	switch {
	case s.N != nil && *s.N != 1:
		return nil, Unsupported("n", "Invalid 'n': only n=1 is supported on this network, got %d.", *s.N)
	case len(s.LogitBias) > 0:
		return nil, Unsupported("logit_bias", "'logit_bias' is not supported on this network: its token ids are those of OpenAI's tokenizers.")
	}
	return parseStop(s.Stop)
}
