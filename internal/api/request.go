package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/shareai/shareai/internal/protocol"
)

// ChatRequest is the body of POST /v1/chat/completions. Fields ShareAI passes to engines without
// looking inside stay raw, so they reach the engine intact.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	User                string          `json:"user"`
	N                   *int            `json:"n"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	Logprobs            *bool           `json:"logprobs"`
	Routing
}

// Routing is how a buyer steers a request, in OpenRouter's names: routing preferences in a
// provider object, and fallback models. The gateway reads them; engines never see them.
type Routing struct {
	Provider json.RawMessage `json:"provider"`
	Models   []string        `json:"models"`
	// ServiceTier is OpenAI's service_tier: "priority" (gold), "default" or "auto" (silver),
	// "flex" (bronze); "" takes the key's default (see package tier).
	ServiceTier string `json:"service_tier"`
}

// CompletionRequest is the body of POST /v1/completions (legacy text completions).
type CompletionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *StreamOptions  `json:"stream_options"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	User          string          `json:"user"`
	N             *int            `json:"n"`
	Echo          bool            `json:"echo"`
	Logprobs      *int            `json:"logprobs"`
	Suffix        *string         `json:"suffix"`
	Routing
}

// StreamOptions are the options of a streamed answer.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Decode reads a JSON request body into v. It answers 413 for a body over the limit set with
// http.MaxBytesReader and 400 for anything that is not the expected JSON, naming the parameter
// when it can.
func Decode(r io.Reader, v any) *Error {
	body, err := io.ReadAll(r)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: CodeRequestTooLarge,
				Message: fmt.Sprintf("The request body is larger than the limit of %d bytes.", mbe.Limit)}
		}
		return BadRequest("", CodeInvalidJSON, "Could not read the request body: %v.", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("", CodeInvalidJSON, "The request body is empty; send a JSON object.")
	}
	if err := json.Unmarshal(body, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return BadRequest(te.Field, CodeInvalidValue, "Invalid type for '%s': expected %s, got %s.", te.Field, jsonKind(te.Type.String()), te.Value)
		}
		return BadRequest("", CodeInvalidJSON, "We could not parse the JSON body of your request (%v). Send valid JSON, with the Content-Type application/json.", err)
	}
	return nil
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "*"):
		return jsonKind(goType[1:])
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"), strings.HasPrefix(goType, "json.RawMessage"):
		return "an array"
	}
	return "an object"
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// Job validates the request and turns it into the work a node does.
func (c *ChatRequest) Job() (*protocol.Request, *Error) {
	if c.Model == "" {
		return nil, BadRequest("model", CodeInvalidValue, "Missing required parameter: 'model'.")
	}
	if err := validateMessages(c.Messages); err != nil {
		return nil, err
	}
	maxTokens, err := pickMaxTokens(c.MaxTokens, c.MaxCompletionTokens)
	if err != nil {
		return nil, err
	}
	if err := validateSampling(c.Temperature, c.TopP, c.N); err != nil {
		return nil, err
	}
	if c.Logprobs != nil && *c.Logprobs {
		return nil, Unsupported("logprobs", "'logprobs' is not supported on this network.")
	}
	stop, err := parseStop(c.Stop)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		want byte
	}{{"tools", c.Tools, '['}, {"response_format", c.ResponseFormat, '{'}} {
		if isSet(f.raw) && f.raw[0] != f.want {
			return nil, BadRequest(f.name, CodeInvalidValue, "Invalid type for '%s'.", f.name)
		}
	}
	return &protocol.Request{
		Kind:           protocol.KindChat,
		Model:          c.Model,
		Messages:       c.Messages,
		MaxTokens:      maxTokens,
		Temperature:    c.Temperature,
		TopP:           c.TopP,
		Seed:           c.Seed,
		Stop:           stop,
		Tools:          setOrNil(c.Tools),
		ToolChoice:     setOrNil(c.ToolChoice),
		ResponseFormat: setOrNil(c.ResponseFormat),
	}, nil
}

