package sim

import (
	"context"
	"encoding/json"
	"github.com/shareai/shareai/internal/engine"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/protocol"
)

const tools = `[{"type":"function","function":{"name":"search","parameters":{"type":"object"}}},{"type":"function","function":{"name":"weather"}}]`

func TestRun_ToolCall(t *testing.T) {
	tests := []struct {
		name   string
		tools  string
		choice string
		want   string // the tool called; "" for a text answer
	}{
		{"required", tools, `"required"`, "search"},
		{"named", tools, `{"type":"function","function":{"name":"weather"}}`, "weather"},
		{"auto", tools, `"auto"`, ""},
		{"none", tools, `"none"`, ""},
		{"absent", tools, ``, ""},
		{"no tools", ``, `"required"`, ""},
	}
	e := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := user("What is the weather in Zürich?", 3)
			req.Tools, req.ToolChoice = json.RawMessage(tt.tools), json.RawMessage(tt.choice)
			var text string
			var calls []json.RawMessage
			res, err := e.Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error {
				text += d.Text
				if d.ToolCalls != nil {
					calls = append(calls, d.ToolCalls)
				}
				return nil
			}))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tt.want == "" {
				if calls != nil || text == "" || res.FinishReason != "stop" {
					t.Errorf("got %d tool call deltas, text %q, finish %q; want text and finish stop", len(calls), text, res.FinishReason)
				}
				return
			}
			if text != "" || res.FinishReason != "tool_calls" {
				t.Errorf("text %q, finish %q; want no text and finish tool_calls", text, res.FinishReason)
			}
			if n := len(calls); n < 3 || n > 4 {
				t.Fatalf("%d tool call deltas, want 3 or 4", n)
			}
			if res.Usage.CompletionTokens != len(calls)-1 {
				t.Errorf("completion tokens = %d, want %d", res.Usage.CompletionTokens, len(calls)-1)
			}
			type delta struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string  `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			}
			var args strings.Builder
			for i, c := range calls {
				var d []delta
				if err := json.Unmarshal(c, &d); err != nil || len(d) != 1 || d[0].Index == nil || *d[0].Index != 0 || d[0].Function.Arguments == nil {
					t.Fatalf("delta %d = %s, want one call with index 0 and arguments", i, c)
				}
				head := d[0].ID != "" || d[0].Type != "" || d[0].Function.Name != ""
				if i == 0 && (!strings.HasPrefix(d[0].ID, "call_") || d[0].Type != "function" || d[0].Function.Name != tt.want || *d[0].Function.Arguments != "") {
					t.Errorf("first delta = %s, want id call_..., type function, name %q, empty arguments", c, tt.want)
				}
				if i > 0 && head {
					t.Errorf("delta %d = %s, want only arguments", i, c)
				}
				args.WriteString(*d[0].Function.Arguments)
			}
			var v struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal([]byte(args.String()), &v); err != nil || v.Query == "" {
				t.Errorf("arguments %q: %v; want {\"query\": \"...\"}", args.String(), err)
			}
			if got := e.Answer(req); got != args.String() {
				t.Errorf("Answer = %q, want the arguments %q", got, args.String())
			}
			again, _ := json.Marshal(calls)
			var calls2 []json.RawMessage
			if _, err := New(Config{}).Run(context.Background(), req, engine.Emit(func(d protocol.Delta) error {
				calls2 = append(calls2, d.ToolCalls)
				return nil
			})); err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(calls2); string(got) != string(again) {
				t.Errorf("another engine calls\n%s\nwant\n%s", got, again)
			}
		})
	}
}

func TestRun_JSONFormat(t *testing.T) {
	tests := []struct {
		name, format string
	}{
		{"json_object", `{"type":"json_object"}`},
		{"json_schema", `{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}`},
	}
	e := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range int64(20) {
				req := user("Answer in JSON.", seed)
				req.ResponseFormat = json.RawMessage(tt.format)
				deltas, res := stream(t, e, req)
				got := strings.Join(deltas, "")
				var v struct {
					Answer string `json:"answer"`
				}
				if err := json.Unmarshal([]byte(got), &v); err != nil || len(strings.Fields(v.Answer)) != len(deltas)-2 {
					t.Fatalf("seed %d: %q: %v; want a JSON object with an answer of %d words", seed, got, err, len(deltas)-2)
				}
				if res.FinishReason != "stop" {
					t.Errorf("finish = %q, want stop", res.FinishReason)
				}
			}
		})
	}
	req := user("Answer in text.", 1)
	req.ResponseFormat = json.RawMessage(`{"type":"text"}`)
	if got := e.Answer(req); strings.HasPrefix(got, "{") {
		t.Errorf("response_format text: answer %q, want text", got)
	}
}
