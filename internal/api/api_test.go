package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/api"
)

func TestAppendString(t *testing.T) {
	tests := []string{"", "plain", `quote " and \ backslash`, "new\nline\ttab\r", "\x00\x1f", "café 東京 🙂", "bad \xff utf8", "<html>&"}
	for _, s := range tests {
		got := api.AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("AppendString(%q) = %s: not JSON: %v", s, got, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); back != want {
			t.Errorf("AppendString(%q) decodes to %q, want %q", s, back, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xe6\x9d", "🙂\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(api.AppendString(nil, s), &back); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("round trip %q → %q", s, back)
		}
	})
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		param      string
	}{
		{"ok", `{"model":"m"}`, 0, ""},
		{"empty", ``, 400, ""},
		{"syntax", `{"model":`, 400, ""},
		{"type", `{"model":1}`, 400, "model"},
		{"nested type", `{"stream_options":{"include_usage":"yes"}}`, 400, "stream_options.include_usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req api.ChatRequest
			err := api.Decode(strings.NewReader(tt.body), &req)
			switch {
			case tt.status == 0 && err != nil:
				t.Fatalf("Decode: %v", err)
			case tt.status != 0 && (err == nil || err.Status != tt.status || err.Param != tt.param):
				t.Fatalf("Decode = %v; want %d with param %q", err, tt.status, tt.param)
			}
		})
	}
	body := http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), 10)
	if err := api.Decode(body, &api.ChatRequest{}); err == nil || err.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %v; want 413", err)
	}
}

func TestChatRequest_Job(t *testing.T) {
	ten := 10
	req := api.ChatRequest{
		Model:          "m",
		Messages:       json.RawMessage(`[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]},{"role":"tool","content":"42","tool_call_id":"c"}]`),
		Sampling:       api.Sampling{MaxTokens: &ten, Stop: json.RawMessage(`"END"`)},
		Tools:          json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`),
		ResponseFormat: json.RawMessage(`null`),
	}
	job, err := req.Job()
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	if string(job.Messages) != string(req.Messages) || job.MaxTokens != 10 || len(job.Stop) != 1 || job.Stop[0] != "END" || job.ResponseFormat != nil || string(job.Tools) != string(req.Tools) {
		t.Errorf("job = %+v; want messages and tools intact, max_tokens 10, stop [END], no response_format", job)
	}
	mct := 5
	req.MaxCompletionTokens = &mct
	if job, _ := req.Job(); job.MaxTokens != 5 {
		t.Errorf("max_completion_tokens: job.MaxTokens = %d, want 5 (it wins over max_tokens)", job.MaxTokens)
	}
}

func TestErrorJSON(t *testing.T) {
	b, _ := json.Marshal(api.BadRequest("", "invalid_json", "bad"))
	want := `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"invalid_json"}}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}