// Job validates the request and turns it into the work a node does.
func (c *CompletionRequest) Job() (*protocol.Request, *Error) {
	if c.Model == "" {
		return nil, BadRequest("model", CodeInvalidValue, "Missing required parameter: 'model'.")
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
	if err := validateSampling(c.Temperature, c.TopP, c.N); err != nil {
		return nil, err
	}
	switch {
	case c.Echo:
		return nil, Unsupported("echo", "'echo' is not supported on this network.")
	case c.Logprobs != nil:
		return nil, Unsupported("logprobs", "'logprobs' is not supported on this network.")
	case c.Suffix != nil && *c.Suffix != "":
		return nil, Unsupported("suffix", "'suffix' is not supported on this network.")
	}
	stop, err := parseStop(c.Stop)
	if err != nil {
		return nil, err
	}
	return &protocol.Request{
		Kind:        protocol.KindCompletion,
		Model:       c.Model,
		Prompt:      prompt,
		MaxTokens:   maxTokens,
		Temperature: c.Temperature,
		TopP:        c.TopP,
		Seed:        c.Seed,
		Stop:        stop,
	}, nil
}

func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

func setOrNil(raw json.RawMessage) json.RawMessage {
	if isSet(raw) {
		return raw
	}
	return nil
}

func validateMessages(raw json.RawMessage) *Error {
	if !isSet(raw) {
		return BadRequest("messages", CodeInvalidValue, "Missing required parameter: 'messages'.")
	}
	var msgs []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return BadRequest("messages", CodeInvalidValue, "Invalid 'messages': expected an array of message objects.")
	}
	if len(msgs) == 0 {
		return BadRequest("messages", CodeInvalidValue, "Invalid 'messages': empty array. Expected an array with at least one message.")
	}
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		if !chatRoles[m.Role] {
			if m.Role == "" {
				return BadRequest(param+".role", CodeInvalidValue, "Missing required parameter: '%s.role'.", param)
			}
			return BadRequest(param+".role", CodeInvalidValue,
				"Invalid value for '%s.role': %q. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.", param, m.Role)
		}
		switch {
		case len(m.Content) == 0 || bytes.Equal(m.Content, []byte("null")):
			if m.Role != "assistant" || !isSet(m.ToolCalls) {
				return BadRequest(param+".content", CodeInvalidValue, "Missing required parameter: '%s.content'.", param)
			}
		case m.Content[0] != '"' && m.Content[0] != '[':
			return BadRequest(param+".content", CodeInvalidValue,
				"Invalid type for '%s.content': expected a string or an array of content parts.", param)
		}
	}
	return nil
}

func pickMaxTokens(maxTokens, maxCompletionTokens *int) (int, *Error) {
	param, v := "max_tokens", maxTokens
	if maxCompletionTokens != nil {
		param, v = "max_completion_tokens", maxCompletionTokens
	}
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, BadRequest(param, CodeInvalidValue, "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", param, *v)
	}
	return *v, nil
}

func validateSampling(temperature, topP *float64, n *int) *Error {
	if temperature != nil && (*temperature < 0 || *temperature > 2) {
		return BadRequest("temperature", CodeInvalidValue, "Invalid 'temperature': expected a number between 0 and 2, but got %g instead.", *temperature)
	}
	if topP != nil && (*topP < 0 || *topP > 1) {
		return BadRequest("top_p", CodeInvalidValue, "Invalid 'top_p': expected a number between 0 and 1, but got %g instead.", *topP)
	}
	if n != nil && *n != 1 {
		return Unsupported("n", "Invalid 'n': only n=1 is supported on this network, got %d.", *n)
	}
	return nil
}

// parseStop accepts a string or an array of at most 4 strings.
func parseStop(raw json.RawMessage) ([]string, *Error) {
	if !isSet(raw) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, BadRequest("stop", CodeInvalidValue, "Invalid 'stop': expected a string or an array of strings.")
	}
	if len(many) > 4 {
		return nil, BadRequest("stop", CodeInvalidValue, "Invalid 'stop': at most 4 stop sequences, got %d.", len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// parsePrompt accepts a string or an array holding one string.
func parsePrompt(raw json.RawMessage) (string, *Error) {
	if !isSet(raw) {
		return "", BadRequest("prompt", CodeInvalidValue, "Missing required parameter: 'prompt'.")
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return one, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return "", BadRequest("prompt", CodeInvalidValue, "Invalid 'prompt': expected a string or an array of strings (token arrays are not supported).")
	}
	if len(many) != 1 {
		return "", Unsupported("prompt", "Invalid 'prompt': send one prompt per request, got %d.", len(many))
	}
	return many[0], nil
}
