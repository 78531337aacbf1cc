package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/engine"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// maxMessage bounds the length of an error message taken from a server.
const maxMessage = 2048

// errorBody is every shape of error answer seen from OpenAI-compatible servers:
//
//	{"error":{"message","type","param","code"}}            OpenAI, llama.cpp, Ollama /v1, vLLM ≥0.10.1
//	{"object":"error","message","type","param","code":400}  vLLM before 0.10.1
//	{"error":"message"}                                    Ollama's native API, TGI
//	{"detail":"message" | [...]}                            FastAPI defaults (vLLM's unknown routes, 422s)
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Detail  json.RawMessage `json:"detail"`
}

type errorInner struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// upstreamError is what a server said about a failure.
type upstreamError struct {
	message string
	typ     string
	code    int // the numeric code in the body, 0 when absent or not a number
}

// parseError reads an error answer in any of the shapes of errorBody, or as plain text.
// ok is false when the body holds no message at all.
func parseError(body []byte) (ue upstreamError, ok bool) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '{' {
		var eb errorBody
		if json.Unmarshal(body, &eb) == nil {
			ue.message, ue.typ, ue.code = eb.Message, eb.Type, jsonCode(eb.Code)
			switch {
			case len(eb.Error) > 0 && eb.Error[0] == '{':
				var in errorInner
				if json.Unmarshal(eb.Error, &in) == nil {
					ue = upstreamError{message: in.Message, typ: in.Type, code: jsonCode(in.Code)}
				}
			case len(eb.Error) > 0 && eb.Error[0] == '"':
				json.Unmarshal(eb.Error, &ue.message)
			case ue.message == "" && len(eb.Detail) > 0:
				if json.Unmarshal(eb.Detail, &ue.message) != nil {
					ue.message = string(eb.Detail) // FastAPI's validation errors: a list
				}
			}
			if ue.message != "" {
				ue.message = clip(ue.message)
				return ue, true
			}
		}
	}
	if len(body) == 0 {
		return ue, false
	}
	ue.message = clip(string(body))
	return ue, true
}

// jsonCode reads a numeric error code; codes may also be strings ("context_length_exceeded").
func jsonCode(raw json.RawMessage) int {
	raw = bytes.Trim(raw, `"`)
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0
	}
	return n
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxMessage {
		i := maxMessage
		for i > 0 && !utf8.RuneStart(s[i]) {
			i-- // do not cut a character in half
		}
		s = s[:i] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// isRequestStatus reports whether status means the server refused the request itself, which
// the buyer can fix: 400 Bad Request, 413 Content Too Large, 422 Unprocessable Content.
func isRequestStatus(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusUnprocessableEntity
}

// statusError turns a non-2xx answer into an error: a *engine.RequestError for a refused
// request, otherwise an error naming the status and the server's message. A 404 for an unknown
// model, a 429 or a 5xx are failures of the node, not of the buyer's request.
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ue, ok := parseError(body)
	if !ok {
		ue.message = http.StatusText(resp.StatusCode)
	}
	if isRequestStatus(resp.StatusCode) {
		return &engine.RequestError{Status: resp.StatusCode, Message: ue.message}
	}
	return fmt.Errorf("server answered %d: %s", resp.StatusCode, ue.message)
}

// streamError is the error for an error event inside a stream: llama.cpp sends
// data: {"error":{...}} and ends the stream without "[DONE]"; vLLM wraps its error object the
// same way. Whatever its code (vLLM labels most failures in a stream 400), the answer was cut,
// so the error wraps engine.ErrIncomplete rather than blaming the request.
func streamError(data []byte) error {
	ue, ok := parseError(data)
	if !ok {
		ue.message = "no message"
	}
	desc := ue.typ
	if ue.code != 0 {
		desc = strings.TrimSpace(desc + " " + strconv.Itoa(ue.code))
	}
	if desc != "" {
		desc = " (" + desc + ")"
	}
	return fmt.Errorf("openai engine: server error in stream%s: %s: %w", desc, ue.message, engine.ErrIncomplete)
}
