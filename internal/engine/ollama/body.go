package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// chatRequest is the body of POST /api/chat.
type chatRequest struct {
	Model    string          `json:"model"`
	Messages []message       `json:"messages"`
	Tools    json.RawMessage `json:"tools,omitempty"` // OpenAI's shape, which Ollama takes
	Format   json.RawMessage `json:"format,omitempty"`
	Options  *options        `json:"options,omitempty"`
	Stream   bool            `json:"stream"`
}

// generateRequest is the body of POST /api/generate.
type generateRequest struct {
	Model   string          `json:"model"`
	Prompt  string          `json:"prompt"`
	Raw     bool            `json:"raw"`
	Format  json.RawMessage `json:"format,omitempty"`
	Options *options        `json:"options,omitempty"`
	Stream  bool            `json:"stream"`
}

// options are Ollama's model options for one request. Options not set are the model's
// (its Modelfile's PARAMETERs), not OpenAI's defaults.
type options struct {
	NumCtx      int      `json:"num_ctx,omitempty"`
	NumPredict  int      `json:"num_predict,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	// The penalties, by OpenAI's names, which Ollama's options share.
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
}

// call is the request Run sends for a job.
type call struct {
	path        string // "/api/chat" or "/api/generate"
	body        any    // *chatRequest or *generateRequest
	promptChars int    // characters of the prompt's text, to estimate its tokens
}

// newCall turns req into Ollama's request.
//
// A chat goes to /api/chat, its messages converted by convertMessages. A continued chat ends
// with the partial assistant answer, which Ollama (0.2.8 and later) continues, answering only
// the new text.
//
// A completion goes to /api/generate with raw: true, so that the prompt is continued as it
// is, as OpenAI's completions are, not wrapped in the model's chat template; a continued
// completion's partial answer is appended to the prompt.
//
// In a continuation, max_tokens counts the whole answer, so num_predict is what is left of it
// after the partial answer (estimated at four bytes a token).
func (e *Engine) newCall(req *protocol.Request) (*call, error) {
	opts, err := e.options(req)
	if err != nil {
		return nil, err
	}
	format, err := convertFormat(req.ResponseFormat)
	if err != nil {
		return nil, err
	}
	switch req.Kind {
	case protocol.KindChat:
		if isUnset(req.Messages) {
			return nil, badRequest("messages is required")
		}
		msgs, err := convertMessages(req.Messages)
		if err != nil {
			return nil, err
		}
		if req.Continue {
			opts.continued(partialAnswer(msgs))
		}
		body := &chatRequest{Model: req.Model, Messages: msgs, Format: format, Options: opts.orNil(), Stream: true}
		if !isUnset(req.Tools) && !isToolChoiceNone(req.ToolChoice) {
			body.Tools = req.Tools
		}
		return &call{path: "/api/chat", body: body, promptChars: messagesChars(msgs)}, nil
	case protocol.KindCompletion:
		prompt := req.Prompt
		if req.Continue {
			prompt += req.Partial
			opts.continued(req.Partial)
		}
		body := &generateRequest{Model: req.Model, Prompt: prompt, Raw: true, Format: format, Options: opts.orNil(), Stream: true}
		return &call{path: "/api/generate", body: body, promptChars: utf8.RuneCountInString(prompt)}, nil
	}
	return nil, fmt.Errorf("ollama engine: unknown request kind %q", req.Kind)
}

// options are the sampling options of req.
func (e *Engine) options(req *protocol.Request) (*options, error) {
	if err := checkFinite("temperature", req.Temperature); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"top_p", req.TopP}, {"frequency_penalty", req.FrequencyPenalty}, {"presence_penalty", req.PresencePenalty}} {
		if err := checkFinite(f.name, f.v); err != nil {
			return nil, err
		}
	}
	return &options{
		NumCtx:           e.numCtx,
		NumPredict:       max(req.MaxTokens, 0),
		Temperature:      req.Temperature,
		TopP:             req.TopP,
		Seed:             req.Seed,
		Stop:             req.Stop,
		FrequencyPenalty: req.FrequencyPenalty,
		PresencePenalty:  req.PresencePenalty,
	}, nil
}

func checkFinite(name string, f *float64) error {
	if f != nil && (math.IsNaN(*f) || math.IsInf(*f, 0)) {
		return badRequest("%s is not a finite number", name)
	}
	return nil
}

// continued makes num_predict count what is left of the answer after partial.
func (o *options) continued(partial string) {
	if o.NumPredict > 0 {
		o.NumPredict = max(1, o.NumPredict-(len(partial)+3)/4)
	}
}

// orNil is o, or nil when it sets nothing.
func (o *options) orNil() *options {
	if o.NumCtx == 0 && o.NumPredict == 0 && o.Temperature == nil && o.TopP == nil && o.Seed == nil && len(o.Stop) == 0 &&
		o.FrequencyPenalty == nil && o.PresencePenalty == nil {
		return nil
	}
	return o
}

// convertFormat turns OpenAI's response_format into Ollama's format: "json" for json_object,
// the schema for json_schema (Ollama 0.5 and later), nothing for text.
func convertFormat(raw json.RawMessage) (json.RawMessage, error) {
	if isUnset(raw) {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, badRequest("response_format: %v", err)
	}
	switch rf.Type {
	case "json_object":
		return json.RawMessage(`"json"`), nil
	case "json_schema":
		if rf.JSONSchema != nil && !isUnset(rf.JSONSchema.Schema) {
			return rf.JSONSchema.Schema, nil
		}
		return json.RawMessage(`"json"`), nil
	}
	return nil, nil
}

// isToolChoiceNone reports whether tool_choice is "none": the tools are then not sent, since
// Ollama has no tool_choice. Other choices ("required", a named function) cannot be enforced:
// the tools are sent and the model chooses.
func isToolChoiceNone(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == `"none"`
}

// isUnset reports whether a raw field is absent or JSON null.
func isUnset(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func badRequest(format string, args ...any) error {
	return &engine.RequestError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}
