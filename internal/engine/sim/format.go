package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// toolToCall returns the name of the tool the answer must call: the named one when tool_choice
// names a function, the first of the tools when it is "required". ok is false when the answer
// is text: no tools, or tool_choice "auto", "none" or absent.
func toolToCall(req *protocol.Request) (name string, ok bool, err error) {
	if len(bytes.TrimSpace(req.Tools)) == 0 || string(bytes.TrimSpace(req.Tools)) == "null" {
		return "", false, nil
	}
	var tools []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(req.Tools, &tools); err != nil {
		return "", false, badRequest("invalid tools: %v", err)
	}
	if len(tools) == 0 {
		return "", false, nil
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	switch {
	case len(choice) == 0 || string(choice) == "null":
		return "", false, nil
	case choice[0] == '"':
		var s string
		if err := json.Unmarshal(choice, &s); err != nil {
			return "", false, badRequest("invalid tool_choice: %v", err)
		}
		if s != "required" {
			return "", false, nil
		}
		name = tools[0].Function.Name
		if name == "" {
			name = tools[0].Name
		}
		return name, true, nil
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(choice, &named); err != nil {
		return "", false, badRequest("invalid tool_choice: %v", err)
	}
	return named.Function.Name, named.Function.Name != "", nil
}

// wantsJSON says whether response_format asks for a JSON object.
func wantsJSON(req *protocol.Request) (bool, error) {
	if len(bytes.TrimSpace(req.ResponseFormat)) == 0 || string(bytes.TrimSpace(req.ResponseFormat)) == "null" {
		return false, nil
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(req.ResponseFormat, &f); err != nil {
		return false, badRequest("invalid response_format: %v", err)
	}
	return f.Type == "json_object" || f.Type == "json_schema", nil
}

// A callDelta is one OpenAI tool call delta, streamed in Delta.ToolCalls as a one-element array.
type callDelta struct {
	Index    int          `json:"index"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function callFunction `json:"function"`
}

type callFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// toolCallDeltas returns the deltas of a call of the tool name, and the call's arguments: first
// the call's id, type and name, then its arguments, {"query": "..."}, in 2 or 3 pieces.
func toolCallDeltas(r *rng, name string) ([]json.RawMessage, string) {
	const hex = "0123456789abcdef"
	id := make([]byte, 0, 29)
	id = append(id, "call_"...)
	for range 24 {
		id = append(id, hex[r.intn(16)])
	}
	var query strings.Builder
	for i := range 2 + r.intn(4) {
		if i > 0 {
			query.WriteByte(' ')
		}
		query.WriteString(words[r.intn(len(words))])
	}
	q, _ := json.Marshal(query.String()) // a string always marshals
	pieces := []string{`{"query": `, string(q), `}`}
	if r.intn(2) == 0 {
		pieces = []string{`{"query": ` + string(q), `}`}
	}
	deltas := make([]json.RawMessage, 0, 1+len(pieces))
	deltas = append(deltas, marshalCall(callDelta{
		ID: string(id), Type: "function", Function: callFunction{Name: name},
	}))
	for _, p := range pieces {
		deltas = append(deltas, marshalCall(callDelta{Function: callFunction{Arguments: p}}))
	}
	return deltas, strings.Join(pieces, "")
}

func marshalCall(d callDelta) json.RawMessage {
	b, err := json.Marshal([]callDelta{d})
	if err != nil {
		panic(err) // strings and ints always marshal
	}
	return b
}

func badRequest(format string, args ...any) error {
	return &engine.RequestError{Status: 400, Message: fmt.Sprintf(format, args...)}
}
