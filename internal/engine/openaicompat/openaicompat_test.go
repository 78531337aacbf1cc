package openaicompat

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shareai/shareai/internal/engine"
)

// answer is what a test server replays.
type answer struct {
	status      int
	contentType string
	body        []byte
}

// recorded builds an answer from testdata files, joined by a blank line where a file does not
// end in one (the vLLM samples are excerpts). The status and Content-Type come from the first
// file's NAME.headers when it is a NAME.body, otherwise from status (0: 200) and the extension.
func recorded(t testing.TB, status int, files ...string) answer {
	t.Helper()
	a := answer{status: status}
	for i, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !bytes.HasSuffix(a.body, []byte("\n\n")) {
			if !bytes.HasSuffix(a.body, []byte("\n")) {
				a.body = append(a.body, '\n')
			}
			a.body = append(a.body, '\n')
		}
		a.body = append(a.body, b...)
	}
	first := files[0]
	if name, ok := strings.CutSuffix(first, ".body"); ok {
		hb, err := os.ReadFile(filepath.Join("testdata", name+".headers"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(hb)), nil)
		if err != nil {
			t.Fatalf("%s.headers: %v", name, err)
		}
		a.status, a.contentType = resp.StatusCode, resp.Header.Get("Content-Type")
	}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.contentType == "" {
		a.contentType = "text/event-stream"
		if strings.HasSuffix(first, ".json") {
			a.contentType = "application/json"
		}
	}
	return a
}

// seen is the last request a test server got.
type seen struct {
	mu     sync.Mutex
	method string
	path   string
	header http.Header
	body   []byte
}

func (s *seen) get() (method, path string, header http.Header, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.method, s.path, s.header, s.body
}

// replay starts a server answering every request with a, and returns an engine for it.
func replay(t *testing.T, cfg Config, a answer) (*Engine, *seen) {
	t.Helper()
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.method, s.path, s.header, s.body = r.Method, r.URL.Path, r.Header.Clone(), body
		s.mu.Unlock()
		w.Header().Set("Content-Type", a.contentType)
		w.WriteHeader(a.status)
		w.Write(a.body)
	}))
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + "/v1"
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, s
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		baseURL string
		wantErr string
		wantURL string
	}{
		{"vllm", "http://127.0.0.1:8000/v1", "", "http://127.0.0.1:8000/v1/chat/completions"},
		{"trailing slash", " https://gw.example/v1/ ", "", "https://gw.example/v1/chat/completions"},
		{"empty", "", "base URL is required", ""},
		{"no scheme", "localhost:8000", "scheme must be http or https", ""},
		{"ftp", "ftp://h/v1", "scheme must be http or https", ""},
		{"no host", "http:///v1", "no host", ""},
		{"query", "http://h/v1?key=x", "query or fragment", ""},
		{"bad", "http://h:port/v1", "base URL", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(Config{BaseURL: tt.baseURL})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New(%q) error = %v, want one containing %q", tt.baseURL, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.baseURL, err)
			}
			if e.chatURL != tt.wantURL {
				t.Errorf("chat URL = %q, want %q", e.chatURL, tt.wantURL)
			}
			if got := e.Name(); got != "openai" {
				t.Errorf("Name() = %q, want openai", got)
			}
		})
	}
}

