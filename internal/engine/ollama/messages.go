package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// message is a chat message as Ollama's /api/chat takes it.
type message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Thinking   string     `json:"thinking,omitempty"`
	Images     []string   `json:"images,omitempty"` // base64, without a data: prefix
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`    // of a tool message: the function's name
	ToolCallID string     `json:"tool_call_id,omitempty"` // of a tool message
}

// toolCall is a tool call in Ollama's shape, in messages sent and in answers: arguments are
// an object, not a string; an answer may give the call's index and id (recent versions do).
type toolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// wireMessage is an OpenAI chat message as the buyer sent it.
type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"` // vLLM, DeepSeek
	Reasoning        string          `json:"reasoning"`         // Ollama /v1, OpenRouter
}

type wireToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"` // a string of JSON; an object is taken too
	} `json:"function"`
}

// wirePart is one part of a message's content.
type wirePart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"` // {"url": ...}, or a string
}

// convertMessages turns the buyer's OpenAI messages into Ollama's:
//
//   - string content passes as it is; the text parts of a content array are joined with
//     newlines (as the sim engine reads them) and its image_url parts, which must be data:
//     URLs with base64 data, become images;
//   - an assistant's tool_calls get their arguments as an object, and its reasoning_content
//     (or reasoning) becomes thinking;
//   - a tool message keeps the role "tool", with tool_name the function's name (its name, or
//     that of the call tool_call_id names);
//   - the role "developer" becomes "system", which chat templates know.
//
// Messages that are not valid are a *engine.RequestError; an image by http(s) URL or a part
// of another type (audio, a file), which this node cannot take, is a plain error.
func convertMessages(raw json.RawMessage) ([]message, error) {
	var wire []wireMessage
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, badRequest("messages: %v", err)
	}
	msgs := make([]message, len(wire))
	for i := range wire {
		w, m := &wire[i], &msgs[i]
		m.Role = w.Role
		if m.Role == "developer" {
			m.Role = "system"
		}
		if err := m.setContent(w.Content); err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		m.Thinking = w.ReasoningContent
		if m.Thinking == "" {
			m.Thinking = w.Reasoning
		}
		for j, tc := range w.ToolCalls {
			call, err := convertToolCall(tc)
			if err != nil {
				return nil, badRequest("messages[%d].tool_calls[%d]: %v", i, j, err)
			}
			m.ToolCalls = append(m.ToolCalls, call)
		}
		if m.Role == "tool" {
			m.ToolCallID = w.ToolCallID
			m.ToolName = w.Name
			if m.ToolName == "" {
				m.ToolName = toolNameOf(wire[:i], w.ToolCallID)
			}
		}
	}
	return msgs, nil
}

// setContent reads a message's content: a string, an array of parts, or null.
func (m *message) setContent(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if isUnset(raw) {
		return nil
	}
	if raw[0] == '"' {
		return json.Unmarshal(raw, &m.Content)
	}
	var parts []wirePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return badRequest("content must be a string, an array of parts or null: %v", err)
	}
	var text strings.Builder
	texts := 0
	for k, p := range parts {
		switch p.Type {
		case "text":
			if texts > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(p.Text)
			texts++
		case "image_url":
			img, err := imageData(p.ImageURL)
			if err != nil {
				return fmt.Errorf("content[%d]: %w", k, err)
			}
			m.Images = append(m.Images, img)
		default:
			return fmt.Errorf("content[%d]: parts of type %q are not supported by Ollama", k, p.Type)
		}
	}
	m.Content = text.String()
	return nil
}

var errImageURL = errors.New("images must be data: URLs: Ollama does not fetch them")

// imageData returns the base64 data of an image_url part: {"url": "data:image/png;base64,..."}
// or the URL alone.
func imageData(raw json.RawMessage) (string, error) {
	var url string
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &url); err != nil {
			return "", badRequest("image_url: %v", err)
		}
	} else {
		var u struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(raw, &u); err != nil {
			return "", badRequest("image_url: %v", err)
		}
		url = u.URL
	}
	if !strings.HasPrefix(url, "data:") {
		return "", errImageURL
	}
	_, data, ok := strings.Cut(url, ";base64,")
	if !ok {
		return "", badRequest("image_url: a data: URL must hold base64 data")
	}
	return data, nil
}

// convertToolCall turns an OpenAI tool call into Ollama's, its arguments parsed into an
// object ({} when empty).
func convertToolCall(tc wireToolCall) (toolCall, error) {
	var out toolCall
	out.ID = tc.ID
	out.Function.Name = tc.Function.Name
	args := bytes.TrimSpace(tc.Function.Arguments)
	if len(args) > 0 && args[0] == '"' {
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return out, err
		}
		args = bytes.TrimSpace([]byte(s))
	}
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' || !json.Valid(args) {
		return out, fmt.Errorf("arguments %q are not a JSON object", clip(string(args)))
	}
	out.Function.Arguments = args
	return out, nil
}

// toolNameOf is the function name of the last tool call with the given id in earlier, or "".
func toolNameOf(earlier []wireMessage, id string) string {
	if id == "" {
		return ""
	}
	for i := len(earlier) - 1; i >= 0; i-- {
		for _, tc := range earlier[i].ToolCalls {
			if tc.ID == id {
				return tc.Function.Name
			}
		}
	}
	return ""
}

// partialAnswer is the text of the trailing assistant message of a continued chat.
func partialAnswer(msgs []message) string {
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		return msgs[n-1].Content
	}
	return ""
}

// messagesChars counts the characters of the messages' text.
func messagesChars(msgs []message) int {
	n := 0
	for _, m := range msgs {
		n += utf8.RuneCountInString(m.Content)
	}
	return n
}
