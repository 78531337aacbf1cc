package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/engine"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// maxMessage bounds the length of an error message taken from Ollama.
const maxMessage = 2048

// statusError turns an answer that is not 2xx into an error. Ollama answers a request it
// refuses with {"error": "..."}: 400 for a bad request (an invalid option, a model that does
// not support tools), 404 for a model it does not have ("model 'x' not found"). These, and
// 413 and 422, are a *engine.RequestError; other statuses (401 or 403 from a proxy in front of
// Ollama, 429, 5xx) are failures of the node.
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := errorMessage(body)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return &engine.RequestError{Status: resp.StatusCode, Message: msg}
	}
	return fmt.Errorf("ollama answered %d: %s", resp.StatusCode, msg)
}

// errorMessage reads an error answer: Ollama's {"error": "message"}, an OpenAI-style
// {"error": {"message": ...}} from a proxy, or plain text. It is "" for an empty body.
func errorMessage(body []byte) string {
	body = bytes.TrimSpace(body)
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if len(body) > 0 && body[0] == '{' && json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		if msg := errorText(e.Error); msg != "" {
			return msg
		}
	}
	return clip(string(body))
}

// errorText is the message of an "error" field: a string, or an object with a message.
func errorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clip(s)
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return clip(obj.Message)
	}
	return clip(string(raw))
}

// clip trims s and cuts it to maxMessage bytes, without cutting a character in half.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxMessage {
		i := maxMessage
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