func TestModels(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		upstream map[string]string
		want     []engine.Model
	}{
		{"vllm max_model_len", "recorded/vllm_v1_models.json", nil,
			[]engine.Model{{Name: "swiss-ai/Apertus-8B-Instruct-2509", ContextLength: 65536}}},
		{"vllm served alias", "recorded/vllm_v1_models_served_alias.json", nil,
			[]engine.Model{{Name: "acegpt13bchat", ContextLength: 2048}}},
		{"vllm 2023 without max_model_len", "recorded/vllm_v1_models_2023_no_max_model_len.json", nil,
			[]engine.Model{{Name: "Mistral-7B-Instruct-v0.1/", ContextLength: 0}}},
		{"llama.cpp meta.n_ctx", "llamacpp-server/10_models_get.body", nil,
			[]engine.Model{{Name: "tiny-utf8.gguf", ContextLength: 512}}},
		{"llama.cpp offered under mapped names", "llamacpp-server/10_models_get.body",
			map[string]string{"tiny": "tiny-utf8.gguf", "a-tiny": "tiny-utf8.gguf", "other": "other.gguf"},
			[]engine.Model{{Name: "a-tiny", ContextLength: 512}, {Name: "tiny", ContextLength: 512}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, s := replay(t, Config{Upstream: tt.upstream, APIKey: "sk-test"}, recorded(t, 0, tt.file))
			got, err := e.Models(context.Background())
			if err != nil {
				t.Fatalf("Models: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Models() = %+v, want %+v", got, tt.want)
			}
			method, path, header, _ := s.get()
			if method != http.MethodGet || path != "/v1/models" {
				t.Errorf("request = %s %s, want GET /v1/models", method, path)
			}
			if got := header.Get("Authorization"); got != "Bearer sk-test" {
				t.Errorf("Authorization = %q, want Bearer sk-test", got)
			}
		})
	}
}

func TestModels_configured(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("server asked %s %s, want no request", r.Method, r.URL.Path)
	}))
	defer srv.Close()
	want := []engine.Model{{Name: "llama3.1:8b", ContextLength: 8192}}
	e, err := New(Config{BaseURL: srv.URL, Models: want})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Models(context.Background())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Models() = %+v, %v, want %+v", got, err, want)
	}
	got[0].Name = "changed"
	if again, _ := e.Models(context.Background()); again[0].Name != "llama3.1:8b" {
		t.Errorf("Models() returned the engine's own slice")
	}
}

func TestModels_error(t *testing.T) {
	e, _ := replay(t, Config{}, answer{status: http.StatusUnauthorized, contentType: "application/json",
		body: []byte(`{"error":{"message":"Invalid API key","type":"authentication_error","code":401}}`)})
	_, err := e.Models(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Invalid API key") {
		t.Errorf("Models() error = %v, want one with 401 and the message", err)
	}
}

func TestParseError(t *testing.T) {
	tests := []struct {
		name string
		body string
		want upstreamError
		ok   bool
	}{
		{"nested", `{"error":{"message":"m","type":"t","param":null,"code":400}}`, upstreamError{"m", "t", 400}, true},
		{"nested string code", `{"error":{"message":"m","type":"t","code":"context_length_exceeded"}}`, upstreamError{"m", "t", 0}, true},
		{"flat", `{"object":"error","message":"m","type":"BadRequestError","code":400}`, upstreamError{"m", "BadRequestError", 400}, true},
		{"string error", `{"error":"model 'x' not found"}`, upstreamError{"model 'x' not found", "", 0}, true},
		{"fastapi detail", `{"detail":"Not Found"}`, upstreamError{"Not Found", "", 0}, true},
		{"plain text", "  upstream connect error\n", upstreamError{"upstream connect error", "", 0}, true},
		{"json without message", `{"foo":1}`, upstreamError{`{"foo":1}`, "", 0}, true},
		{"empty", " \n", upstreamError{}, false},
		{"long", strings.Repeat("é", 2000), upstreamError{strings.Repeat("é", 1024) + "…", "", 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseError([]byte(tt.body))
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseError(%.40q) = %+v, %v, want %+v, %v", tt.body, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseError_codeNumber(t *testing.T) {
	for _, code := range []int{400, 413, 500} {
		got, _ := parseError([]byte(`{"error":{"message":"m","code":"` + strconv.Itoa(code) + `"}}`))
		if got.code != code {
			t.Errorf("code %q: got %d, want %d", strconv.Itoa(code), got.code, code)
		}
	}
}
