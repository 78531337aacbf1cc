package api_test

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/shareai/shareai/internal/api"
)

// chatBody is a valid chat body with more members.
func chatBody(more string) string {
	b := `{"model":"m","messages":[{"role":"user","content":"hi"}]`
	if more != "" {
		b += "," + more
	}
	return b + "}"
}

// decodeChat decodes and validates a chat body as the gateway does.
func decodeChat(body string) *api.Error {
	var req api.ChatRequest
	if err := api.Decode(strings.NewReader(body), &req); err != nil {
		return err
	}
	_, err := req.Job()
	return err
}

// TestDecode_Texts holds the exact texts buyers read: they name JSON members, as OpenAI's do,
// and never a Go type or field.
func TestDecode_Texts(t *testing.T) {
	tests := []struct {
		name, body  string
		code, param string
		message     string
	}{
		{"unknown member", chatBody(`"max_token":5`), "unknown_parameter", "max_token",
			"Unrecognized request argument supplied: max_token"},
		{"member names are exact", chatBody(`"Temperature":1`), "unknown_parameter", "Temperature",
			"Unrecognized request argument supplied: Temperature"},
		{"unknown before a type error", chatBody(`"max_tokens":"x","foo":1`), "unknown_parameter", "foo",
			"Unrecognized request argument supplied: foo"},
		{"escaped unknown name", chatBody(`"a\"b":1`), "unknown_parameter", `a"b`,
			`Unrecognized request argument supplied: a"b`},
		{"models not an array", chatBody(`"models":"x"`), "invalid_value", "models",
			"Invalid type for 'models': expected an array, but got a string instead."},
		{"service_tier not a string", chatBody(`"service_tier":1`), "invalid_value", "service_tier",
			"Invalid type for 'service_tier': expected a string, but got a number instead."},
		{"max_tokens not an integer", chatBody(`"max_tokens":10.5`), "invalid_value", "max_tokens",
			"Invalid type for 'max_tokens': expected an integer, but got 10.5 instead."},
		{"max_tokens out of range", chatBody(`"max_tokens":99999999999999999999`), "invalid_value", "max_tokens",
			"Invalid 'max_tokens': 99999999999999999999 is out of range."},
		{"messages not an array", `{"model":"m","messages":5}`, "invalid_value", "messages",
			"Invalid 'messages': expected an array of message objects."},
		{"provider not an object", chatBody(`"provider":[]`), "invalid_value", "provider",
			"Invalid type for 'provider': expected an object, but got an array instead."},
		{"nested type", chatBody(`"stream_options":{"include_usage":"yes"}`), "invalid_value", "stream_options.include_usage",
			"Invalid type for 'stream_options.include_usage': expected a boolean, but got a string instead."},
		{"stream not a boolean", chatBody(`"stream":"yes"`), "invalid_value", "stream",
			"Invalid type for 'stream': expected a boolean, but got a string instead."},
		{"metadata values", chatBody(`"metadata":{"a":1}`), "invalid_value", "metadata",
			"Invalid type for 'metadata': expected a string, but got a number instead."},
		{"not an object", `[]`, "invalid_json", "", "The request body must be a JSON object."},
		{"a string", `"hi"`, "invalid_json", "", "The request body must be a JSON object."},
		{"syntax", `{"model":`, "invalid_json", "",
			"We could not parse the JSON body of your request: unexpected end of JSON input (at byte 9). Send valid JSON, with the Content-Type application/json."},
		{"empty", ` `, "invalid_json", "", "The request body is empty; send a JSON object."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := decodeChat(tt.body)
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Status != http.StatusBadRequest || err.Code != tt.code || err.Param != tt.param || err.Message != tt.message {
				t.Errorf("got %d %s param %q: %s\nwant 400 %s param %q: %s", err.Status, err.Code, err.Param, err.Message, tt.code, tt.param, tt.message)
			}
			for _, goName := range []string{"Routing", "Sampling", "Hints", "api.", "Go value", "int64", "float64", "json:"} {
				if strings.Contains(err.Message, goName) || strings.Contains(err.Param, goName) {
					t.Errorf("error %q (param %q) names Go's %q", err.Message, err.Param, goName)
				}
			}
		})
	}
}

func TestDecode_Completion(t *testing.T) {
	var req api.CompletionRequest
	err := api.Decode(strings.NewReader(`{"model":"m","prompt":"p","response_format":{"type":"text"}}`), &req)
	if err == nil || err.Code != api.CodeUnknownParameter || err.Param != "response_format" {
		t.Errorf("a chat member in a completion: %v; want unknown_parameter on response_format", err)
	}
	err = api.Decode(strings.NewReader(`{"model":"m","prompt":"p","best_of":1,"echo":false,"suffix":null,"logprobs":null,"user":"u","models":["x"]}`), &req)
	if err != nil {
		t.Errorf("completion members: %v", err)
	}
}

func TestDecode_ReadErrors(t *testing.T) {
	timeout := iotest.ErrReader(&os.PathError{Op: "read", Path: "conn", Err: os.ErrDeadlineExceeded})
	if err := api.Decode(timeout, &api.ChatRequest{}); err == nil || err.Status != http.StatusRequestTimeout || err.Code != api.CodeRequestTimeout {
		t.Errorf("read deadline: %v; want 408 request_timeout", err)
	}
	if err := api.Decode(iotest.ErrReader(errors.New("reset")), &api.ChatRequest{}); err == nil || err.Status != http.StatusBadRequest {
		t.Errorf("read error: %v; want 400", err)
	}
}

// The one-pass readers themselves take the chats buyers send, spaced or not, with text and
// content parts: encoding/json is only for the unusual. FuzzDecode_Cut alone would pass if
// they took nothing.
func TestDecode_CutsCommonChats(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"Hi \"there\" é"}]}`,
		"{\n  \"model\": \"m\",\n  \"messages\": [\n    {\"role\": \"system\", \"content\": \"Be brief.\"},\n    {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}]}\n  ],\n  \"temperature\": 0.2\n}",
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}],"model":"m","stream":true}`,
	} {
		messages, _, ok := api.CutMember([]byte(body), "messages")
		if !ok {
			t.Errorf("%s: messages not cut out", body)
			continue
		}
		if !api.ReadMessages(messages) {
			t.Errorf("%s: messages left to encoding/json", messages)
		}
	}
}
