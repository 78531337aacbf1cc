package openaicompat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

func TestUnecho(t *testing.T) {
	const prefix = "The quick brown"
	tests := []struct {
		name   string
		pieces []string
		want   string
	}{
		{"echoed whole", []string{"The quick brown", " fox"}, " fox"},
		{"echoed in pieces", []string{"The ", "quick", " brown fox", " jumps"}, " fox jumps"},
		{"not echoed", []string{" fox", " jumps"}, " fox jumps"},
		{"starts alike, then not an echo", []string{"The ", "lazy dog"}, "The lazy dog"},
		{"shorter than the prefix", []string{"The "}, "The "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got strings.Builder
			u := &unecho{Output: engine.Emit(func(d protocol.Delta) error { got.WriteString(d.Text); return nil }), prefix: prefix}
			for _, p := range tt.pieces {
				if err := u.Delta(protocol.Delta{Text: p}); err != nil {
					t.Fatal(err)
				}
			}
			u.release()
			if got.String() != tt.want {
				t.Errorf("got %q, want %q", got.String(), tt.want)
			}
		})
	}
}

func TestPartialAnswer(t *testing.T) {
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello th"}})
	req := &protocol.Request{Kind: protocol.KindChat, Messages: msgs, Continue: true}
	if got := partialAnswer(req); got != "Hello th" {
		t.Errorf("partialAnswer = %q", got)
	}
	req.Continue = false
	if got := partialAnswer(req); got != "" {
		t.Errorf("partialAnswer of a request that is not a continuation = %q", got)
	}
}

// A vLLM node continues with continue_final_message, and repeats no text it was given.
func TestRun_ContinueVLLM(t *testing.T) {
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello th\"}}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ere!\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	e, err := New(Config{BaseURL: srv.URL + "/v1", Models: []engine.Model{{Name: "m"}}, Continue: ContinueVLLM})
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := e.Models(context.Background()); !ms[0].Continues {
		t.Error("a vLLM node does not offer continuation")
	}
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello th"}})
	var got strings.Builder
	_, err = e.Run(context.Background(), &protocol.Request{Kind: protocol.KindChat, Model: "m", Messages: msgs, Continue: true},
		engine.Emit(func(d protocol.Delta) error { got.WriteString(d.Text); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"continue_final_message":true,"add_generation_prompt":false`) || !json.Valid(body) {
		t.Errorf("body %s lacks vLLM's continuation fields", body)
	}
	if got.String() != "ere!" {
		t.Errorf("continued with %q; want the new text only, %q", got.String(), "ere!")
	}
}
