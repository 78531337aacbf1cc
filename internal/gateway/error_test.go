package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/queue"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

func assertAPIError(t *testing.T, err error, status int, code string) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v; want an API error %d %s", err, status, code)
	}
	if apiErr.StatusCode != status || apiErr.Code != code || apiErr.Message == "" {
		t.Errorf("error = %d %q %q; want %d %q with a message", apiErr.StatusCode, apiErr.Code, apiErr.Message, status, code)
	}
	if apiErr.Response.Header.Get(gateway.HeaderRequestID) == "" {
		t.Errorf("error response has no x-request-id")
	}
	return apiErr
}

func TestErrors_Auth(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Gateway.KeyCacheTTL = 1 })
	ctx := context.Background()
	params := chatParams("hi", 1)

	chat := func(opts ...option.RequestOption) error {
		client := env.Client(opts...)
		_, err := client.Chat.Completions.New(ctx, params)
		return err
	}
	err := chat(option.WithHeaderDel("Authorization"))
	assertAPIError(t, err, http.StatusUnauthorized, "missing_api_key")

	err = chat(option.WithAPIKey("sk-not-a-real-key-0000000000"))
	e := assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key")
	if strings.Contains(e.Message, "0000000000") {
		t.Errorf("message %q shows the whole key", e.Message)
	}

	err = chat(option.WithAPIKey(env.ProviderToken))
	assertAPIError(t, err, http.StatusUnauthorized, "invalid_api_key")

	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.RevokeKey(ctx, k.ID, k.CreatedAt); err != nil {
		t.Fatal(err)
	}
	assertAPIError(t, chat(), http.StatusUnauthorized, "invalid_api_key")
}

func TestErrors_BadRequests(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	tests := []struct {
		name, path, body string
		status           int
		code, param      string
	}{
		{"malformed JSON", "/chat/completions", `{"model": "x", "messages": [`, 400, "invalid_json", ""},
		{"empty body", "/chat/completions", ``, 400, "invalid_json", ""},
		{"wrong type", "/chat/completions", `{"model": 7, "messages": []}`, 400, "invalid_value", "model"},
		{"no model", "/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_value", "model"},
		{"no messages", "/chat/completions", `{"model": "sim/llama-3.1-8b"}`, 400, "invalid_value", "messages"},
		{"empty messages", "/chat/completions", `{"model": "sim/llama-3.1-8b", "messages": []}`, 400, "invalid_value", "messages"},
		{"bad role", "/chat/completions", `{"model": "sim/llama-3.1-8b", "messages": [{"role": "robot", "content": "hi"}]}`, 400, "invalid_value", "messages[0].role"},
		{"temperature", "/chat/completions", `{"model": "sim/llama-3.1-8b", "messages": [{"role": "user", "content": "hi"}], "temperature": 3}`, 400, "invalid_value", "temperature"},
		{"max_tokens", "/chat/completions", `{"model": "sim/llama-3.1-8b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}`, 400, "invalid_value", "max_tokens"},
		{"n", "/chat/completions", `{"model": "sim/llama-3.1-8b", "messages": [{"role": "user", "content": "hi"}], "n": 2}`, 400, "unsupported_parameter", "n"},
		{"stop", "/chat/completions", `{"model": "sim/llama-3.1-8b", "messages": [{"role": "user", "content": "hi"}], "stop": ["a","b","c","d","e"]}`, 400, "invalid_value", "stop"},
		{"unknown model", "/chat/completions", `{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}`, 404, "model_not_found", "model"},
		{"completion prompt", "/completions", `{"model": "sim/llama-3.1-8b", "prompt": ["a", "b"]}`, 400, "unsupported_parameter", "prompt"},
		{"completion echo", "/completions", `{"model": "sim/llama-3.1-8b", "prompt": "a", "echo": true}`, 400, "unsupported_parameter", "echo"},
		{"unknown path", "/embeddings", `{}`, 404, "unknown_url", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := env.Post(tt.path, tt.body)
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("decode error body: %v", err)
			}
			e := body.Error
			param := ""
			if e.Param != nil {
				param = *e.Param
			}
			if resp.StatusCode != tt.status || e.Code == nil || *e.Code != tt.code || param != tt.param || e.Message == "" || e.Type == "" {
				t.Errorf("got %d %+v; want %d code %q param %q", resp.StatusCode, e, tt.status, tt.code, tt.param)
			}
			if resp.Header.Get(gateway.HeaderRequestID) == "" {
				t.Error("no x-request-id")
			}
		})
	}
}

func TestErrors_BodyTooLarge(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	huge := `{"model":"sim/llama-3.1-8b","messages":[{"role":"user","content":"` + strings.Repeat("a", 17<<20) + `"}]}`
	resp := env.Post("/chat/completions", huge)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte(`"request_too_large"`)) {
		t.Errorf("got %d %s; want 413 request_too_large", resp.StatusCode, b)
	}
}

// A request no node can take is answered at once with the reason, never left to hang.
func TestErrors_NoProviderAvailable(t *testing.T) {
	// The request waits in the queue for the busy node, up to its deadline.
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Agent.MaxConcurrent = 1
		c.Sim = sim.Config{TokensPerSecond: 5}
		c.Coordinator.Core.Queue = queue.Config{Timeout: 200 * time.Millisecond}
	})
	client := env.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	busy := client.Chat.Completions.NewStreaming(ctx, chatParams("occupy the only slot", 1))
	if !busy.Next() {
		t.Fatalf("first stream: %v", busy.Err())
	}
	_, err := client.Chat.Completions.New(context.Background(), chatParams("and now?", 2))
	e := assertAPIError(t, err, http.StatusServiceUnavailable, "no_provider_available")
	if !strings.Contains(e.Message, "1 node serves sim/llama-3.1-8b: 1 busy") {
		t.Errorf("message %q does not say how many nodes serve the model and how many are busy", e.Message)
	}
	if ra := e.Response.Header.Get("Retry-After"); ra == "" {
		t.Error("503 without Retry-After")
	}
}

func TestHealth(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(env.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRequestID) == "" {
			t.Errorf("%s = %d %s; want 200 with a request id", path, resp.StatusCode, b)
		}
	}
}
